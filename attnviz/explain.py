"""One query through one attention head, step by step, on the model's real numbers.

`find_query` picks the query piece from a word of the text (`ele`, `ele#2`) or a
piece index, without torch. `explain` runs the encoder to get what the chosen
layer reads, then redoes that layer's attention for one query, keeping every
intermediate: the projections split into heads, the raw scores q·kⱼ, the scale
1/√d_k, the mask, the softmax weights, the weighted sum of the values, the join
of the heads and the output projection. It also measures how much each key adds
to the output, ‖wⱼ f(xⱼ)‖ with f(x) = (x W_V + b_V) W_O restricted to the head
(Kobayashi et al. 2020, "Attention is Not Only a Weight"), since a large weight on
a small transformed value adds little.

Names: T pieces, C hidden size (= d), h heads, dk head size (= d / h).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from attnviz.errors import BadInput
from attnviz.i18n import quoted, text
from attnviz.match import find_label
from attnviz.perf import import_torch
from attnviz.views import pair_marked, resolve_index

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.model import Encoder, MultiHeadAttention
    from attnviz.prepared import Prepared
    from attnviz.tokenize import Pieces

__all__ = ["Explanation", "QueryChoice", "explain", "find_query"]


@dataclass(frozen=True)
class QueryChoice:
    """The query piece chosen with --token or --index."""

    index: int  # 0-based piece index, special tokens included
    label: str  # the piece as it appears in the text
    word: str  # the word the piece belongs to
    word_pieces: tuple[int, ...]  # every piece of that word
    note: str | None = None  # set when the word has several pieces and the first is used


def _piece_index(pieces: Pieces, index: int) -> int:
    T = len(pieces)
    if isinstance(index, bool) or not isinstance(index, int | np.integer):
        raise BadInput(f"--index must be a piece number, got {index!r}")
    if not -T <= index < T:
        raise BadInput(
            f"--index {index} is out of range: the text has {T} pieces, use 0..{T - 1} "
            f"(or -{T}..-1 from the end); `attnviz tokens` lists them"
        )
    return index % T


def find_query(
    pieces: Pieces, *, token: str | None, index: int | None, lang: str = "en"
) -> QueryChoice:
    """The query piece named by exactly one of `token` (a word) or `index` (a piece).

    `token` is matched ignoring case and accents (`joao` finds `João`); `ele#2` is the
    second occurrence of `ele`. For a word of several pieces the query is its first
    piece, and `note` (in `lang`) says so. `index` counts pieces as `attnviz tokens`
    lists them; negative counts from the end.
    """
    if (token is None) == (index is None):
        raise BadInput("name the query with exactly one of --token WORD or --index N")
    words = pieces.words()
    if index is not None:
        i = _piece_index(pieces, index)
        word = next(w for w in words if i in w.pieces)
        return QueryChoice(i, pieces.labels[i], word.label, tuple(word.pieces))
    assert token is not None
    word = words[find_label([w.label for w in words], token, "--token")]
    first = word.pieces[0]
    note = None
    if len(word.pieces) > 1:
        note = text(
            lang,
            "step1_word",
            word=quoted(word.label),
            count=len(word.pieces),
            pieces=", ".join(pieces.labels[p] for p in word.pieces),
            label=quoted(pieces.labels[first]),
        )
    return QueryChoice(first, pieces.labels[first], word.label, tuple(word.pieces), note)


@dataclass(frozen=True, eq=False, repr=False)
class Explanation:
    """Every number of one query's attention in one head, as plain numpy arrays (read-only)."""

    model: str
    layer: int  # resolved, 0-based
    head: int  # resolved, 0-based
    num_layers: int
    causal: bool  # computed with the causal what-if mask
    labels: tuple[str, ...]  # (T,) pieces as they appear in the text
    words: tuple[str, ...]  # (T,) the word each piece belongs to
    query: int  # the query's piece index
    word_pieces: tuple[int, ...]  # the pieces of the query's word
    hidden_size: int  # d = C
    num_heads: int  # h
    head_size: int  # d_k = d / h
    scale: float  # 1 / sqrt(d_k)
    q: np.ndarray  # (dk,) this head's query vector
    k: np.ndarray  # (T, dk) this head's keys
    v: np.ndarray  # (T, dk) this head's values
    raw_scores: np.ndarray  # (T,) q·kⱼ
    scaled_scores: np.ndarray  # (T,) q·kⱼ / sqrt(d_k), before the mask
    hidden: np.ndarray  # (T,) bool, True where the mask hides the key
    weights: np.ndarray  # (T,) softmax of the masked scaled scores
    transformed_norms: np.ndarray  # (T,) ‖f(xⱼ)‖
    contributions: np.ndarray  # (T,) ‖wⱼ f(xⱼ)‖
    head_output: np.ndarray  # (dk,) o = Σ wⱼ vⱼ
    head_share: np.ndarray  # (C,) o @ W_O[:, head slice].T, this head's part of the output
    joined: np.ndarray  # (C,) every head's output for the query, side by side
    output: np.ndarray  # (C,) joined @ W_O.T + b_O, the attention's output for the query
    lang: str = "en"  # the language it prints in: "en" or "pt"

    def __post_init__(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    def __repr__(self) -> str:
        query = self.labels[self.query]
        return (
            f"<Explanation of {query!r} (piece {self.query}), layer {self.layer}, head {self.head}>"
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """`rich.print(explanation)` prints it as `attnviz explain` does."""
        from attnviz.render.explain import ExplanationView

        yield ExplanationView(self, self.lang)

    @property
    def num_pieces(self) -> int:
        return len(self.labels)

    @property
    def head_columns(self) -> range:
        """The columns of Q, K, V (and rows of W_O) that belong to this head."""
        return range(self.head * self.head_size, (self.head + 1) * self.head_size)

    @property
    def weight_sum(self) -> float:
        return float(self.weights.astype(np.float64).sum())

    @property
    def output_norm(self) -> float:
        return float(np.linalg.norm(self.output))

    @property
    def top_weight(self) -> int:
        return int(np.argmax(self.weights))

    @property
    def top_contribution(self) -> int:
        return int(np.argmax(self.contributions))


def explain(
    prepared: Prepared,
    *,
    layer: int,
    head: int,
    query: int,
    causal: bool = False,
    encoder: Encoder | None = None,
) -> Explanation:
    """Redo layer `layer`'s attention for `head` and the piece `query`, keeping each step.

    Negative `layer`, `head` and `query` count from the end. `encoder` is the loaded
    model for `prepared` (loaded here when None).
    """
    import_torch()
    import torch

    from attnviz.model import hiding_mask
    from attnviz.weights import load_encoder

    pieces = prepared.pieces
    b_start = next((i for i, seq in enumerate(pieces.sequence_ids) if seq == 1), None)
    T = len(pieces)
    query = _piece_index(pieces, query)
    if encoder is None:
        encoder = cast("Encoder", load_encoder(prepared.source.folder, prepared.config))
    layer = resolve_index(layer, len(encoder.layers), "layer")
    attention = cast("MultiHeadAttention", encoder.layers[layer].attention)
    nh, dk = attention.num_heads, attention.head_size
    head = resolve_index(head, nh, "head")
    columns = slice(head * dk, (head + 1) * dk)

    input_ids = torch.tensor([pieces.ids])  # (1, T)
    type_ids = torch.tensor([pieces.type_ids])  # (1, T)
    with torch.inference_mode():
        out = encoder(input_ids, type_ids, causal=causal, keep_inputs=True)
        x = out.layer_inputs[layer, 0]  # (T, C): what this layer's attention reads
        C = x.shape[-1]
        Q = attention.split_heads(attention.q_proj(x)[None])[0]  # (nh, T, dk)
        K = attention.split_heads(attention.k_proj(x)[None])[0]  # (nh, T, dk)
        V = attention.split_heads(attention.v_proj(x)[None])[0]  # (nh, T, dk)

        q = Q[:, query]  # (nh, dk): the query's vector in every head
        raw = torch.einsum("hd,htd->ht", q, K)  # (nh, T): q·kⱼ for every key, every head
        scaled = raw / math.sqrt(dk)  # (nh, T)
        mask = hiding_mask(None, causal, T, x.device)  # (T, T) or None; True hides
        if mask is None:
            hidden = torch.zeros(T, dtype=torch.bool)  # (T,): nothing hidden
        else:
            hidden = mask.reshape(-1, T, T)[0, query]  # (T,): True where the key is hidden
        weights = torch.softmax(scaled.masked_fill(hidden, float("-inf")), dim=-1)  # (nh, T)
        heads_out = torch.einsum("ht,htd->hd", weights, V)  # (nh, dk): o = Σⱼ wⱼ vⱼ per head
        joined = heads_out.reshape(C)  # (C,) = h × dk, the heads side by side
        output = attention.out_proj(joined)  # (C,)

        W_O = attention.out_proj.weight[:, columns]  # (C, dk): this head's rows of W_O
        transformed = V[head] @ W_O.T  # (T, C): f(xⱼ) = (xⱼ W_V + b_V)[head] W_O[head]
        transformed_norms = transformed.norm(dim=-1)  # (T,)
        head_share = heads_out[head] @ W_O.T  # (C,)

    def numpy(t: torch.Tensor) -> np.ndarray:
        return t.detach().float().cpu().numpy().copy()

    words = pieces.words()
    word_of = {i: w.label for w in words for i in w.pieces}
    query_word = next(w for w in words if query in w.pieces)
    name = prepared.source.name
    weights_np = numpy(weights[head])  # (T,)
    norms_np = numpy(transformed_norms)  # (T,)
    return Explanation(
        model=name,
        layer=layer,
        head=head,
        num_layers=len(encoder.layers),
        causal=causal,
        labels=tuple(pair_marked(pieces.labels, b_start)),
        words=tuple(word_of[i] for i in range(T)),
        query=query,
        word_pieces=tuple(query_word.pieces),
        hidden_size=int(C),
        num_heads=nh,
        head_size=dk,
        scale=1.0 / math.sqrt(dk),
        q=numpy(q[head]),
        k=numpy(K[head]),
        v=numpy(V[head]),
        raw_scores=numpy(raw[head]),
        scaled_scores=numpy(scaled[head]),
        hidden=hidden.cpu().numpy().copy(),
        weights=weights_np,
        transformed_norms=norms_np,
        contributions=weights_np * norms_np,  # ‖wⱼ f(xⱼ)‖ = wⱼ ‖f(xⱼ)‖ since wⱼ ≥ 0
        head_output=numpy(heads_out[head]),
        head_share=numpy(head_share),
        joined=numpy(joined),
        output=numpy(output),
    )

"""One query through one attention head, step by step, on the model's real numbers.

`find_query` picks the query piece from a word of the text (`ele`, `ele#2`) or a
piece index, without torch. `explain` runs the model to get what the chosen
layer reads, then redoes that layer's attention for one query, keeping every
intermediate: the projections split into heads, the raw scores q·kⱼ, the scale
1/√d_k, the mask, the softmax weights, the weighted sum of the values, the join
of the heads and the output projection. It also measures how much each key adds
to the output, ‖wⱼ f(xⱼ)‖ with f(x) = (x W_V + b_V) W_O restricted to the head
(Kobayashi et al. 2020, "Attention is Not Only a Weight"), since a large weight on
a small transformed value adds little.

On a decoder the same steps run as the decoder runs them: the attention reads the
layer's input after its pre-norm; Llama-family models turn q and k by their
positions' angles (rotary) before the scores; a query head reads the key/value head
of its group (grouped-query attention); the scale is the config's (GPT-2 may add
1/(layer + 1)); and the mask is the model's own causal mask, with the layer's
sliding window when it has one. Qwen3 and Gemma 3 normalise each head's q and k (QK-norm)
before the rotation; Gemma scales by query_pre_attn_scalar ** -0.5 and Gemma 2 soft-caps
the scaled scores (tanh(s / cap) · cap) before the mask; Gemma 3's sliding layers turn
by their own rotary base, and Phi-3 may turn only part of each head.

Names: T pieces, C hidden size (= d), h query heads, n_kv key/value heads, dk head
size (d / h in an encoder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnviz.errors import BadInput
from attnviz.i18n import quoted, text
from attnviz.limits import resolve_index
from attnviz.measures.select import pair_marked
from attnviz.perf import import_torch
from attnviz.text.match import find_label

if TYPE_CHECKING:
    import torch
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.measures.model_input import ModelInput
    from attnviz.model.attention import MultiHeadAttention
    from attnviz.model.decoder import Decoder
    from attnviz.model.encoder import Encoder
    from attnviz.text.pieces import Pieces

__all__ = ["Explanation", "QueryChoice", "explain", "find_query"]


@dataclass(frozen=True)
class QueryChoice:
    """The query piece chosen with --token or --index."""

    index: int  # 0-based piece index, special tokens included
    label: str  # the piece as it appears in the text
    word: str  # the word the piece belongs to
    word_pieces: tuple[int, ...]  # every piece of that word
    note: str | None = None  # set when the word has several pieces and the first is used


def _piece_index(pieces: Pieces, index: int, param: str) -> int:
    """`index` as a 0-based piece number (negative counts from the end); BadInput naming
    the parameter `param` that gave it."""
    T = len(pieces)
    name = "{" + param + "}"
    if isinstance(index, bool) or not isinstance(index, int | np.integer):
        raise BadInput(f"{name} must be a piece number, got {index!r}", param=param)
    if not -T <= index < T:
        raise BadInput(
            f"{name} {index} is out of range: the text has {T} pieces, use 0..{T - 1} "
            f"(or -{T}..-1 from the end); `attnviz tokens` lists them",
            param=param,
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
        raise BadInput(
            "name the query with exactly one of {token} WORD or {index} N", param=("token", "index")
        )
    if token is not None and not isinstance(token, str):
        raise BadInput(
            f"{{token}} must be a word of the text (a str), got {type(token).__name__}; a piece "
            "number is {index}",
            param=("token", "index"),
        )
    words = pieces.words()
    if index is not None:
        i = _piece_index(pieces, index, "index")
        word = next(w for w in words if i in w.pieces)
        return QueryChoice(i, pieces.labels[i], word.label, tuple(word.pieces))
    assert token is not None
    word = words[find_label([w.label for w in words], token, "token")]
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
    # Decoders (GPT-2, Llama, Mistral, Qwen2); an encoder keeps these defaults.
    decoder: bool = False  # the mask in `hidden` is the model's own causal mask
    norm: str | None = None  # the pre-norm the attention reads X through: LayerNorm, RMSNorm
    kv_head: int | None = None  # the key/value head this query head reads (None: its own)
    num_kv_heads: int | None = None  # n_kv, when fewer than num_heads (grouped-query)
    window: int | None = None  # the layer's sliding window, in tokens
    angles: np.ndarray | None = None  # (dk/2,) rotary: the query position's angle per pair
    rope_theta: float | None = None  # rotary base θ
    rope_type: str | None = None  # rotary scaling: "default", "linear", "llama3"
    q_unrotated: np.ndarray | None = None  # (dk,) q before the rotation
    k_unrotated: np.ndarray | None = None  # (T, dk) the keys before the rotation
    scale_root: bool = True  # the scale includes 1/sqrt(d_k) (GPT-2 may turn it off)
    scale_layer: int | None = None  # GPT-2's scale_attn_by_inverse_layer_idx: 1/(layer + 1)
    qkv_bias: bool = True  # W_Q, W_K, W_V have biases (Llama's do not)
    out_bias: bool = True  # W_O has a bias
    # Gemma 2 and 3, Qwen3, Phi-3.
    q_unnormed: np.ndarray | None = None  # (dk,) QK-norm: q before it (q_unrotated is after)
    k_unnormed: np.ndarray | None = None  # (T, dk) the keys before QK-norm
    softcap: float | None = None  # soft-capping: the scores' bound
    capped_scores: np.ndarray | None = None  # (T,) tanh(sⱼ / cap) · cap, before the mask
    query_pre_attn_scalar: float | None = None  # Gemma: the scale is its ** -0.5
    rope_local: bool = False  # Gemma 3: this sliding layer's own rotary base
    rope_global_theta: float | None = None  # ... and the base of the full layers
    rotary_dims: int | None = None  # Phi-3: the features turned, when fewer than dk
    # How much this head writes: ‖oᵢ·W_O[head]ᵀ‖ for every query i of this head, and for this
    # query in every head (None where not computed). A sink's query writes little.
    share_norms: np.ndarray | None = None  # (T,) every query's, in this head
    head_share_norms: np.ndarray | None = None  # (h,) this query's, in every head
    top_column: np.ndarray | None = None  # (T,) every query's weight on this query's top key

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

    def _repr_html_(self) -> str:
        """A notebook cell that ends in an explanation shows the walkthrough `attnviz
        explain` prints, as HTML."""
        from attnviz.render.explain import ExplanationView
        from attnviz.render.notebook import rich_html

        return rich_html(ExplanationView(self, self.lang))

    @property
    def num_pieces(self) -> int:
        return len(self.labels)

    @property
    def head_columns(self) -> range:
        """The columns of Q, K, V (and rows of W_O) that belong to this head."""
        return range(self.head * self.head_size, (self.head + 1) * self.head_size)

    @property
    def kv_columns(self) -> range:
        """The columns of K and V (the key/value head) this query head reads."""
        kv = self.head if self.kv_head is None else self.kv_head
        return range(kv * self.head_size, (kv + 1) * self.head_size)

    @property
    def groups(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return self.num_heads // (self.num_kv_heads or self.num_heads)

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

    @property
    def sink(self) -> int | None:
        """The key that looks like an attention sink for this query, or None.

        A sink takes most of the weight (over half) while its transformed value ‖f(xⱼ)‖
        is small, under half the median of the other keys the query sees: the head parks
        there and adds little (Xiao et al. 2023; Kobayashi et al. 2020 saw it on [CLS]).
        """
        w = self.top_weight
        seen = ~self.hidden  # (T,)
        seen[w] = False
        if self.weights[w] <= SINK_WEIGHT or not seen.any():
            return None
        others = float(np.median(self.transformed_norms[seen]))
        return w if self.transformed_norms[w] < SINK_NORM_RATIO * others else None

    @property
    def parked_share(self) -> float | None:
        """The share of the queries that see the sink putting over half their weight on it
        (the query itself included); None without a sink or the head's weights."""
        sink = self.sink
        if sink is None or self.top_column is None:
            return None
        seeing = (
            np.arange(self.num_pieces) >= sink if self.decoder else np.ones(self.num_pieces, bool)
        )
        return float((self.top_column[seeing] > SINK_WEIGHT).mean())

    @property
    def others_median_norm(self) -> float:
        """The median ‖f(xⱼ)‖ of the keys the query sees, but the top-weighted one."""
        seen = ~self.hidden  # (T,)
        seen[self.top_weight] = False
        return float(np.median(self.transformed_norms[seen])) if seen.any() else 0.0


SINK_WEIGHT = 0.5  # a sink takes more than this share of the query's weight
SINK_NORM_RATIO = 0.5  # and its ‖f(x)‖ is under this share of the other keys' median


def explain(
    prepared: ModelInput,
    *,
    layer: int,
    head: int,
    query: int,
    causal: bool = False,
    encoder: Encoder | Decoder | None = None,
) -> Explanation:
    """Redo layer `layer`'s attention for `head` and the piece `query`, keeping each step.

    Negative `layer`, `head` and `query` count from the end. `encoder` is the loaded
    model for `prepared` (loaded here when None): an encoder, or a decoder, which runs
    with its own causal mask (`causal`, the what-if, is for encoders).
    """
    import_torch()
    import torch

    from attnviz.model.attention import Rotary
    from attnviz.model.decoder import decoder_mask, rope_attention_factor, rotary_frequencies
    from attnviz.model.encoder import hiding_mask
    from attnviz.model.weights import load_encoder

    pieces = prepared.pieces
    b_start = next((i for i, seq in enumerate(pieces.sequence_ids) if seq == 1), None)
    T = len(pieces)
    query = _piece_index(pieces, query, "query")
    if encoder is None:
        encoder = cast("Encoder", load_encoder(prepared.source.folder, prepared.config))
    cfg = prepared.shape.decoder  # DecoderConfig, or None for an encoder
    layer = resolve_index(layer, len(encoder.layers), "layer")
    block = encoder.layers[layer]
    attention = cast("MultiHeadAttention", block.attention)
    nh, dk, g = attention.num_heads, attention.head_size, attention.groups
    head = resolve_index(head, nh, "head")
    kv = head // g  # the key/value head this query head reads
    columns = slice(head * dk, (head + 1) * dk)

    input_ids = torch.tensor([pieces.ids])  # (1, T)
    type_ids = torch.tensor([pieces.type_ids])  # (1, T)
    with torch.inference_mode():
        # Run up to this layer only, keeping no attention but its own: a long input's
        # other layers would cost their T·T arrays for nothing.
        out = encoder(input_ids, type_ids, causal=causal, keep_inputs=True, layers=[layer])
        x = out.layer_inputs[layer, 0]  # (T, C): what this layer reads
        if cfg is not None:
            norm = cast("torch.nn.Module", block.norm1)
            x = norm(x)  # (T, C): a decoder's attention reads its pre-norm's output
        C = x.shape[-1]
        Q = attention.split_heads(attention.q_proj(x)[None])[0]  # (nh, T, dk)
        K = attention.split_heads(attention.k_proj(x)[None])[0]  # (n_kv, T, dk)
        V = attention.split_heads(attention.v_proj(x)[None])[0]  # (n_kv, T, dk)
        Q_raw, K_raw = Q, K
        if attention.q_norm is not None and attention.k_norm is not None:  # QK-norm
            Q, K = attention.q_norm(Q), attention.k_norm(K)  # (nh, T, dk), (n_kv, T, dk)
        Q_plain, K_plain = Q, K
        rotary = None
        if cfg is not None and cfg.rotary:  # Llama family: turn q and k by position
            local = cfg.local_rope(layer)  # Gemma 3's sliding layers: their own base
            inv_freq = rotary_frequencies(cfg, local, T)  # (r/2,)
            rotary = Rotary(inv_freq, torch.arange(T), x.dtype, rope_attention_factor(cfg, local))
            Q = rotary.rotate(Q[None])[0]  # (nh, T, dk)
            K = rotary.rotate(K[None])[0]  # (n_kv, T, dk)
        K = K.repeat_interleave(g, dim=0)  # (nh, T, dk): query head h reads K[h // g]
        V = V.repeat_interleave(g, dim=0)  # (nh, T, dk)

        q = Q[:, query]  # (nh, dk): the query's vector in every head
        raw = torch.einsum("hd,htd->ht", q, K)  # (nh, T): q·kⱼ for every key, every head
        scaled = raw * attention.scale  # (nh, T): 1/sqrt(dk), or the decoder config's scale
        cap = attention.softcap
        capped = scaled if cap is None else torch.tanh(scaled / cap) * cap  # (nh, T)
        mask: torch.Tensor | None  # (T, T) or None; True hides
        if cfg is not None:  # the model's own mask: causal, and the layer's window
            mask = decoder_mask(T, cfg.window(layer), None, x.device)
        else:
            mask = hiding_mask(None, causal, T, x.device)
        if mask is None:
            hidden = torch.zeros(T, dtype=torch.bool)  # (T,): nothing hidden
        else:
            hidden = mask.reshape(-1, T, T)[0, query]  # (T,): True where the key is hidden
        weights = torch.softmax(capped.masked_fill(hidden, float("-inf")), dim=-1)  # (nh, T)
        heads_out = torch.einsum("ht,htd->hd", weights, V)  # (nh, dk): o = Σⱼ wⱼ vⱼ per head
        joined = heads_out.reshape(-1)  # (nh·dk,), the heads side by side
        output = attention.out_proj(joined)  # (C,)

        W_O = attention.out_proj.weight[:, columns]  # (C, dk): this head's rows of W_O
        transformed = V[head] @ W_O.T  # (T, C): f(xⱼ) = (xⱼ W_V + b_V)[head] W_O[head]
        transformed_norms = transformed.norm(dim=-1)  # (T,)
        head_share = heads_out[head] @ W_O.T  # (C,)
        share_norms, every_weight = _share_norms(Q[head], K[head], V[head], W_O, attention, mask, T)
        top_column = every_weight[:, int(weights[head].argmax())]  # (T,)
        W_O_heads = attention.out_proj.weight.reshape(C, nh, dk)  # (C, nh, dk)
        head_share_norms = torch.einsum("hd,chd->hc", heads_out, W_O_heads).norm(dim=-1)  # (nh,)

    def numpy(t: torch.Tensor) -> np.ndarray:
        return t.detach().float().cpu().numpy().copy()

    words = pieces.words()
    word_of = {i: w.label for w in words for i in w.pieces}
    query_word = next(w for w in words if query in w.pieces)
    name = prepared.source.name
    weights_np = numpy(weights[head])  # (T,)
    norms_np = numpy(transformed_norms)  # (T,)
    decoder: dict[str, Any] = {}
    if cfg is not None:
        decoder = dict(
            decoder=True,
            norm="LayerNorm" if cfg.norm == "layer" else "RMSNorm",
            kv_head=kv,
            num_kv_heads=attention.num_kv_heads,
            window=cfg.window(layer),
            scale_root=cfg.scale_attn_weights,
            scale_layer=layer + 1 if cfg.scale_by_inverse_layer else None,
            query_pre_attn_scalar=cfg.query_pre_attn_scalar,
        )
    if rotary is not None:
        assert cfg is not None
        decoder |= dict(
            angles=numpy(rotary.angles[query, : rotary.angles.shape[-1] // 2]),
            rope_theta=cfg.rope_base(layer),
            rope_type=str(dict(cfg.layer_rope_scaling(layer)).get("rope_type", "default")),
            q_unrotated=numpy(Q_plain[head, query]),
            k_unrotated=numpy(K_plain[kv]),
            rope_local=cfg.local_rope(layer),
            rope_global_theta=cfg.rope_theta,
            rotary_dims=cfg.rotary_dims,
        )
    if attention.q_norm is not None:
        decoder |= dict(q_unnormed=numpy(Q_raw[head, query]), k_unnormed=numpy(K_raw[kv]))
    if cap is not None:
        decoder |= dict(softcap=float(cap), capped_scores=numpy(capped[head]))
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
        scale=float(attention.scale),
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
        share_norms=numpy(share_norms),
        head_share_norms=numpy(head_share_norms),
        top_column=numpy(top_column),
        qkv_bias=attention.q_proj.bias is not None,
        out_bias=attention.out_proj.bias is not None,
        **decoder,
    )


def _share_norms(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    W_O: torch.Tensor,
    attention: MultiHeadAttention,
    mask: torch.Tensor | None,
    T: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """‖oᵢ·W_Oᵀ‖ for every query i of one head, how much it writes for each query (T,), and
    the head's weights (T, T). Q, K, V (T, dk) are the head's (after QK-norm and rotation),
    W_O (C, dk) its rows."""
    import torch

    scores = Q @ K.T * attention.scale  # (T, T)
    cap = attention.softcap
    if cap is not None:
        scores = torch.tanh(scores / cap) * cap
    if mask is not None:
        scores = scores.masked_fill(mask.reshape(-1, T, T)[0], float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (T, T)
    return (weights @ V @ W_O.T).norm(dim=-1), weights  # (T,), (T, T)

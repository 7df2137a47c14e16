"""A decoder writing, token by token, with what it looked at for each token (`Generation`).

`attnviz.generate` returns a `Generation`: the prompt's pieces, the new tokens, the step
of each, the continuation, and the attention of every step: for new token k, the row
[layers, heads, 1, P + k] of the query that wrote it (the last token read) over the P
prompt pieces and the k tokens written before, and the prompt's own full attention
[layers, heads, P, P]. It builds the views (`steps_view`, `analysis()` for every view of
the text read, `lens`), draws them and writes them (`save`: an image, a page with a step
slider, or the data), as `Analysis` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import AttnvizError, BadInput
from attnviz.extras import DECODER_AT_HAND, offer
from attnviz.limits import (
    CONFIG_BYTES,
    amount,
    attention_budget,
    check_choice,
    check_export,
    resolve_index,
)
from attnviz.output import (
    DATA_SUFFIXES,
    HTML_SUFFIXES,
    IMAGE_SUFFIXES,
    ImageStyle,
    as_path,
    atomic_write,
    check_output,
)
from attnviz.prepared import Prepared
from attnviz.text.pieces import Pieces

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.analysis import Analysis
    from attnviz.measures.lens import Lens
    from attnviz.measures.steps import StepsView

__all__ = ["MAX_NEW", "Generation"]

# The most tokens one call writes. Each step keeps one attention row per layer and head
# over everything before it: for a 30-layer, 9-head model after a 100-piece prompt, 512
# new tokens keep 270 × (100² + 512·100 + 512²/2) float32 numbers, about 210 MB.
MAX_NEW = 512


@dataclass(frozen=True, eq=False, repr=False)
class Generation:
    """What a decoder wrote after a prompt, and what it attended to at each step.

    `pieces` are the prompt's pieces followed by the new tokens (`steps[k]` is new token
    k's index in them). `step_attentions[k]` is (L, H, 1, P + k): the row of the query
    that wrote token k (piece P - 1 + k, the last one read) over the pieces before token k.
    The last new token is written but never read, so the tokens read are pieces[:-1].
    """

    prompt: Prepared  # the prompt, tokenized (its model, config and pieces)
    pieces: Pieces  # the prompt's pieces and the new tokens, labelled in the whole text
    new_ids: tuple[int, ...]
    continuation: str  # the new tokens as text (special tokens left out)
    prompt_attention: np.ndarray  # (L, H, P, P) float32
    step_attentions: tuple[np.ndarray, ...]  # step k: (L, H, 1, P + k) float32
    stopped_at_eos: bool = False
    sampled: bool = False
    dtype: str = "float32"
    _decoder: Any = None  # the loaded decoder, kept for the lens (not part of the result)

    # ------------------------------------------------------------ what it holds

    @property
    def model(self) -> str:
        return self.prompt.source.name

    @property
    def title(self) -> str:
        name = self.model + (f" (in {self.dtype})" if self.dtype != "float32" else "")
        return name + (" · sampled" if self.sampled else " · greedy")

    @property
    def prompt_length(self) -> int:
        return len(self.prompt.pieces)

    @property
    def steps(self) -> list[int]:
        """The index in `pieces` of each new token: P, P + 1, ..."""
        return [self.prompt_length + k for k in range(len(self.new_ids))]

    @property
    def new_tokens(self) -> list[str]:
        """The new tokens' labels (the text each one wrote)."""
        return self.pieces.labels[self.prompt_length :]

    @property
    def text(self) -> str:
        """The prompt followed by the continuation."""
        return self.prompt.pieces.text + self.continuation

    def __repr__(self) -> str:
        L, H = self.prompt_attention.shape[:2]
        return (
            f"<Generation {self.model}: {len(self.new_ids)} new tokens after "
            f"{self.prompt_length} pieces, {L} layers × {H} heads, "
            f"continuation={self.continuation[:40]!r}>"
        )

    # ------------------------------------------------------------ arrays

    def step_matrix(self, layer: int = -1, head: int | None = None) -> np.ndarray:
        """(N, P + N - 1): row k is step k's weights over the tokens read; later keys NaN."""
        L, H = self.prompt_attention.shape[:2]
        layer = resolve_index(layer, L, "layer")
        head = None if head is None else resolve_index(head, H, "head")
        width = len(self.pieces) - 1
        matrix = np.full((len(self.new_ids), width), np.nan, dtype=np.float32)  # (N, T_read)
        for k, rows in enumerate(self.step_attentions):
            row = rows[layer, :, 0] if head is None else rows[layer, head : head + 1, 0]  # (h, Tk)
            matrix[k, : row.shape[1]] = row.mean(axis=0)
        return matrix

    def attentions(self) -> np.ndarray:
        """(L, H, T, T) over the T = P + N - 1 tokens read: the prompt's rows, then each step's.

        The same numbers as the whole text read at once (the cache changes nothing).
        """
        L, H, P, _ = self.prompt_attention.shape
        T = len(self.pieces) - 1
        full = np.zeros((L, H, T, T), dtype=np.float32)  # (L, H, T, T)
        full[:, :, :P, :P] = self.prompt_attention
        for k, rows in enumerate(self.step_attentions[1:], start=1):
            full[:, :, P - 1 + k, : P + k] = rows[:, :, 0]  # (L, H, P + k)
        return full

    def analysis(self) -> Analysis:
        """Every view of `Analysis` (view, heads, model_view, rollout, find, html, save) over
        the tokens read: the prompt and the new tokens but the last."""
        from attnviz.analysis import Analysis

        read = _cut(self.pieces, len(self.pieces) - 1)
        prepared = Prepared(self.prompt.source, self.prompt.config, read, bos=self.prompt.bos)
        return Analysis(prepared, self.attentions(), False, self.dtype)

    # ------------------------------------------------------------ views

    def steps_view(self, layer: int = -1, head: int | None = None) -> StepsView:
        """One row per new token over the tokens read before it (one head, or the mean)."""
        from attnviz.measures.steps import StepsView

        L, H = self.prompt_attention.shape[:2]
        resolved = resolve_index(layer, L, "layer")
        which = (
            f"head {resolve_index(head, H, 'head')}" if head is not None else f"mean of {H} heads"
        )
        labels = self.pieces.labels
        return StepsView(
            matrix=self.step_matrix(layer, head),
            rows=labels[self.prompt_length :],
            keys=labels[:-1],
            title=f"{self.title} · layer {resolved} · {which} · each new token's attention",
            model=self.model,
            layer=resolved,
            head=head if head is None else resolve_index(head, H, "head"),
        )

    def lens(self) -> Lens:
        """The logit lens over the whole text read: each layer's top next-token guess at
        each position, its final norm applied before the LM head."""
        from attnviz.measures.lens import Lens
        from attnviz.model.lens import logit_lens
        from attnviz.text.tokenize import load_tokenizer

        read = self.pieces.ids[:-1] if len(self.new_ids) else self.pieces.ids
        top, p = logit_lens(self._decoder, read)
        tokenizer = load_tokenizer(self.prompt.source.folder)
        guesses = [[tokenizer.decode([int(i)]) for i in layer] for layer in top.tolist()]
        return Lens(
            ids=top.numpy(),
            probabilities=p.numpy(),
            guesses=guesses,
            labels=self.pieces.labels[: len(read)],
            title=f"{self.model} · logit lens: each layer's top next-token guess",
        )

    # ------------------------------------------------------------ files

    def figure(
        self,
        *,
        layer: int = -1,
        head: int | None = None,
        cmap: str = "viridis",
        theme: str = "light",
        annotate: bool = False,
    ) -> Figure:
        """The steps view as a matplotlib Figure."""
        return self.steps_view(layer, head).figure(cmap=cmap, theme=theme, annotate=annotate)

    def save(
        self,
        path: str | Path,
        *,
        layer: int = -1,
        head: int | None = None,
        dpi: int = 200,
        cmap: str = "viridis",
        theme: str | None = None,
        transparent: bool = False,
        annotate: bool = False,
    ) -> Path:
        """Write the steps view as an image (.png, .svg, .pdf), a page with a step slider
        (.html) or the data (.json, .npz; see `to_dict`). All of the file or nothing."""
        path = as_path(path)
        style = ImageStyle(dpi, cmap, theme or "light", transparent, annotate)
        check_output(path, IMAGE_SUFFIXES + HTML_SUFFIXES + DATA_SUFFIXES, style)
        suffix = path.suffix.lower()
        if suffix in DATA_SUFFIXES:
            self._write_data(path)
        elif suffix in HTML_SUFFIXES:
            page = self.html(layer=layer, head=head, theme=theme or "auto")
            with atomic_write(path, "w") as handle:
                handle.write(page)
        else:
            self.steps_view(layer, head).save(
                path, dpi=dpi, cmap=cmap, theme=style.theme, transparent=transparent,
                annotate=annotate,
            )  # fmt: skip
        return path

    def html(self, *, layer: int = -1, head: int | None = None, theme: str = "auto") -> str:
        """One self-contained page, offline: a slider steps through the new tokens; at each
        step, the text so far shaded by what the new token attended to, and the same head
        view and matrix as `Analysis.html` over the tokens read until then."""
        from attnviz.render.html import steps_page

        return self._steps_html(steps_page, layer, head, theme)

    def _steps_html(
        self, write: Callable[..., str], layer: int, head: int | None, theme: str
    ) -> str:
        check_choice(theme, ("auto", "light", "dark"), "theme")
        view = self.steps_view(layer, head)
        attentions = self.attentions()
        check_export(".html", attentions.size)
        return write(
            attentions,
            self.pieces.labels,
            prompt_length=self.prompt_length,
            title=self.title,
            layer=view.layer,
            head=view.head,
            theme=theme,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record `.json` holds (`.npz` holds the same; see `_write_data`)."""
        L = self.prompt_attention.shape[0]
        return {
            "model": self.model,
            "kind": "decoder, causal",
            "dtype": self.dtype,
            "prompt": self.prompt.pieces.text,
            "continuation": self.continuation,
            "tokens": list(self.pieces.tokens),  # the prompt's pieces, then the new tokens
            "labels": list(self.pieces.labels),
            "input_ids": list(self.pieces.ids),
            "prompt_length": self.prompt_length,
            "steps": self.steps,  # each new token's index in tokens
            "new_tokens": self.new_tokens,
            "sampled": self.sampled,
            "stopped_at_eos": self.stopped_at_eos,
            "layers": list(range(L)),
            "prompt_attention": self.prompt_attention.tolist(),  # (L, H, P, P)
            "step_attentions": [rows.tolist() for rows in self.step_attentions],  # (L, H, 1, P+k)
        }

    def _write_data(self, path: Path) -> None:
        weights = self.prompt_attention.size + sum(r.size for r in self.step_attentions)
        check_export(path.suffix, weights)
        if path.suffix.lower() == ".json":
            with atomic_write(path, "w") as handle:
                json.dump(self.to_dict(), handle, ensure_ascii=False)
            return
        L, H, P, _ = self.prompt_attention.shape
        N = len(self.new_ids)
        steps = np.zeros((N, L, H, P + N - 1), dtype=np.float32)  # row k: the first P + k
        for k, rows in enumerate(self.step_attentions):
            steps[k, :, :, : P + k] = rows[:, :, 0]
        arrays: dict[str, Any] = dict(
            tokens=np.array(self.pieces.tokens, dtype=np.str_),
            labels=np.array(self.pieces.labels, dtype=np.str_),
            input_ids=np.array(self.pieces.ids, dtype=np.int64),
            prompt_length=np.array(P),
            steps=np.array(self.steps, dtype=np.int64),  # (N,)
            prompt_attention=self.prompt_attention.astype(np.float32),  # (L, H, P, P)
            step_attentions=steps,  # (N, L, H, P + N - 1), zero past each step's P + k
            model=np.array(self.model, dtype=np.str_),
            prompt=np.array(self.prompt.pieces.text, dtype=np.str_),
            continuation=np.array(self.continuation, dtype=np.str_),
            dtype=np.array(self.dtype, dtype=np.str_),
            sampled=np.array(self.sampled),
        )
        with atomic_write(path, "wb") as handle:
            np.savez(handle, **arrays)

    # ------------------------------------------------------------ display

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.steps_view()

    def _repr_html_(self) -> str | None:
        """A notebook cell that ends in a generation shows the step slider of `html()`
        (nothing when it is past what a page holds: the image then shows instead)."""
        from attnviz.render.html import steps_fragment

        try:
            return self._steps_html(steps_fragment, -1, None, "auto")
        except BadInput:
            return None

    def _repr_png_(self) -> bytes:
        return self.steps_view()._repr_png_()


# ---------------------------------------------------------------- writing


def check_generation(prepared: Prepared, max_new: int, *, dtype: str = "float32") -> None:
    """Refuse, before any weights are read, what `run` could not do: an encoder, a prompt
    and `max_new` past the model's positions, steps whose attention passes the budget."""
    shape = prepared.shape
    if shape.decoder is None:
        raise BadInput(
            f"generate needs a decoder, and {prepared.source.name} is an encoder: pass "
            f"{offer(DECODER_AT_HAND)}, a decoder's folder or .gguf file ({{model}}; attnviz "
            "models lists the models at hand)",
            param="model",
        )
    P = len(prepared.pieces)
    if P + max_new > shape.decoder.max_positions:
        raise BadInput(
            f"the prompt is {P} pieces and {{max_new}} is {max_new}: together more than the "
            f"{shape.decoder.max_positions} positions {prepared.source.name} has; write fewer "
            "tokens or shorten the prompt",
            param="max_new",
        )
    L, H = shape.layers, shape.heads
    numbers = L * H * (P * P + max_new * P + max_new * max_new // 2)
    if numbers * 4 > attention_budget():
        raise BadInput(
            f"the prompt's attention and {max_new} steps' would keep {amount(numbers * 4)}, "
            f"more than attnviz keeps ({amount(attention_budget())}, ATTNVIZ_ATTENTION_MB): "
            "lower {max_new} or shorten the prompt",
            param="max_new",
        )


def run(
    prepared: Prepared,
    *,
    max_new: int,
    sample: bool,
    temperature: float,
    top_k: int | None,
    seed: int | None,
    dtype: str,
    on_text: Callable[[str], None] | None = None,
) -> Generation:
    """Load the decoder, write, and wrap what was written (see `attnviz.generate`).

    `on_text(s)` receives the continuation as it is written, a piece of text at a time
    (held back while a character is split over byte tokens).
    """
    from attnviz import perf
    from attnviz.model.weights import load_writer
    from attnviz.model.writing import write
    from attnviz.text.tokenize import load_tokenizer

    check_generation(prepared, max_new, dtype=dtype)  # refuses an encoder
    perf.import_torch()
    decoder = load_writer(prepared.source.folder, prepared.config, dtype, to="write with it")
    tokenizer = load_tokenizer(prepared.source.folder)
    prompt_ids = list(prepared.pieces.ids)
    base = tokenizer.decode(prompt_ids)
    shown = [""]
    written_ids: list[int] = []

    def on_token(token: int) -> None:
        written_ids.append(token)
        if on_text is None:
            return
        text = _after(tokenizer.decode(prompt_ids + written_ids), base, tokenizer, written_ids)
        if text.endswith("\ufffd"):
            return  # half a character: wait for the rest of its bytes
        if text.startswith(shown[0]):
            on_text(text[len(shown[0]) :])
            shown[0] = text

    written = write(
        decoder,
        prompt_ids,
        max_new=max_new,
        eos_ids=_eos_ids(prepared),
        sample=sample,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        on_token=on_token,
    )
    if on_text is not None:  # what was held back, if the last token left a character open
        final = _after(tokenizer.decode(prompt_ids + written.ids), base, tokenizer, written.ids)
        if final.startswith(shown[0]) and final != shown[0]:
            on_text(final[len(shown[0]) :])
    pieces, continuation = _pieces(prepared.pieces, written.ids, tokenizer, base)
    assert written.prompt_attention is not None
    return Generation(
        prompt=prepared,
        pieces=pieces,
        new_ids=tuple(written.ids),
        continuation=continuation,
        prompt_attention=written.prompt_attention.float().cpu().numpy(),
        step_attentions=tuple(r.float().cpu().numpy() for r in written.rows),
        stopped_at_eos=written.stopped_at_eos,
        sampled=sample,
        dtype=dtype,
        _decoder=decoder,
    )


def _eos_ids(prepared: Prepared) -> list[int]:
    """The end tokens: generation_config.json's eos_token_id, else config.json's (as
    transformers reads them); an int or a list of ints."""
    from attnviz.reading import read_bounded

    value = prepared.config.get("eos_token_id")
    path = prepared.source.folder / "generation_config.json"
    if path.is_file():
        try:
            data = json.loads(read_bounded(path, CONFIG_BYTES, "generation_config.json"))
        except (ValueError, RecursionError, AttnvizError):  # unreadable: config.json's
            data = {}
        if isinstance(data, dict) and "eos_token_id" in data:
            value = data["eos_token_id"]
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def _after(text: str, base: str, tokenizer: Any, new: Sequence[int]) -> str:
    """The text the new tokens added after the prompt's decoded text."""
    if text.startswith(base):
        return text[len(base) :]
    return str(tokenizer.decode(list(new)))


def _pieces(prompt: Pieces, new: Sequence[int], tokenizer: Any, base: str) -> tuple[Pieces, str]:
    """The prompt's pieces followed by the new tokens, each labelled by the text it wrote."""
    ids = list(prompt.ids)
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    continuation = _after(tokenizer.decode(ids + list(new)), base, tokenizer, new)
    text = prompt.text + continuation
    offsets = list(prompt.offsets)
    word_ids = list(prompt.word_ids)
    sequence_ids = list(prompt.sequence_ids)
    tokens = list(prompt.tokens)
    word = max((w for w in word_ids if w is not None), default=-1)
    end = len(prompt.text)
    open_run: list[int] = []  # pieces of a character whose bytes are not all written yet
    for j, token in enumerate(new):
        piece = tokenizer.id_to_token(token) or ""
        after = _after(tokenizer.decode(ids + list(new[: j + 1])), base, tokenizer, new[: j + 1])
        complete = after.rstrip("\ufffd")  # a character split over byte tokens counts once whole
        start, end = end, max(end, min(len(prompt.text) + len(complete), len(text)))
        tokens.append(piece)
        offsets.append((start, end))
        if start == end and complete != after:
            open_run.append(len(offsets) - 1)
        elif open_run:  # each piece of a split character shows the character, as the
            for i in open_run:  # tokenizer's offsets do for a prompt's
                offsets[i] = (offsets[open_run[0]][0], end)
            offsets[-1] = (offsets[open_run[0]][0], end)
            open_run = []
        if token in special:
            word_ids.append(None)
            sequence_ids.append(None)
            continue
        if piece.startswith(("Ġ", "▁")) or text[start:end][:1].isspace() or word < 0:
            word += 1
        word_ids.append(word)
        sequence_ids.append(0)
    pieces = Pieces(
        text=text,
        pair=None,
        tokens=tokens,
        ids=ids + list(new),
        type_ids=[0] * len(tokens),
        offsets=offsets,
        word_ids=word_ids,
        sequence_ids=sequence_ids,
    )
    return pieces, continuation


def _cut(pieces: Pieces, n: int) -> Pieces:
    """The first `n` pieces."""
    return Pieces(
        text=pieces.text,
        pair=None,
        tokens=pieces.tokens[:n],
        ids=pieces.ids[:n],
        type_ids=pieces.type_ids[:n],
        offsets=pieces.offsets[:n],
        word_ids=pieces.word_ids[:n],
        sequence_ids=pieces.sequence_ids[:n],
    )

"""What one looks at: a layer's head (or head mean), a layer's heads, a rollout, as plain data.

A view is a matrix (or a stack of them) with its labels and title, built once from
the attention array `[layers, heads, T, T]` (rows are queries, columns keys) and the
tokenized input. The layer and head are resolved here, once; the views only hold the
result. They carry no model and no torch: they draw themselves in a terminal
(`rich.print(view)`), in a notebook (`_repr_png_`) and as images (`figure`, `save`)
through the renderers, which are imported only when drawing.

Units: "words" merges word pieces back into the words of the text (attention TO a
word is the sum over its pieces, FROM a word the mean over its pieces, so rows still
sum to 1); "tokens" keeps the model's own pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.limits import TOP, check_range
from attnviz.output import IMAGE_SUFFIXES, ImageStyle, check_output

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.tokenize import Pieces

__all__ = [
    "UNITS",
    "AttentionView",
    "HeadsView",
    "RolloutView",
    "heads_view",
    "layer_view",
    "merge_words",
    "model_view",
    "pair_marked",
    "resolve_index",
    "rollout_view",
    "select",
]

UNITS: tuple[str, ...] = ("words", "tokens")
PAIR_MARK = "B:"


def resolve_index(value: int, size: int, what: str) -> int:
    """A 0-based index that may count from the end (-1 is the last), checked against `size`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise BadInput(f"{what} must be a whole number, got {value!r}")
    if not -size <= value < size:
        raise BadInput(
            f"{what} {value} is out of range: this model has {size} {what}s, "
            f"use 0..{size - 1} (or -{size}..-1 from the end)"
        )
    return int(value) % size


def resolve_heads(heads: Sequence[int] | None, num_heads: int) -> list[int] | None:
    """Head numbers (`--heads 0,3,-1`) as 0-based numbers in the order given; None: every head."""
    if heads is None:
        return None
    resolved = [resolve_index(h, num_heads, "head") for h in heads]
    if not resolved:
        raise BadInput("the list of heads is empty: name at least one head, e.g. 0,3,5")
    repeated = sorted({h for h in resolved if resolved.count(h) > 1})
    if repeated:
        raise BadInput(f"--heads names head {_listing(repeated)} twice: list each head once")
    return resolved


def check_units(units: str) -> str:
    if units not in UNITS:
        raise BadInput(f"units {units!r} is not one of {', '.join(UNITS)}")
    return units


def select(attentions: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """One layer's attention for one head, or the mean over its heads when `head` is None."""
    L, H = attentions.shape[:2]
    per_layer = attentions[resolve_index(layer, L, "layer")]  # (H, T, T)
    if head is None:
        return per_layer.mean(axis=0)  # (T, T)
    return per_layer[resolve_index(head, H, "head")]  # (T, T)


def merge_words(matrix: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Attention between words instead of pieces.

    Attention TO a word is the sum over its pieces (the query's weight spread over
    the word); attention FROM a word is the mean over its pieces. Rows that summed
    to 1 still do. `matrix` is (..., T, T); the result is (..., W, W).

    Linear in the size of `matrix`: two segmented sums (`np.add.reduceat`) over the
    pieces in word order, instead of products with a (T, W) membership matrix, which
    cost T·T·W (126 s at 12k pieces).
    """
    T = matrix.shape[-1]
    sizes = np.array([len(pieces) for pieces in groups], dtype=np.int64)  # (W,)
    if len(groups) == 0 or sizes.min() < 1:
        raise ValueError("every word must have at least one piece")
    order = np.concatenate([np.asarray(pieces, dtype=np.int64) for pieces in groups])  # (T,)
    if len(order) != T or order.min() < 0 or order.max() >= T:
        raise ValueError("every piece must belong to exactly one word")
    if not np.array_equal(np.bincount(order, minlength=T), np.ones(T, dtype=np.int64)):
        raise ValueError("every piece must belong to exactly one word")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # (W,): each word's first position
    in_order = np.array_equal(order, np.arange(T))  # words are runs of pieces: no reordering
    rows = matrix if in_order else matrix[..., order, :]
    # Rows first: summing whole rows is contiguous, and halves what the key sum reads.
    from_words = _run_sums(rows, starts, sizes, axis=-2)  # (..., W, T): sum over a query word
    keys = from_words if in_order else from_words[..., order]
    summed = _run_sums(keys, starts, sizes, axis=-1)  # (..., W, W): sum over a key word's pieces
    return summed / sizes.astype(summed.dtype)[:, None]  # the sum over query pieces -> mean


def _run_sums(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray, axis: int) -> np.ndarray:
    """Sums of `a` over the runs `starts[w] .. starts[w] + sizes[w]` along `axis`.

    The k-th piece of every word at once, for k up to the longest word: each element
    of `a` is read once. (`np.add.reduceat` does the same but took 4 s on 12k x 12k.)
    """
    a = np.moveaxis(a, axis, 0)
    total = a[starts]  # (W, ...): every word's first piece (fancy indexing copies)
    for k in range(1, int(sizes.max())):
        longer = np.flatnonzero(sizes > k)  # words with a (k+1)-th piece
        total[longer] += a[starts[longer] + k]
    return np.moveaxis(total, 0, axis)


def pair_marked(labels: Sequence[str], start: int | None) -> list[str]:
    """`labels` with the first piece (or word) of a sentence pair's B, at `start`, marked `B:`."""
    marked = list(labels)
    if start is not None:
        marked[start] = PAIR_MARK + marked[start]
    return marked


def _listing(numbers: Sequence[int]) -> str:
    return ",".join(str(n) for n in numbers)


# ---------------------------------------------------------------- units


@dataclass(frozen=True)
class _Units:
    """A matrix over pieces in the chosen units, with plain and display labels."""

    pieces: Pieces
    words: bool

    def matrix(self, matrix: np.ndarray) -> np.ndarray:
        """(..., T, T) over pieces -> (..., N, N) in these units."""
        if not self.words:
            return matrix
        return merge_words(matrix, [w.pieces for w in self.pieces.words()])

    def labels(self) -> list[str]:
        if self.words:
            return [w.label for w in self.pieces.words()]
        return list(self.pieces.labels)

    def pair_start(self) -> int | None:
        """Where sentence B starts, in these units; None without a pair."""
        pieces = self.pieces
        firsts = [w.pieces[0] for w in pieces.words()] if self.words else range(len(pieces))
        seqs = [pieces.sequence_ids[i] for i in firsts]
        return next((i for i, seq in enumerate(seqs) if seq == 1), None)


def _units(pieces: Pieces, units: str) -> _Units:
    return _Units(pieces, check_units(units) == "words")


# ---------------------------------------------------------------- the views


class _Drawn:
    """What every view shares: drawing in a terminal, a notebook and an image file."""

    title: str

    def _renderable(self) -> Any:
        raise NotImplementedError

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        """The view as a matplotlib Figure (not registered with pyplot)."""
        raise NotImplementedError

    def save(
        self,
        path: str | Path,
        *,
        dpi: int = 200,
        cmap: str = "viridis",
        theme: str = "light",
        transparent: bool = False,
        annotate: bool = False,
    ) -> Path:
        """Write the view as an image (.png, .svg or .pdf, by the suffix), all or nothing."""
        path = Path(path)
        check_output(path, IMAGE_SUFFIXES, ImageStyle(dpi, cmap, theme, transparent, annotate))
        from attnviz.render.image import save_figure

        figure = self.figure(cmap=cmap, theme=theme, annotate=annotate)
        save_figure(figure, path, dpi=dpi, transparent=transparent)
        return path

    def _repr_png_(self) -> bytes:
        """A notebook cell that ends in a view shows it as an image."""
        from attnviz.render.image import figure_png

        return figure_png(self.figure(), dpi=100)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._renderable()


@dataclass(frozen=True, eq=False)
class AttentionView(_Drawn):
    """One attention matrix: rows are queries (who attends), columns keys; rows sum to 1.

    `labels` name the rows and columns (sentence B's first marked `B:`); `tokens` are
    the same without the mark. `layer` and `head` are resolved, 0-based; `head` is None
    for the mean over the layer's heads.
    """

    matrix: np.ndarray  # (N, N) float
    labels: list[str]
    tokens: list[str]
    title: str
    model: str  # the model's name as titles show it
    layer: int
    head: int | None
    units: str
    pair_start: int | None

    def weight(self, query: int, key: int) -> float:
        """The weight from row `query` to column `key` (indices as in `labels`)."""
        return float(self.matrix[query, key])

    def to_dict(self) -> dict[str, Any]:
        """The record `attnviz show --json` prints."""
        return {
            "model": self.model,
            "layer": self.layer,
            "head": self.head,
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "weights": self.matrix.tolist(),
        }

    def _renderable(self) -> Any:
        from attnviz.render.terminal import Heatmap

        return Heatmap(self.matrix, self.labels, title=self.title)

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.image import heatmap_figure

        return heatmap_figure(
            self.matrix, self.labels, title=self.title, cmap=cmap, theme=theme, annotate=annotate
        )


@dataclass(frozen=True, eq=False)
class RolloutView(AttentionView):
    """Attention rollout through layer `layer`: row i is how much token i draws on each input.

    `top` is how many inputs the terminal lists for each token (`sources`).
    """

    top: int = 3

    def sources(self, top: int | None = None) -> list[list[tuple[int, float]]]:
        """For each row, the `top` inputs it draws most from: (index, share), largest first."""
        from attnviz.rollout import top_sources

        return top_sources(self.matrix, min(top or self.top, len(self.labels)))

    def to_dict(self) -> dict[str, Any]:
        """The record `attnviz rollout --json` prints."""
        return {
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "rollout": self.matrix.tolist(),
        }

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from attnviz.render.stats import SourcesTable

        yield self._renderable()
        yield SourcesTable(self.labels, self.sources(), title="what each token draws most from")


@dataclass(frozen=True, eq=False)
class HeadsView(_Drawn):
    """Several heads side by side on one colour scale: a layer's heads, or the whole model.

    `matrices` (n, N, N) go with `panel_titles`; `layer` is None when the panels span
    every layer (the model view), and `columns` is then the panels per row.
    """

    matrices: np.ndarray  # (n, N, N) float
    labels: list[str]
    tokens: list[str]
    panel_titles: list[str]
    title: str
    model: str
    layer: int | None
    heads: list[int]
    units: str
    pair_start: int | None
    columns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "layer": self.layer,
            "heads": self.heads,
            "panels": self.panel_titles,
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "weights": self.matrices.tolist(),
        }

    def _renderable(self) -> Any:
        from attnviz.render.terminal import HeadGrid

        return HeadGrid(
            self.matrices,
            self.labels,
            panel_titles=self.panel_titles,
            title=self.title,
            columns=self.columns,
        )

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.image import grid_figure

        return grid_figure(
            self.matrices,
            self.labels,
            panel_titles=self.panel_titles,
            title=self.title,
            cmap=cmap,
            theme=theme,
            annotate=annotate,
            columns=self.columns,
        )


# ---------------------------------------------------------------- building views


@dataclass(frozen=True)
class Source:
    """What the views are built from: the attention array, the input and the model's title."""

    attentions: np.ndarray = field(repr=False)  # (L, H, T, T)
    pieces: Pieces
    model: str

    @property
    def shape(self) -> tuple[int, int]:
        L, H = self.attentions.shape[:2]
        return L, H


def layer_view(
    src: Source, layer: int = -1, head: int | None = None, units: str = "words"
) -> AttentionView:
    """One layer's head, or the mean over its heads (`head` None)."""
    L, H = src.shape
    layer = resolve_index(layer, L, "layer")
    head = None if head is None else resolve_index(head, H, "head")
    into = _units(src.pieces, units)
    matrix = into.matrix(select(src.attentions, layer, head))  # (N, N)
    which = f"head {head}" if head is not None else f"mean of {H} heads"
    return AttentionView(
        matrix=matrix,
        **_labelled(into),
        title=f"{src.model} · layer {layer} · {which}",
        model=src.model,
        layer=layer,
        head=head,
        units=units,
    )


def heads_view(
    src: Source, layer: int = -1, heads: Sequence[int] | None = None, units: str = "words"
) -> HeadsView:
    """Every head of one layer (or the `heads` listed), as panels."""
    L, H = src.shape
    layer = resolve_index(layer, L, "layer")
    chosen = resolve_heads(heads, H)
    shown = list(range(H)) if chosen is None else chosen
    into = _units(src.pieces, units)
    which = f"all {H} heads" if chosen is None else f"heads {_listing(shown)}"
    return HeadsView(
        matrices=into.matrix(src.attentions[layer, shown]),  # (h, N, N)
        **_labelled(into),
        panel_titles=[f"head {h}" for h in shown],
        title=f"{src.model} · layer {layer} · {which}",
        model=src.model,
        layer=layer,
        heads=shown,
        units=units,
    )


def model_view(src: Source, heads: Sequence[int] | None = None, units: str = "words") -> HeadsView:
    """Every layer (rows) and head (columns), or the `heads` listed in every layer."""
    L, H = src.shape
    chosen = resolve_heads(heads, H)
    shown = list(range(H)) if chosen is None else chosen
    into = _units(src.pieces, units)
    per_layer = src.attentions[:, shown]  # (L, h, T, T)
    which = f"all {H} heads" if chosen is None else f"heads {_listing(shown)}"
    return HeadsView(
        matrices=into.matrix(per_layer.reshape(-1, *per_layer.shape[2:])),  # (L·h, N, N)
        **_labelled(into),
        panel_titles=[f"L{layer} H{head}" for layer in range(L) for head in shown],
        title=f"{src.model} · {L} layers × {which}",
        model=src.model,
        layer=None,
        heads=shown,
        units=units,
        columns=len(shown),
    )


def rollout_view(
    src: Source, upto: int | None = None, units: str = "words", top: int = 3
) -> RolloutView:
    """Attention rollout through layer `upto` (None: the last), merged into `units` after."""
    from attnviz.rollout import rollout

    L, _ = src.shape
    upto = resolve_index(-1 if upto is None else upto, L, "layer")
    check_range(top, "--top", TOP)
    into = _units(src.pieces, units)
    return RolloutView(
        matrix=into.matrix(rollout(src.attentions, upto)),  # (N, N), rows still sum to 1
        **_labelled(into),
        title=f"{src.model} · rollout through layer {upto}",
        model=src.model,
        layer=upto,
        head=None,
        units=units,
        top=top,
    )


def _labelled(into: _Units) -> dict[str, Any]:
    plain, start = into.labels(), into.pair_start()
    return {"labels": pair_marked(plain, start), "tokens": plain, "pair_start": start}

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

Exclusion: `exclude=("special", "punct")` drops the special tokens ([CLS], [SEP]) and
the punctuation, as keys and as queries, and renormalises each remaining row over
the keys left, so it sums to 1 again: where a head parks most of its attention on
[CLS], what is left shows how the rest is shared. Titles say so; `to_dict` lists
what was excluded. Exclusion comes last, after heads are picked, words merged or
layers chained, so the numbers before renormalising are the model's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.limits import TOP, check_range, resolve_heads, resolve_index
from attnviz.output import IMAGE_SUFFIXES, ImageStyle, check_output

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.measures.query import QueryRow
    from attnviz.text.tokenize import Pieces

__all__ = [
    "EXCLUDABLE",
    "UNITS",
    "AttentionView",
    "HeadsView",
    "RolloutView",
    "check_exclude",
    "excluded_pieces",
    "exclusion_note",
    "heads_view",
    "layer_view",
    "merge_words",
    "model_view",
    "pair_marked",
    "renormalise",
    "resolve_index",
    "rollout_view",
    "select",
]

UNITS: tuple[str, ...] = ("words", "tokens")
EXCLUDABLE: tuple[str, ...] = ("special", "punct")  # what `exclude=` can drop
PAIR_MARK = "B:"
_EXCLUDED_NAMES = {"special": "special tokens", "punct": "punctuation"}


def check_units(units: str) -> str:
    if units not in UNITS:
        raise BadInput(f"units {units!r} is not one of {', '.join(UNITS)}")
    return units


def check_exclude(exclude: str | Sequence[str] | None) -> tuple[str, ...]:
    """`exclude` as a tuple in EXCLUDABLE order: None, "special", "punct" or a list of them."""
    if exclude is None:
        return ()
    given = [exclude] if isinstance(exclude, str) else list(exclude)
    for name in given:
        if name not in EXCLUDABLE:
            raise BadInput(f"cannot exclude {name!r}: use {' or '.join(EXCLUDABLE)}")
    return tuple(name for name in EXCLUDABLE if name in given)


def excluded_pieces(pieces: Pieces, exclude: Sequence[str]) -> np.ndarray:
    """(T,) bool, True for the pieces `exclude` drops: special tokens, punctuation."""
    from attnviz.measures.stats import token_kinds

    kinds = token_kinds(pieces)
    dropped = np.zeros(len(pieces), dtype=bool)  # (T,)
    if "special" in exclude:
        dropped |= kinds.cls | kinds.sep
    if "punct" in exclude:
        dropped |= kinds.punct
    return dropped


def exclusion_note(exclude: Sequence[str]) -> str:
    """What a title adds for `exclude`: ` · without special tokens (rows renormalised)`."""
    if not exclude:
        return ""
    names = " and ".join(_EXCLUDED_NAMES[name] for name in exclude)
    return f" · without {names} (rows renormalised)"


def renormalise(matrix: np.ndarray) -> np.ndarray:
    """Each row (last axis) divided by its sum, so it sums to 1; rows summing to 0 stay 0."""
    sums = matrix.sum(axis=-1, keepdims=True)  # (..., N, 1)
    return np.divide(matrix, sums, out=np.zeros_like(matrix), where=sums > 0)


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
    exclude: tuple[str, ...] = ()  # dropped as keys and queries; rows renormalised

    def keep(self) -> np.ndarray:
        """(N,) bool over these units: False for what `exclude` drops (a word, when all
        its pieces are dropped)."""
        dropped = excluded_pieces(self.pieces, self.exclude)  # (T,)
        if self.words:
            dropped = np.array([dropped[w.pieces].all() for w in self.pieces.words()], dtype=bool)
        return ~dropped

    def matrix(self, matrix: np.ndarray) -> np.ndarray:
        """(..., T, T) over pieces -> (..., N, N) in these units, exclusions dropped."""
        if self.words:
            matrix = merge_words(matrix, [w.pieces for w in self.pieces.words()])
        if not self.exclude:
            return matrix
        kept = np.flatnonzero(self.keep())
        return renormalise(matrix[..., kept[:, None], kept])  # (..., n, n)

    def labels(self) -> list[str]:
        words = self.pieces.words()
        return self._kept([w.label for w in words] if self.words else list(self.pieces.labels))

    def pair_start(self) -> int | None:
        """Where sentence B starts, in these units; None without a pair."""
        pieces = self.pieces
        firsts = [w.pieces[0] for w in pieces.words()] if self.words else range(len(pieces))
        seqs = self._kept([pieces.sequence_ids[i] for i in firsts])
        return next((i for i, seq in enumerate(seqs) if seq == 1), None)

    def _kept(self, items: list[Any]) -> list[Any]:
        if not self.exclude:
            return items
        return [item for item, kept in zip(items, self.keep(), strict=True) if kept]


def _units(pieces: Pieces, units: str, exclude: str | Sequence[str] | None = None) -> _Units:
    into = _Units(pieces, check_units(units) == "words", check_exclude(exclude))
    if into.exclude and not into.keep().any():
        raise BadInput(
            f"--exclude {','.join(into.exclude)} leaves nothing of this text: exclude less"
        )
    return into


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
        style = ImageStyle(dpi, cmap, theme, transparent, annotate)
        check_output(path, IMAGE_SUFFIXES, style)
        self._write(path, style)
        return path

    def _write(self, path: Path, style: ImageStyle) -> None:
        from attnviz.render.saving import save_figure

        figure = self.figure(cmap=style.cmap, theme=style.theme, annotate=style.annotate)
        save_figure(figure, path, dpi=style.dpi, transparent=style.transparent)

    def __repr__(self) -> str:
        values: Any = getattr(self, "matrix", getattr(self, "matrices", None))
        shape = "" if values is None else ": " + "×".join(str(n) for n in np.shape(values))
        return f"<{type(self).__name__} {self.title!r}{shape}>"

    def _repr_png_(self) -> bytes:
        """A notebook cell that ends in a view shows it as an image."""
        from attnviz.render.saving import figure_png

        return figure_png(self.figure(), dpi=100)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._renderable()


@dataclass(frozen=True, eq=False, repr=False)
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
    excluded: tuple[str, ...] = ()  # dropped tokens: "special", "punct"; rows renormalised
    measure: str = "weight"  # or a contribution measure (attnviz.measures.contributions)

    def weight(self, query: int, key: int) -> float:
        """The weight from row `query` to column `key` (indices as in `labels`)."""
        n = len(self.labels)
        for value in (query, key):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | np.integer)
                or not -n <= value < n
            ):
                raise BadInput(
                    f"weight() takes a row and a column number below {n}, got {value!r}: "
                    "labels.index(word) gives a word's number"
                )
        return float(self.matrix[query, key])

    def row(self, query: str | int) -> QueryRow:
        """One query's row as a list of keys, largest weight first (`show --query`).

        `query` is a word of the text (any case or accents; `ele#2` for the second) in
        the view's units, or a row index.
        """
        from attnviz.measures.query import query_row

        return query_row(self, query)

    def to_dict(self) -> dict[str, Any]:
        """The record `attnviz show --json` prints."""
        return {
            "model": self.model,
            "layer": self.layer,
            "head": self.head,
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "excluded": list(self.excluded),
            "measure": self.measure,
            "weights": self.matrix.tolist(),
        }

    def _repr_html_(self) -> str:
        """In a notebook: the matrix, interactive (the exact weight under the pointer)."""
        from attnviz.render.html import fragment

        return fragment(
            self.matrix[None, None],  # (1, 1, N, N): one layer, one head
            self.tokens,
            words=None,
            word_labels=None,
            pair_start=self.pair_start,
            pair_word_start=None,
            title=self.title,
            view="matrix",
            layer=0,
            head=0,
            heads=None,
            units="tokens",
            theme="auto",
            layer_names=[self.title.split(" · ")[1] if " · " in self.title else "layer"],
            head_names=[self.title.rsplit(" · ", 1)[-1]],
        )

    def _renderable(self) -> Any:
        from attnviz.render.terminal import Heatmap

        return Heatmap(self.matrix, self.labels, title=self.title)

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import heatmap_figure

        return heatmap_figure(
            self.matrix, self.labels, title=self.title, cmap=cmap, theme=theme, annotate=annotate
        )


@dataclass(frozen=True, eq=False, repr=False)
class RolloutView(AttentionView):
    """Attention rollout through layer `layer`: row i is how much token i draws on each input.

    `top` is how many inputs the terminal lists for each token (`sources`).
    """

    top: int = 3
    method: str = "rollout"  # or "flow"

    def sources(self, top: int | None = None) -> list[list[tuple[int, float]]]:
        """For each row, the `top` inputs it draws most from: (index, share), largest first."""
        from attnviz.measures.rollout import top_sources

        count = self.top if top is None else check_range(top, "top", TOP)
        return top_sources(self.matrix, min(count, len(self.labels)))

    def to_dict(self) -> dict[str, Any]:
        """The record `attnviz rollout --json` prints."""
        return {
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "excluded": list(self.excluded),
            "measure": self.measure,
            "method": self.method,
            "rollout": self.matrix.tolist(),
        }

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from attnviz.render.stats import SourcesTable

        yield self._renderable()
        yield SourcesTable(self.labels, self.sources(), title="what each token draws most from")


@dataclass(frozen=True, eq=False, repr=False)
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
    excluded: tuple[str, ...] = ()  # dropped tokens: "special", "punct"; rows renormalised
    measure: str = "weight"  # or a contribution measure (attnviz.measures.contributions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "layer": self.layer,
            "heads": self.heads,
            "panels": self.panel_titles,
            "tokens": self.tokens,
            "pair_start": self.pair_start,
            "excluded": list(self.excluded),
            "measure": self.measure,
            "weights": self.matrices.tolist(),
        }

    def _repr_html_(self) -> str:
        """In a notebook: the panels as the interactive page's head view, offline."""
        from attnviz.render.html import fragment

        if self.layer is not None:  # one layer's heads
            grid = self.matrices[None]  # (1, h, N, N)
            layer_names, head_names = [f"layer {self.layer}"], [f"head {h}" for h in self.heads]
        elif self.columns:  # the model view: a row of `columns` heads per layer
            grid = self.matrices.reshape(-1, self.columns, *self.matrices.shape[1:])
            layer_names = [f"layer {layer}" for layer in range(len(grid))]
            head_names = [f"head {h}" for h in self.heads]
        else:  # a per-layer measure: one panel per layer
            grid = self.matrices[:, None]  # (L, 1, N, N)
            layer_names, head_names = list(self.panel_titles), ["all heads"]
        return fragment(
            grid,
            self.tokens,
            words=None,
            word_labels=None,
            pair_start=self.pair_start,
            pair_word_start=None,
            title=self.title,
            view="heads" if self.layer is not None else "model",
            layer=0,
            head=None,
            heads=None,
            units="tokens",
            theme="auto",
            layer_names=layer_names,
            head_names=head_names,
        )

    def _renderable(self) -> Any:
        from attnviz.render.terminal import HeadGrid

        return HeadGrid(
            self.matrices,
            self.labels,
            panel_titles=self.panel_titles,
            title=self.title,
            columns=self.columns,
        )

    def _write(self, path: Path, style: ImageStyle) -> None:
        """A PNG is drawn straight to pixels, without a Figure (attnviz.render.raster)."""
        from attnviz.render.saving import save_grid

        save_grid(
            self.matrices,
            self.labels,
            path,
            panel_titles=self.panel_titles,
            title=self.title,
            cmap=style.cmap,
            theme=style.theme,
            annotate=style.annotate,
            columns=self.columns,
            dpi=style.dpi,
            transparent=style.transparent,
        )

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import grid_figure

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

    attentions: np.ndarray = field(repr=False)  # (L, H, T, T); H = 1 for a per-layer measure
    pieces: Pieces
    model: str
    measure: str = "weight"  # what `attentions` holds (see attnviz.measures.contributions)
    per_layer: bool = False  # a measure over the whole layer: no head axis
    note: str = ""  # the measure as titles name it
    kept: tuple[int, ...] | None = None  # the model's layers `attentions` holds; None: all
    num_layers: int = 0  # the model's layers (0: as many as `attentions` holds)

    def slot(self, layer: int) -> int:
        """Where the model's `layer` (already resolved) sits in `attentions`."""
        if self.kept is None:
            return layer
        if layer not in self.kept:
            raise BadInput(
                f"layer {layer} was not computed: this analysis holds only layer "
                f"{_listing(list(self.kept))} (the layers asked for, or the one a view of a "
                f"long input kept); analyse the text with layers=[{layer}]"
            )
        return self.kept.index(layer)

    def whole(self, what: str) -> None:
        """Refuse `what` (a view over every layer) when only some layers were kept."""
        if self.kept is not None:
            raise BadInput(
                f"{what} needs every layer, but this analysis holds only layer "
                f"{_listing(list(self.kept))} (the layers asked for, or the one a view of a "
                "long input kept): analyse the text without layers=, or look at one layer "
                "(view, heads)"
            )

    def no_heads(self, what: str) -> BadInput:
        return BadInput(
            f"{self.measure} is measured per layer, over all heads together, so {what}: "
            "drop --head/--heads (show and model take it), or use --measure weight (or norm, "
            "on an encoder)"
        )

    @property
    def shape(self) -> tuple[int, int]:
        """The model's layers and the heads per layer (1 for a per-layer measure)."""
        L, H = self.attentions.shape[:2]
        return self.num_layers or L, H


def layer_view(
    src: Source,
    layer: int = -1,
    head: int | None = None,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
) -> AttentionView:
    """One layer's head, or the mean over its heads (`head` None)."""
    L, H = src.shape
    layer = resolve_index(layer, L, "layer")
    if src.per_layer and head is not None:
        raise src.no_heads("--head does not apply")
    head = None if head is None else resolve_index(head, H, "head")
    into = _units(src.pieces, units, exclude)
    matrix = into.matrix(select(src.attentions, src.slot(layer), head))  # (N, N)
    which = f"head {head}" if head is not None else f"mean of {H} heads"
    if src.per_layer:
        which = "all heads together"
    return AttentionView(
        matrix=matrix,
        **_labelled(into),
        title=f"{src.model} · layer {layer} · {which}{src.note}{exclusion_note(into.exclude)}",
        model=src.model,
        layer=layer,
        head=head,
        units=units,
        measure=src.measure,
    )


def heads_view(
    src: Source,
    layer: int = -1,
    heads: Sequence[int] | None = None,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
) -> HeadsView:
    """Every head of one layer (or the `heads` listed), as panels."""
    if src.per_layer:
        raise src.no_heads("it has no heads to show side by side; use show or model")
    L, H = src.shape
    layer = resolve_index(layer, L, "layer")
    chosen = resolve_heads(heads, H)
    shown = list(range(H)) if chosen is None else chosen
    into = _units(src.pieces, units, exclude)
    which = f"all {H} heads" if chosen is None else f"heads {_listing(shown)}"
    return HeadsView(
        matrices=into.matrix(src.attentions[src.slot(layer), shown]),  # (h, N, N)
        **_labelled(into),
        panel_titles=[f"head {h}" for h in shown],
        title=f"{src.model} · layer {layer} · {which}{src.note}{exclusion_note(into.exclude)}",
        model=src.model,
        layer=layer,
        heads=shown,
        units=units,
        measure=src.measure,
    )


def model_view(
    src: Source,
    heads: Sequence[int] | None = None,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
) -> HeadsView:
    """Every layer (rows) and head (columns), or the `heads` listed in every layer."""
    src.whole("the model view")
    L, H = src.shape
    if src.per_layer and heads is not None:
        raise src.no_heads("--heads does not apply")
    chosen = resolve_heads(heads, H)
    shown = list(range(H)) if chosen is None else chosen
    into = _units(src.pieces, units, exclude)
    # (L, h, T, T): a view of the array when every head is shown (a list index would copy)
    per_layer = src.attentions if chosen is None else src.attentions[:, shown]
    which = f"all {H} heads" if chosen is None else f"heads {_listing(shown)}"
    names = [f"L{layer} H{head}" for layer in range(L) for head in shown]
    if src.per_layer:
        which, names = "all heads together", [f"L{layer}" for layer in range(L)]
    return HeadsView(
        matrices=into.matrix(per_layer.reshape(-1, *per_layer.shape[2:])),  # (L·h, N, N)
        **_labelled(into),
        panel_titles=names,
        title=f"{src.model} · {L} layers × {which}{src.note}{exclusion_note(into.exclude)}",
        model=src.model,
        layer=None,
        heads=shown,
        units=units,
        columns=None if src.per_layer else len(shown),
        measure=src.measure,
    )


def rollout_view(
    src: Source,
    upto: int | None = None,
    units: str = "words",
    top: int = 3,
    exclude: str | Sequence[str] | None = None,
    method: str = "rollout",
    progress: Callable[[int], None] | None = None,
) -> RolloutView:
    """Attention rollout through layer `upto` (None: the last), merged into `units` after.

    The chain always runs over every piece (the model's own mixing); `exclude` drops
    tokens from the result only, so the top sources are among the tokens left.
    """
    from attnviz.measures.rollout import rollout

    if method not in ("rollout", "flow"):
        raise BadInput(f"method {method!r} is not one of rollout, flow")
    src.whole("rollout")
    L, _ = src.shape
    upto = resolve_index(-1 if upto is None else upto, L, "layer")
    top = check_range(top, "top", TOP)
    into = _units(src.pieces, units, exclude)
    if method == "flow":
        from attnviz.measures.flow import attention_flow

        if src.measure != "weight":
            raise BadInput("--method flow runs on the attention weights: drop --measure")
        chained, what = attention_flow(src.attentions, upto, progress=progress), "attention flow"
    else:
        # Measures that already contain the residual (and rows of any sum) are chained with
        # their rows normalised; the weights (and norms) get the identity added, as in the paper.
        with_residual = src.measure in ("weight", "norm")
        chained, what = rollout(src.attentions, upto, residual=with_residual), "rollout"
    return RolloutView(
        matrix=into.matrix(chained),  # (N, N), rows still sum to 1
        **_labelled(into),
        title=f"{src.model} · {what} through layer {upto}{src.note}{exclusion_note(into.exclude)}",
        model=src.model,
        layer=upto,
        head=None,
        units=units,
        top=top,
        measure=src.measure,
        method=method,
    )


def _labelled(into: _Units) -> dict[str, Any]:
    plain, start = into.labels(), into.pair_start()
    return {
        "labels": pair_marked(plain, start),
        "tokens": plain,
        "pair_start": start,
        "excluded": into.exclude,
    }

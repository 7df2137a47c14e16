"""What one looks at: a layer's head (or head mean), a layer's heads, a rollout, as plain data.

A view is a matrix (or a stack of them) with its labels and title, built once from
the attention array `[layers, heads, T, T]` (rows are queries, columns keys) and the
tokenized input (a `Source`). The layer and head are resolved here, once; the views
only hold the result. They carry no model and no torch: they draw themselves in a
terminal (`rich.print(view)`), in a notebook (`_repr_html_`: the interactive page's view;
`_repr_png_`: its image) and as images (`figure`, `save`) through the renderers, which
are imported only when drawing.

Picking a head, merging words (`units`) and dropping tokens (`exclude`) are
attnviz.measures.select's. Titles say what was excluded; `to_dict` lists it.

Masked cells: on a decoder (or an encoder under the causal what-if) a view carries
`masked`, a bool array of its matrix's shape, True where the model could not see the
key (after the query, outside the layer's sliding window), from the model's mask, not
the weights. Renderers draw those cells as masked; `to_dict` lists them (`"masked"`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.lexicon import label
from attnviz.limits import TOP, check_choice, check_range, resolve_heads, resolve_index
from attnviz.measures.contributions import per_layer_refusal
from attnviz.measures.drawn import DrawnView
from attnviz.measures.select import (
    UnitMap,
    exclusion_note,
    hidden_keys,
    pair_marked,
    select,
)
from attnviz.output import ImageStyle

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.measures.query import QueryRow
    from attnviz.text.pieces import Pieces

__all__ = [
    "AttentionView",
    "HeadsView",
    "RolloutView",
    "Source",
    "heads_view",
    "layer_view",
    "model_view",
    "rollout_view",
]


def _listing(numbers: Sequence[int]) -> str:
    return ",".join(str(n) for n in numbers)


# ---------------------------------------------------------------- the views


@dataclass(frozen=True, eq=False, repr=False)
class AttentionView(DrawnView):
    """One attention matrix: rows are queries (who attends), columns keys; rows sum to 1.

    `labels` name the rows and columns (sentence B's first marked `B:`); `tokens` are
    the same without the mark. `layer` and `head` are resolved, 0-based; `head` is None
    for the mean over the layer's heads. A rectangle (queries and keys from different
    inputs, e.g. cross-attention) names its columns in `key_labels` and `key_tokens`;
    None when the keys are the queries (then `columns` and `column_tokens` are the rows').
    """

    matrix: np.ndarray  # (N, M) float: N queries, M keys (M == N unless a rectangle)
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
    lang: str = "en"  # the language of its title and labels: "en" or "pt"
    # (N, M) bool: True where the model could not see the key (causal mask, sliding window);
    # None when nothing is masked. The weight there is exactly 0.
    masked: np.ndarray | None = field(default=None, repr=False)
    key_labels: list[str] | None = None  # (M,) the columns, when the keys are not the queries
    key_tokens: list[str] | None = None  # (M,) the same without the `B:` mark
    engine: str = "attnviz"  # what computed the weights: "attnviz", "transformers", "given"
    stack: str | None = None  # an encoder-decoder's stack: "encoder", "decoder", "cross"
    # the lexicon's names of the y axis, the x axis and the colour bar (a pooled view's:
    # blocks of queries and keys, the share of the queries' attention)
    axes: tuple[str, str, str] = ("query", "key", "attention_weight")
    scale: str = "linear"  # values to colours: "linear", or "sqrt" (a pooled view's shares)

    @property
    def columns(self) -> list[str]:
        """The columns' labels: `key_labels`, or `labels` when the keys are the queries."""
        return self.labels if self.key_labels is None else self.key_labels

    @property
    def column_tokens(self) -> list[str]:
        """The columns' tokens: `key_tokens`, or `tokens` when the keys are the queries."""
        return self.tokens if self.key_tokens is None else self.key_tokens

    def weight(self, query: int, key: int) -> float:
        """The weight from row `query` to column `key` (indices as in `labels`, `columns`)."""
        for value, n in ((query, len(self.labels)), (key, len(self.columns))):
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
        """The record `attnviz show --json` prints (`key_tokens` only for a rectangle)."""
        return {
            "model": self.model,
            "layer": self.layer,
            "head": self.head,
            "tokens": self.tokens,
            **_keys_record(self.key_tokens),
            "pair_start": self.pair_start,
            "excluded": list(self.excluded),
            "measure": self.measure,
            **_provenance_record(self.engine, self.stack),
            "weights": self.matrix.tolist(),
            "masked": masked_list(self.masked),
        }

    def _repr_html_(self) -> str:
        """In a notebook: the matrix, interactive (the exact weight under the pointer)."""
        layer_name = (
            self.title.split(" · ")[1]
            if " · " in self.title
            else label(self.lang, "layer_n", layer=self.layer)
        )
        return _fragment(
            self,
            self.matrix[None, None],  # (1, 1, N, M): one layer, one head
            "matrix",
            head=0,
            names=([layer_name], [self.title.rsplit(" · ", 1)[-1]]),
            masked=None if self.masked is None else self.masked[None],  # (1, N, N)
        )

    def _renderable(self) -> Any:
        from attnviz.render.terminal import Heatmap

        return Heatmap(
            self.matrix,
            self.labels,
            self.key_labels,
            title=self.title,
            lang=self.lang,
            masked=self.masked,
        )

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import heatmap_figure

        return heatmap_figure(
            self.matrix,
            self.labels,
            self.key_labels,
            title=self.title,
            cmap=cmap,
            theme=theme,
            annotate=annotate,
            lang=self.lang,
            masked=self.masked,
            axis_names=self.axes[:2],
            bar_name=self.axes[2],
            scale=self.scale,
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
            "masked": masked_list(self.masked),
        }

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from attnviz.render.stats import SourcesTable

        yield self._renderable()
        title = label(self.lang, "sources_title")
        yield SourcesTable(self.labels, self.sources(), title=title, lang=self.lang)


@dataclass(frozen=True, eq=False, repr=False)
class HeadsView(DrawnView):
    """Several heads side by side on one colour scale: a layer's heads, or the whole model.

    `matrices` (n, N, N) go with `panel_titles`; `layer` is None when the panels span
    every layer (the model view), and `columns` is then the panels per row. A rectangle
    (n, N, M) names its keys in `key_labels` and `key_tokens` (None: the keys are the queries).
    """

    matrices: np.ndarray  # (n, N, M) float
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
    lang: str = "en"  # the language of its titles and labels: "en" or "pt"
    # (n, N, N) bool, one per panel: True where the model could not see the key; None: none.
    masked: np.ndarray | None = field(default=None, repr=False)
    key_labels: list[str] | None = None  # (M,) the columns, when the keys are not the queries
    key_tokens: list[str] | None = None  # (M,) the same without the `B:` mark
    engine: str = "attnviz"  # what computed the weights (see AttentionView)
    stack: str | None = None  # an encoder-decoder's stack (see AttentionView)
    axes: tuple[str, str, str] = ("query", "key", "attention_weight")  # see AttentionView
    scale: str = "linear"  # see AttentionView

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "layer": self.layer,
            "heads": self.heads,
            "panels": self.panel_titles,
            "tokens": self.tokens,
            **_keys_record(self.key_tokens),
            "pair_start": self.pair_start,
            "excluded": list(self.excluded),
            "measure": self.measure,
            **_provenance_record(self.engine, self.stack),
            "weights": self.matrices.tolist(),
            "masked": masked_list(self.masked),
        }

    def _repr_html_(self) -> str:
        """In a notebook: the panels as the interactive page's head view, offline."""
        lang = self.lang
        head_names = [label(lang, "head_n", head=h) for h in self.heads]
        if self.layer is not None:  # one layer's heads
            grid = self.matrices[None]  # (1, h, N, N)
            layer_names = [label(lang, "layer_n", layer=self.layer)]
        elif self.columns:  # the model view: a row of `columns` heads per layer
            grid = self.matrices.reshape(-1, self.columns, *self.matrices.shape[1:])
            layer_names = [label(lang, "layer_n", layer=layer) for layer in range(len(grid))]
        else:  # a per-layer measure: one panel per layer
            grid = self.matrices[:, None]  # (L, 1, N, N)
            layer_names, head_names = list(self.panel_titles), [label(lang, "all_heads")]
        masked = None
        if self.masked is not None:  # each layer's mask: its first panel's
            masked = self.masked.reshape(grid.shape)[:, 0]  # (layers, N, N)
        view = "heads" if self.layer is not None else "model"
        return _fragment(
            self, grid, view, head=None, names=(layer_names, head_names), masked=masked
        )

    def _renderable(self) -> Any:
        from attnviz.render.terminal import HeadGrid

        return HeadGrid(
            self.matrices,
            self.labels,
            key_labels=self.key_labels,
            panel_titles=self.panel_titles,
            title=self.title,
            columns=self.columns,
            lang=self.lang,
            masked=self.masked,
            units=self.units,
        )

    def _write(self, path: Path, style: ImageStyle) -> None:
        """A PNG is drawn straight to pixels, without a Figure (attnviz.render.raster)."""
        from attnviz.render.saving import save_grid

        drawn = self._grid(style.cmap, style.theme, style.annotate)
        save_grid(self.matrices, self.labels, path, dpi=style.dpi,
                  transparent=style.transparent, **drawn)  # fmt: skip

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import grid_figure

        return grid_figure(self.matrices, self.labels, **self._grid(cmap, theme, annotate))

    def _grid(self, cmap: str, theme: str, annotate: bool) -> dict[str, Any]:
        """What the grid's image and figure are drawn with besides the matrices and labels
        (`render.saving.save_grid`, `render.figures.grid_figure`)."""
        return {
            "key_labels": self.key_labels, "panel_titles": self.panel_titles,
            "title": self.title, "cmap": cmap, "theme": theme, "annotate": annotate,
            "columns": self.columns, "lang": self.lang, "masked": self.masked,
            "axes": self.axes, "scale": self.scale,
        }  # fmt: skip


def _fragment(
    drawn: AttentionView | HeadsView,
    grid: np.ndarray,
    view: str,
    *,
    head: int | None,
    names: tuple[list[str], list[str]],
    masked: np.ndarray | None,
) -> str:
    """A view in a notebook: `grid` (layers, heads, N, M) as the interactive page's `view`,
    over its pieces, opening on `head` of its first layer, its layers and heads named by
    `names`, masked where `masked` (layers, N, M) says; offline, in the reader's theme."""
    from attnviz.render.html import fragment

    layer_names, head_names = names
    return fragment(grid, drawn.tokens, key_tokens=drawn.key_tokens, words=None,
                    word_labels=None, pair_start=drawn.pair_start, pair_word_start=None,
                    title=drawn.title, view=view, layer=0, head=head, heads=None,
                    units="tokens", theme="auto", layer_names=layer_names,
                    head_names=head_names, lang=drawn.lang, masked=masked)  # fmt: skip


def _keys_record(key_tokens: list[str] | None) -> dict[str, Any]:
    """What a record adds for a rectangle: its keys' tokens (nothing for a square)."""
    return {} if key_tokens is None else {"key_tokens": key_tokens}


def _provenance_record(engine: str, stack: str | None) -> dict[str, Any]:
    """What a record says of how its weights were computed: the engine, and an
    encoder-decoder's stack (nothing for a model of one stack)."""
    return {"engine": engine} | ({} if stack is None else {"stack": stack})


def masked_list(masked: np.ndarray | None) -> list[Any] | None:
    """A view's mask as JSON lists of booleans, the shape of its weights; None when none."""
    return None if masked is None else np.asarray(masked, dtype=bool).tolist()


# ---------------------------------------------------------------- building views


@dataclass(frozen=True)
class Source:
    """What the views are built from: the attention array, the input and the model's title."""

    attentions: np.ndarray = field(repr=False)  # (L, H, T, T); H = 1 for a per-layer measure
    pieces: Pieces  # the queries' (the rows'), and the keys' too unless `keys` is given
    model: str
    measure: str = "weight"  # what `attentions` holds (see attnviz.measures.contributions)
    per_layer: bool = False  # a measure over the whole layer: no head axis
    note: str = ""  # the measure as titles name it
    kept: tuple[int, ...] | None = None  # the model's layers `attentions` holds; None: all
    num_layers: int = 0  # the model's layers (0: as many as `attentions` holds)
    lang: str = "en"  # the language the views' titles and labels are in (already resolved)
    # The model's mask: causal (a decoder, or an encoder's what-if), and per model layer its
    # sliding window (() or None: none). What the views mark as masked comes from these.
    causal: bool = False
    windows: tuple[int | None, ...] = ()
    # A rectangle (L, H, Tq, Tk): the keys' pieces, from another input than the queries'
    # (cross-attention, or arrays given so). None: the keys are the queries.
    keys: Pieces | None = None
    engine: str = "attnviz"  # what computed `attentions` (the views' data records say it)
    stack: str | None = None  # an encoder-decoder's stack `attentions` is from

    def units(self, units: str, exclude: str | Sequence[str] | None) -> UnitMap:
        """The map of this source's pieces (queries and keys) to `units` without `exclude`."""
        return UnitMap.checked(self.pieces, units, exclude, self.keys)

    def square(self, what: str) -> None:
        """Refuse `what` (a chain through the layers) on a rectangle."""
        if self.keys is not None:
            raise BadInput(
                f"{what} chains each layer's attention into the next, which needs the keys "
                "to be the queries; this attention's queries and keys are different inputs "
                "(a rectangle): look at one layer (show, heads) or the model view"
            )

    def window(self, layer: int) -> int | None:
        """The model's `layer`'s sliding window in pieces; None without one."""
        return self.windows[layer] if layer < len(self.windows) else None

    def hidden(self, layer: int) -> np.ndarray | None:
        """(T, T) bool over pieces: the keys the model's `layer` hides from each query;
        None when it hides none."""
        if self.keys is not None:  # a rectangle: no causal order between two inputs
            return None
        return hidden_keys(self.attentions.shape[-1], self.causal, self.window(layer))

    def chain_hidden(self, upto: int) -> np.ndarray | None:
        """(T, T) bool: the keys a rollout (or flow) through layers 0..`upto` cannot reach.

        A causal chain stays causal. Through sliding windows the chain reaches further back
        than any one layer: a query reaches a key q - k < 1 + sum(window - 1) pieces back,
        going through tokens in between (exactly that band: the product of band matrices);
        a layer without a window lets the chain reach every earlier key."""
        windows = [self.window(layer) for layer in range(upto + 1)]
        reach = None if None in windows else 1 + sum(w - 1 for w in windows if w is not None)
        return hidden_keys(self.attentions.shape[-1], self.causal, reach)

    def slot(self, layer: int) -> int:
        """Where the model's `layer` (already resolved) sits in `attentions`."""
        if self.kept is None:
            return layer
        if layer not in self.kept:
            raise BadInput(
                f"layer {layer} was not computed: this analysis holds only layer "
                f"{_listing(list(self.kept))} (the layers asked for, the one a view of a long "
                f"input kept, or those its file held); analyse the text with layers=[{layer}], "
                "or load a file that holds that layer"
            )
        return self.kept.index(layer)

    def whole(self, what: str) -> None:
        """Refuse `what` (a view over every layer) when only some layers were kept."""
        if self.kept is not None:
            raise BadInput(
                f"{what} needs every layer, but this analysis holds only layer "
                f"{_listing(list(self.kept))} (the layers asked for, the one a view of a long "
                "input kept, or those its file held): analyse the text without layers= (or load "
                "a file of every layer), or look at one layer (view, heads)"
            )

    def no_heads(self, what: str) -> BadInput:
        """The refusal of a head (or heads) asked of a per-layer measure (see
        `per_layer_refusal`)."""
        return per_layer_refusal(self.measure, what)

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
        raise src.no_heads("{head} does not apply")
    head = None if head is None else resolve_index(head, H, "head")
    unit_map = src.units(units, exclude)
    matrix = unit_map.matrix(select(src.attentions, src.slot(layer), head))  # (N, N)
    lang = src.lang
    which = label(lang, "head_n", head=head) if head is not None else ""
    if head is None:
        which = label(lang, "mean_of_heads", n=H)
    if src.per_layer:
        which = label(lang, "all_heads_together")
    return AttentionView(
        matrix=matrix,
        **_labelled(unit_map),
        title=f"{src.model} · {label(lang, 'layer_n', layer=layer)} · {which}"
        + f"{src.note}{exclusion_note(unit_map.exclude, lang)}",
        model=src.model,
        layer=layer,
        head=head,
        units=units,
        measure=src.measure,
        lang=lang,
        masked=_masked(unit_map, src.hidden(layer)),
        engine=src.engine,
        stack=src.stack,
    )


def _masked(unit_map: UnitMap, hidden: np.ndarray | None) -> np.ndarray | None:
    """The pieces' mask `hidden` (T, T) in the units of `unit_map`; None when none."""
    return None if hidden is None else unit_map.masked(hidden)


def _panels_masked(
    src: Source, unit_map: UnitMap, layers: Sequence[int], per_layer: int
) -> np.ndarray | None:
    """(len(layers) · per_layer, N, N) bool: each panel's mask, `per_layer` panels a layer.

    Layers sharing a window share one mask, so a model without windows holds one (N, N)
    array broadcast to every panel (no copy)."""
    masks: dict[int | None, np.ndarray | None] = {}
    for layer in layers:
        window = src.window(layer)
        if window not in masks:
            masks[window] = _masked(unit_map, src.hidden(layer))
    if all(mask is None for mask in masks.values()):
        return None
    first = next(mask for mask in masks.values() if mask is not None)
    shape = (len(layers) * per_layer, *first.shape)
    if len(masks) == 1:
        return np.broadcast_to(first, shape)  # (n, N, N): one mask, read-only
    per = [masks[src.window(layer)] for layer in layers]
    stacked = np.stack([first if m is None else m for m in per])  # (L, N, N)
    return np.repeat(stacked, per_layer, axis=0)  # (L · per_layer, N, N)


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
    unit_map = src.units(units, exclude)
    lang = src.lang
    which = _which_heads(lang, H, chosen, shown)
    return HeadsView(
        matrices=unit_map.matrix(src.attentions[src.slot(layer), shown]),  # (h, N, N)
        **_labelled(unit_map),
        panel_titles=[label(lang, "head_n", head=h) for h in shown],
        title=f"{src.model} · {label(lang, 'layer_n', layer=layer)} · {which}"
        + f"{src.note}{exclusion_note(unit_map.exclude, lang)}",
        model=src.model,
        layer=layer,
        heads=shown,
        units=units,
        measure=src.measure,
        lang=lang,
        masked=_panels_masked(src, unit_map, [layer], len(shown)),
        engine=src.engine,
        stack=src.stack,
    )


def _which_heads(lang: str, H: int, chosen: list[int] | None, shown: list[int]) -> str:
    """`all 12 heads` or `heads 0,3`, as a title names the heads shown."""
    if chosen is None:
        return label(lang, "all_heads_n", n=H)
    return label(lang, "heads_listed", heads=_listing(shown))


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
        raise src.no_heads("{heads} does not apply")
    chosen = resolve_heads(heads, H)
    shown = list(range(H)) if chosen is None else chosen
    unit_map = src.units(units, exclude)
    # (L, h, T, T): a view of the array when every head is shown (a list index would copy)
    per_layer = src.attentions if chosen is None else src.attentions[:, shown]
    lang = src.lang
    which = _which_heads(lang, H, chosen, shown)
    names = [
        label(lang, "panel_layer_head", layer=layer, head=head)
        for layer in range(L)
        for head in shown
    ]
    if src.per_layer:
        which = label(lang, "all_heads_together")
        names = [label(lang, "panel_layer", layer=layer) for layer in range(L)]
    return HeadsView(
        matrices=unit_map.matrix(per_layer.reshape(-1, *per_layer.shape[2:])),  # (L·h, N, N)
        **_labelled(unit_map),
        panel_titles=names,
        title=f"{src.model} · {label(lang, 'layers_by', n=L, which=which)}"
        + f"{src.note}{exclusion_note(unit_map.exclude, lang)}",
        model=src.model,
        layer=None,
        heads=shown,
        units=units,
        columns=None if src.per_layer else len(shown),
        measure=src.measure,
        lang=lang,
        masked=_panels_masked(src, unit_map, range(L), 1 if src.per_layer else len(shown)),
        engine=src.engine,
        stack=src.stack,
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

    check_choice(method, ("rollout", "flow"), "method")
    if progress is not None and not callable(progress):
        raise BadInput(
            f"progress must be a function of the steps done, or None; got {type(progress).__name__}"
        )
    src.whole("rollout")
    src.square("rollout" if method == "rollout" else "attention flow")
    L, _ = src.shape
    upto = resolve_index(-1 if upto is None else upto, L, "layer", "upto")
    top = check_range(top, "top", TOP)
    unit_map = src.units(units, exclude)
    if method == "flow":
        from attnviz.measures.flow import attention_flow

        if src.measure != "weight":
            raise BadInput(
                "{method} flow runs on the attention weights: drop {measure}",
                param=("method", "measure"),
            )
        chained = attention_flow(src.attentions, upto, progress=progress)
        what = label(src.lang, "attention_flow")
    else:
        # Measures that already contain the residual (and rows of any sum) are chained with
        # their rows normalised; the weights (and norms) get the identity added, as in the paper.
        with_residual = src.measure in ("weight", "norm")
        chained = rollout(src.attentions, upto, residual=with_residual)
        what = label(src.lang, "rollout")
    return RolloutView(
        matrix=unit_map.matrix(chained),  # (N, N), rows still sum to 1
        **_labelled(unit_map),
        title=f"{src.model} · {label(src.lang, 'through_layer', what=what, upto=upto)}"
        + f"{src.note}{exclusion_note(unit_map.exclude, src.lang)}",
        model=src.model,
        layer=upto,
        head=None,
        units=units,
        top=top,
        measure=src.measure,
        method=method,
        lang=src.lang,
        masked=_masked(unit_map, src.chain_hidden(upto)),
    )


def _labelled(unit_map: UnitMap) -> dict[str, Any]:
    plain, start = unit_map.labels(), unit_map.pair_start()
    labelled = {
        "labels": pair_marked(plain, start),
        "tokens": plain,
        "pair_start": start,
        "excluded": unit_map.exclude,
    }
    if unit_map.keys is not None:  # a rectangle: the columns are the keys' own
        keys = unit_map.key_side()
        key_plain = keys.labels()
        labelled["key_labels"] = pair_marked(key_plain, keys.pair_start())
        labelled["key_tokens"] = key_plain
    return labelled

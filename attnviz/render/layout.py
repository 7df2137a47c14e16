"""Where everything of a figure goes, to the inch, before anything is drawn.

Figures are laid out here from the measured size of their text, the way the renderer
will draw it: no layout engine runs while drawing and nothing is cropped when saving,
which took most of the time of writing a grid of small heatmaps. A grid's plan
(`plan_grid`) is shared by its Figure (`attnviz.render.figures.grid_figure`) and its
pixels (`attnviz.render.raster.grid_pixels`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

from attnviz.output import check_colormap
from attnviz.render.cells import as_mask
from attnviz.render.labels import (
    check_labels,
    clean_label,
    fit_title,
    sizes_in,
    text_width_in,
    tick_step,
)
from attnviz.render.style import (
    THEME_COLOURS,
    check_theme,
    colour_max,
    font_family,
    font_properties,
    quiet_fonts,
)

if TYPE_CHECKING:
    from matplotlib.colors import Colormap, Normalize
    from matplotlib.figure import Figure

_GRID_ANNOTATE_MAX_TOKENS = 8
GRID_TICK_PT = 7.0
_GRID_TICK_SPACING_IN = 0.15
KEY_ROTATION = 60
# No side of a figure grows past this (6000 px at 200 dpi): grid panels shrink to fit,
# and long titles wrap (`attnviz.render.labels.fit_title`) instead of widening the image.
MAX_FIGURE_IN = 30.0
_MIN_PANEL_IN = 0.6
PAD_IN = 0.1  # the blank border around the drawing
# The lexicon's names of a heatmap's y axis, x axis and colour bar; a pooled view's are
# ("query_blocks", "key_blocks", "pooled_share") (or "pooled_max").
AXES = ("query", "key", "attention_weight")
_GAP_IN = 0.08  # between a block of text and the next thing
BAR_GAP_IN = 0.12  # between the heatmaps and the colour bar
_SIN_ROT = math.sin(math.radians(KEY_ROTATION))
COS_ROT = math.cos(math.radians(KEY_ROTATION))


def crop_options(fig: Figure) -> dict[str, Any]:
    """Save options: the figures made here are laid out to the inch and saved whole; one
    with a layout engine (the head statistics) is cropped to what it draws, plus a border."""
    if fig.get_layout_engine() is None:
        return {}
    return {"bbox_inches": "tight", "pad_inches": PAD_IN}


def as_matrix(values: np.ndarray, ndim: int, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != ndim or 0 in array.shape:
        raise ValueError(f"{what}: expected a non-empty {ndim}-d array, got shape {array.shape}")
    return array


MASKED_TEXT = "–"  # what `annotate` writes in a masked cell (a key the model could not see)


MASKED_KEY_PT = 8.0  # the size of the legend entry for masked cells
MASKED_SWATCH_IN = 0.12  # its grey square's side


def masked_key_in(label: str, fig_w: float) -> tuple[float, float, float]:
    """Where the legend entry for masked cells goes, in the figure's bottom right corner
    (below the colour bar, right of the key labels, which lean left): its grey square's
    left, the right end of its text and their bottom, in inches; the square is
    MASKED_SWATCH_IN a side."""
    right = fig_w - PAD_IN
    swatch = right - text_width_in([label], MASKED_KEY_PT) - 0.08 - MASKED_SWATCH_IN
    return swatch, right, PAD_IN


def tick_in(axis: str) -> float:
    """Length plus padding of a tick, in inches."""
    rc = matplotlib.rcParams
    if axis == "x":
        return (rc["xtick.major.size"] + rc["xtick.major.pad"]) / 72
    return (rc["ytick.major.size"] + rc["ytick.major.pad"]) / 72


def axis_label_in() -> float:
    """Room for an axis name ("key", "query", "attention weight") beside its tick labels."""
    _, line = sizes_in([], font_properties(matplotlib.rcParams["axes.labelsize"]))
    return matplotlib.rcParams["axes.labelpad"] / 72 + line


def key_labels_in(widths: Sequence[float], line: float) -> float:
    """How far rotated key labels reach below the axis (past the tick and its padding)."""
    return max((w * _SIN_ROT + line * COS_ROT for w in widths), default=0.0)


def bar_ticks(top: float, length_in: float) -> tuple[list[float], list[str], str]:
    """The ticks of a colour bar of `length_in` from 0 to `top`, their labels and the
    multiplier over the bar ("1e-5", or ""), as the bar's locator and formatter pick them."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    size = font_properties(matplotlib.rcParams["ytick.labelsize"]).get_size_in_points()
    bins = min(9, max(1, int(length_in * 72 // (2 * size))))
    locator = MaxNLocator(bins, steps=[1, 2, 2.5, 5, 10])
    ticks = [float(t) for t in locator.tick_values(0, top) if t >= 0]  # some past the top
    formatter = ScalarFormatter()
    formatter.create_dummy_axis()
    formatter.axis.set_view_interval(0.0, top)  # type: ignore[union-attr]
    texts = formatter.format_ticks(ticks)
    return ticks, texts, formatter.get_offset()


def bar_right_in(top: float, length_in: float) -> float:
    """Room right of a colour bar of `length_in` from 0 to `top`: ticks, their labels and
    the bar's name, with the tick labels its locator and formatter will pick."""
    font = font_properties(matplotlib.rcParams["ytick.labelsize"])
    _, texts, offset = bar_ticks(top, length_in)
    widths, _ = sizes_in(texts, font)
    # A scale of tiny weights gets a multiplier ("1e-5") over the bar, reaching right.
    reach = sizes_in([offset], font)[0][0] if offset else 0.0
    return max(tick_in("y") + max(widths, default=0.0) + axis_label_in(), reach)


def _grid_shape(count: int) -> tuple[int, int]:
    """Rows and columns of a near-square grid, wider than tall: 12 -> (3, 4)."""
    cols = math.ceil(math.sqrt(count))
    return math.ceil(count / cols), cols


@dataclass(frozen=True)
class GridGeometry:
    """Where everything of a grid goes, in inches: panels of `side`, `wgap` and `hgap`
    apart, the margins around them, every `step`-th query and every `key_step`-th key
    labelled. The gap between two panels of a row is `gap_cells` (key) cells wide, a whole
    number of `1 / subcells` cells, so that a row of panels can be one image."""

    side: float
    step: int
    subcells: int
    gap_cells: float
    wgap: float
    hgap: float
    left: float
    bottom: float
    right: float
    above: float  # over the top row of panels: their titles, the figure's title
    title: str
    key_step: int = 0  # every key_step-th key labelled (0: `step`, the keys are the queries)

    @property
    def keys_step(self) -> int:
        return self.key_step or self.step

    def size(self, n_rows: int, n_cols: int) -> tuple[float, float]:
        grid_w = n_cols * self.side + (n_cols - 1) * self.wgap
        grid_h = n_rows * self.side + (n_rows - 1) * self.hgap
        return self.left + grid_w + self.right, self.bottom + grid_h + self.above


def _grid_geometry(
    side: float,
    tokens: Sequence[str],
    title: str,
    top: float,
    n_rows: int,
    n_cols: int,
    key_tokens: Sequence[str] | None = None,
) -> GridGeometry:
    family = font_family()
    n = len(tokens)
    step = tick_step(n, max(1, int(side / _GRID_TICK_SPACING_IN)))
    query_widths, line = sizes_in(
        [tokens[i] for i in range(0, n, step)], font_properties(GRID_TICK_PT, family)
    )
    widths, key_step = query_widths, 0
    if key_tokens is not None:  # a rectangle: the keys have their own labels and count
        n = len(key_tokens)
        key_step = tick_step(n, max(1, int(side / _GRID_TICK_SPACING_IN)))
        widths, line = sizes_in(
            [key_tokens[i] for i in range(0, n, key_step)], font_properties(GRID_TICK_PT, family)
        )
    _, name_line = sizes_in([], font_properties(10))  # "key", "query"
    _, panel_title_line = sizes_in([], font_properties(9, family))
    panel_title = panel_title_line * 1.15 + matplotlib.rcParams["axes.titlepad"] / 72
    gap = 0.15 / side * n  # cells in 0.15 in, rounded to whole subcells
    subcells = max(1, math.ceil(4 / gap))
    gap_cells = max(1, round(gap * subcells)) / subcells
    wgap, hgap = gap_cells * side / n, panel_title + _GAP_IN
    grid_w = n_cols * side + (n_cols - 1) * wgap
    grid_h = n_rows * side + (n_rows - 1) * hgap
    leaning = widths[0] * COS_ROT - side / (2 * n)  # the first key label, leaning left
    left = PAD_IN + max(name_line + _GAP_IN + max(query_widths) + tick_in("y"), leaning)
    bottom = PAD_IN + name_line + _GAP_IN + key_labels_in(widths, line) + tick_in("x")
    right = BAR_GAP_IN + min(grid_h / 15, 0.25) + bar_right_in(top, grid_h) + PAD_IN
    fig_w = left + grid_w + right
    text, title_h = fit_title(title, fig_w - 2 * PAD_IN, font_properties(13, family))
    above = PAD_IN + title_h + _GAP_IN + panel_title
    return GridGeometry(
        side, step, subcells, gap_cells, wgap, hgap, left, bottom, right, above, text, key_step
    )


@dataclass(frozen=True)
class GridPlan:
    """A grid checked and laid out: what grid_figure and the PNG drawing share."""

    values: np.ndarray  # (H, T, T)
    tokens: list[str]
    titles: list[str]
    top: float  # the colour scale's maximum
    cmap: str
    theme: str
    write_values: bool
    n_rows: int
    n_cols: int
    g: GridGeometry
    fig_w: float
    fig_h: float
    lang: str = "en"  # the language of the axis and colour-bar names: "en" or "pt"
    masked: np.ndarray | None = None  # (H, T, T) bool: cells the model could not see
    key_tokens: list[str] | None = None  # a rectangle's keys (the columns); None: `tokens`
    axes: tuple[str, str, str] = AXES  # the lexicon's names of the y and x axes and the bar
    scale: str = "linear"  # values to colours: "linear" or "sqrt" (render.style.colour_norm)

    @property
    def columns(self) -> list[str]:
        """The columns' labels: the keys'."""
        return self.tokens if self.key_tokens is None else self.key_tokens

    def colours(self, colormap: Colormap, norm: Normalize) -> np.ndarray:
        """(H, T, T, 4) uint8: each cell's colour, the theme's neutral grey where masked."""
        from matplotlib.colors import to_rgba

        rgba = colormap(norm(self.values), bytes=True)  # (H, T, T, 4)
        if self.masked is not None:
            grey = np.round(np.array(to_rgba(THEME_COLOURS[self.theme]["masked"])) * 255)
            rgba[self.masked] = grey.astype(np.uint8)
        return rgba

    @property
    def grid_h(self) -> float:
        return self.fig_h - self.g.bottom - self.g.above

    @property
    def bar(self) -> tuple[float, float, float, float]:
        """The colour bar's left, bottom, width and height in inches."""
        width = min(self.grid_h / 15, 0.25)
        return self.fig_w - self.g.right + BAR_GAP_IN, self.g.bottom, width, self.grid_h

    def panel(self, head: int) -> tuple[float, float]:
        """Left and bottom in inches of the panel of `head`."""
        row, col = divmod(head, self.n_cols)
        g = self.g
        return g.left + col * (g.side + g.wgap), g.bottom + (self.n_rows - 1 - row) * (
            g.side + g.hgap
        )


def plan_grid(
    matrices: np.ndarray,
    labels: Sequence[str],
    *,
    panel_titles: Sequence[str],
    title: str,
    cmap: str,
    theme: str,
    annotate: bool,
    columns: int | None,
    lang: str = "en",
    masked: np.ndarray | None = None,
    key_labels: Sequence[str] | None = None,
    axes: tuple[str, str, str] = AXES,
    scale: str = "linear",
) -> GridPlan:
    """A grid of [H, T, T] panels (or [H, Tq, Tk] with `key_labels`, a rectangle: its
    panels stay square, their cells as wide as the keys let them) laid out."""
    check_colormap(cmap)
    check_theme(theme)
    values = as_matrix(matrices, 3, "head grid")
    mask = as_mask(masked, values.shape)
    heads, n_q, n_k = values.shape
    if n_q != n_k and key_labels is None:
        raise ValueError(f"head grid: expected square matrices, got {n_q}x{n_k}")
    tokens = [clean_label(label) for label in labels]
    check_labels(tokens, n_q, "grid labels")
    keys = None if key_labels is None else [clean_label(label) for label in key_labels]
    if keys is not None:
        check_labels(keys, n_k, "grid key labels")
    if len(panel_titles) != heads:
        raise ValueError(f"head grid: {len(panel_titles)} panel titles for {heads} heads")
    titles = [clean_label(t) for t in panel_titles]
    top = colour_max(values, None)

    write_values = annotate and max(n_q, n_k) <= _GRID_ANNOTATE_MAX_TOKENS
    if columns is not None and columns < 1:
        raise ValueError(f"head grid: columns must be at least 1, got {columns}")
    n_rows, n_cols = _grid_shape(heads) if columns is None else (-(-heads // columns), columns)
    sin_rot = math.sin(math.radians(KEY_ROTATION))
    widest_in = text_width_in(tokens + (keys or []), GRID_TICK_PT)  # at least those shown
    fit_w = (MAX_FIGURE_IN - widest_in - 1.7) / n_cols - 0.15  # panel sides that keep the
    fit_h = (MAX_FIGURE_IN - widest_in * sin_rot - 1.3) / n_rows - 0.4  # figure in bounds
    side = min(max(2.2, (0.34 if write_values else 0.15) * max(n_q, n_k)), 3.6, fit_w, fit_h)
    side = max(side, _MIN_PANEL_IN)

    with quiet_fonts():
        g = _grid_geometry(side, tokens, title, top, n_rows, n_cols, keys)
        for _ in range(3):  # the measured labels may need more room than the estimate gave
            fig_w, fig_h = g.size(n_rows, n_cols)
            over = max((fig_w - MAX_FIGURE_IN) / n_cols, (fig_h - MAX_FIGURE_IN) / n_rows)
            if over <= 0 or g.side <= _MIN_PANEL_IN:
                break
            g = _grid_geometry(
                max(_MIN_PANEL_IN, g.side - over), tokens, title, top, n_rows, n_cols, keys
            )
    fig_w, fig_h = g.size(n_rows, n_cols)
    return GridPlan(
        values,
        tokens,
        titles,
        top,
        cmap,
        theme,
        write_values,
        n_rows,
        n_cols,
        g,
        fig_w,
        fig_h,
        lang,
        mask,
        keys,
        axes,
        scale,
    )

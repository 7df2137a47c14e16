"""Attention matrices as heatmaps in the terminal, as rich renderables.

Two renderables, both taking plain numpy arrays and token labels (never a model):

- `Heatmap`: one matrix [Tq, Tk]; rows are queries (who attends), columns are keys.
  Rows are labelled `index label`; columns are numbered in a header (digits written
  vertically when a number is wider than a cell). The widest cell (3, 2, then 1
  character) that fits `options.max_width` is used; when even 1-character cells do not
  fit, the columns are split into pages (`keys 0–57 of 512`), each its own block.
- `HeadGrid`: every head of one layer [H, T, T] as a grid of small panels sharing one
  colour scale, wrapped left to right into as many panels per line as fit.

Values are shown as background colours from a built-in viridis palette (0 .. vmax).
Without colour (`console.no_color`, e.g. NO_COLOR, or `console.color_system is None`,
e.g. a pipe or a file) the shade characters ` ░▒▓█` carry the values instead, in five
equal steps of value/vmax. NaN cells are drawn as `·` (or left blank in compact grid
panels). Masked cells (`masked`: keys the model could not see, a decoder's future) are
blank, without a colour, where colour is shown, and a dim `·` without colour (where a
blank is the shade of a real zero); a legend line says so. Every line is measured in
display cells (`rich.cells.cell_len`) and never exceeds `options.max_width`.

Labels are made safe for a one-line layout and long labels are cut to
`MAX_LABEL_CELLS` display cells with `…`, by the helpers in `attnviz.render.cells`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from rich.cells import cell_len
from rich.color import Color
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style

from attnviz import lexicon
from attnviz.render.cells import (
    MAX_LABEL_CELLS,
    Line,
    as_mask,
    clean_labels,
    emit,
    pad,
    title_lines,
    title_width,
    truncate,
    wrap_items,
)

__all__ = [
    "MASKED_CELL",
    "MASKED_LEVEL",
    "MAX_LABEL_CELLS",
    "SHADES",
    "HeadGrid",
    "Heatmap",
    "masked_cell",
    "with_masked",
]

SHADES = " ░▒▓█"  # shade ramp for output without colour: 5 levels of value / vmax
NAN_CELL = "·"  # what a NaN cell shows
MASKED_CELL = "·"  # what a masked cell shows without colour (with colour: a blank)
MASKED_LEVEL = -2  # the level of a masked cell (-1 is NaN)
TOO_NARROW = "(terminal too narrow for the heatmap: widen it or write an image with --out)"

_CELL_WIDTHS = (3, 2, 1)  # Heatmap cell widths to try, widest first
_MIN_PAGE_COLS = 8  # fewer columns than this per page is not worth showing
_MIN_SHRUNK_LABEL = 6  # labels may be cut down to this many cells to avoid paging
_LEGEND_MAX = 32  # widest colour gradient in the legend
_PANEL_GAP = 2  # spaces between HeadGrid panels
_WRAP_MIN = 20  # narrower than this, notes are cropped to one line instead of wrapped
_BOLD = Style(bold=True)
_DIM = Style(dim=True)

# Viridis (perceptually uniform, readable in grey and by most colour-blind readers):
# ten anchors at k/9, the same as R's viridis(10); levels in between are interpolated.
_VIRIDIS_ANCHORS = (
    (0x44, 0x01, 0x54),
    (0x48, 0x28, 0x78),
    (0x3E, 0x4A, 0x89),
    (0x31, 0x68, 0x8E),
    (0x26, 0x82, 0x8E),
    (0x1F, 0x9E, 0x89),
    (0x35, 0xB7, 0x79),
    (0x6D, 0xCD, 0x59),
    (0xB4, 0xDE, 0x2C),
    (0xFD, 0xE7, 0x25),
)
_LEVELS = 256  # colour levels between 0 and vmax


# ---------------------------------------------------------------------------
# Colour scale


def _palette_rgb(levels: int = _LEVELS) -> np.ndarray:
    """Viridis sampled at `levels` evenly spaced points: uint8 (levels, 3)."""
    anchors = np.asarray(_VIRIDIS_ANCHORS, dtype=float)  # (A, 3)
    where = np.linspace(0.0, 1.0, len(anchors))  # (A,)
    t = np.linspace(0.0, 1.0, levels)  # (levels,)
    channels = [np.interp(t, where, anchors[:, c]) for c in range(3)]  # 3 x (levels,)
    return np.rint(np.stack(channels, axis=1)).astype(np.uint8)  # (levels, 3)


_PALETTE: tuple[Color, ...] = tuple(Color.from_rgb(*map(int, rgb)) for rgb in _palette_rgb())


@lru_cache(maxsize=_LEVELS)
def _bg_style(level: int) -> Style:
    return Style(bgcolor=_PALETTE[level])


@lru_cache(maxsize=4096)
def _half_style(upper: int, lower: int) -> Style:
    """Style for `▀`: foreground = upper row's colour, background = lower's (-1: none)."""
    return Style(color=_PALETTE[upper], bgcolor=_PALETTE[lower] if lower >= 0 else None)


@dataclass(frozen=True)
class _Scale:
    """Maps values to colour levels (0.._LEVELS-1) or shade levels (0..4); -1 means NaN."""

    vmax: float

    def fraction(self, values: np.ndarray) -> np.ndarray:
        """values / vmax clipped to [0, 1]; NaN stays NaN. Same shape as `values`."""
        with np.errstate(invalid="ignore"):
            return np.clip(values / self.vmax, 0.0, 1.0)

    def colour_levels(self, values: np.ndarray) -> np.ndarray:
        frac = self.fraction(values)
        nan = np.isnan(frac)
        levels = np.rint(np.where(nan, 0.0, frac) * (_LEVELS - 1)).astype(np.int64)
        return np.where(nan, -1, levels)

    def shade_levels(self, values: np.ndarray) -> np.ndarray:
        frac = self.fraction(values)
        nan = np.isnan(frac)
        steps = len(SHADES)
        levels = np.minimum(steps - 1, np.floor(np.where(nan, 0.0, frac) * steps))
        return np.where(nan, -1, levels.astype(np.int64))

    def fmt(self, value: float) -> str:
        """A number for the legend, with enough decimals for small scales."""
        decimals = 2 if self.vmax >= 0.1 else min(6, 1 - math.floor(math.log10(self.vmax)))
        return f"{value:.{decimals}f}"


def _scale_for(values: np.ndarray, vmax: float | None) -> _Scale:
    """vmax given, or the largest finite value, or 1.0 when that is not positive."""
    if vmax is not None:
        if not math.isfinite(vmax) or vmax <= 0:
            raise ValueError(f"vmax must be a positive number, got {vmax!r}")
        return _Scale(float(vmax))
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    return _Scale(top if top > 0 else 1.0)


def _use_colour(console: Console) -> bool:
    return not console.no_color and console.color_system is not None


def with_masked(levels: np.ndarray, masked: np.ndarray | None) -> np.ndarray:
    """`levels` (colour or shade levels, any shape) with MASKED_LEVEL where `masked`."""
    if masked is None:
        return levels
    return np.where(np.asarray(masked, dtype=bool), MASKED_LEVEL, levels)


def masked_cell(cell_w: int, colour: bool) -> tuple[str, Style | None]:
    """The text and style of one masked cell `cell_w` wide: a blank with no background where
    colour is shown (distinct from any colour of the scale, the real zero's included), a dim
    `·` without colour (where a blank is a real zero's shade). For any renderer that draws a
    key the model cannot see."""
    if colour:
        return " " * cell_w, None
    return (MASKED_CELL.ljust(cell_w) if cell_w < 3 else MASKED_CELL.center(cell_w)), _DIM


def _masked_legend(masked: np.ndarray | None, colour: bool, width: int, lang: str) -> list[Line]:
    """`▕ ▏ masked (the model cannot see this key)` when some cell is masked."""
    if masked is None or not masked.any():
        return []
    mark = "▕ ▏" if colour else f"▕{MASKED_CELL}▏"
    return _note(lexicon.label(lang, "masked_mark", mark=mark), width)


# ---------------------------------------------------------------------------
# Notes, legends and label lists


def _note(message: str, width: int) -> list[Line]:
    """A message wrapped to `width` (or cropped to one line when very narrow)."""
    if width < _WRAP_MIN:
        return [[Segment(truncate(message, width), _DIM)]]
    return [[Segment(line, _DIM)] for line in wrap_items(message.split(" "), width, gap=1)]


def _legend_lines(scale: _Scale, colour: bool, width: int) -> list[Line]:
    """`0.00 ▕gradient▏ 0.63` with colour; the shade ramp with its ranges without.

    When that does not fit the width, the numbers go on a line of their own under the
    ramp (`0.00–0.63`), so the top of the scale is never cut off.
    """
    low, high = scale.fmt(0.0), scale.fmt(scale.vmax)
    numbers = cell_len(low) + cell_len(high)
    if colour:
        room = width - numbers - 4  # cells left for the gradient beside both numbers
        size = max(1, min(_LEGEND_MAX, room if room >= 1 else width - 2))
        levels = np.rint(np.linspace(0, _LEVELS - 1, size)).astype(int)
        gradient = [Segment(" ", _bg_style(int(level))) for level in levels]
        if room >= 1:
            return [[Segment(f"{low} ▕"), *gradient, Segment(f"▏ {high}")]]
        return [[Segment("▕"), *gradient, Segment("▏")], *_range_lines(low, high, width)]
    steps = len(SHADES)
    bounds = [scale.fmt(scale.vmax * k / steps) for k in range(steps + 1)]
    ranges = "  ".join(f"▕{SHADES[k]}▏{bounds[k]}–{bounds[k + 1]}" for k in range(steps))
    if cell_len(ranges) <= width:
        return [[Segment(ranges)]]
    compact = f"{low} ▕{SHADES}▏ {high}"  # five equal steps
    if cell_len(compact) <= width:
        return [[Segment(compact)]]
    return [[Segment(f"▕{SHADES}▏")], *_range_lines(low, high, width)]


def _range_lines(low: str, high: str, width: int) -> list[Line]:
    """`0.00–0.63` on one line, or on two when even that is too wide."""
    joined = f"{low}–{high}"
    if cell_len(joined) <= width:
        return [[Segment(joined)]]
    return [[Segment(f"{low}–")], [Segment(high)]]


def _legend_min_width(scale: _Scale) -> int:
    """Cells of the compact legend `0.00 ▕ ░▒▓█▏ 0.63`."""
    return cell_len(f"{scale.fmt(0.0)} ▕{SHADES}▏ {scale.fmt(scale.vmax)}")


def _label_list(
    prefix: str, indices: Sequence[int], labels: Sequence[str], width: int
) -> list[Line]:
    """`prefix 0 label  1 label ...` wrapped to the width."""
    items = [f"{i} {truncate(labels[i], MAX_LABEL_CELLS)}" for i in indices]
    lines = wrap_items([prefix, *items], width)
    return [[Segment(line)] for line in lines]


def _runs(cells: Sequence[tuple[str, Style | None]]) -> Line:
    """Neighbouring cells with the same style merged into one segment."""
    line = []
    for style, group in itertools.groupby(cells, key=lambda cell: cell[1]):
        line.append(Segment("".join(text for text, _ in group), style))
    return line


# ---------------------------------------------------------------------------
# Heatmap


@dataclass(frozen=True)
class _HeatLayout:
    index_w: int  # digits of the largest row index
    label_w: int  # display cells for row labels (0: index only)
    cell_w: int  # display cells per matrix column
    page_cols: int  # matrix columns per page

    @property
    def left_w(self) -> int:
        """Cells before the first matrix column: `index label `."""
        return self.index_w + 1 + (self.label_w + 1 if self.label_w else 0)


def _heat_layout(width: int, n_cols: int, index_w: int, label_w: int) -> _HeatLayout | None:
    """Widest cells that fit; else shorter labels; else pages; None if nothing fits."""
    for cell_w in _CELL_WIDTHS:
        layout = _HeatLayout(index_w, label_w, cell_w, n_cols)
        if layout.left_w + n_cols * cell_w <= width:
            return layout
    shrunk = width - n_cols - index_w - 2  # label cells that would avoid paging
    if _MIN_SHRUNK_LABEL <= shrunk < label_w:
        return _HeatLayout(index_w, shrunk, 1, n_cols)
    for cells in (label_w, min(label_w, _MIN_SHRUNK_LABEL), 0):
        layout = _HeatLayout(index_w, cells, 1, n_cols)
        room = width - layout.left_w
        if room >= min(n_cols, _MIN_PAGE_COLS):
            return _HeatLayout(index_w, cells, 1, min(room, n_cols))
    return None


def _page_caption(cols: range, n_cols: int, width: int, lang: str = "en") -> str:
    """`keys 0–57 of 512`, shortened to `0–57/512` when the terminal is narrow."""
    long = lexicon.label(lang, "keys_page", first=cols.start, last=cols.stop - 1, n=n_cols)
    return long if cell_len(long) <= width else f"{cols.start}–{cols.stop - 1}/{n_cols}"


def _column_header(cols: range, cell_w: int) -> list[str]:
    """Column numbers, one line if they fit a cell with a gap, else digits stacked."""
    digits = len(str(cols.stop - 1))
    if digits < cell_w or digits == 1:
        return ["".join(str(c).rjust(cell_w) for c in cols)]
    numbers = [str(c).rjust(digits) for c in cols]
    return ["".join(n[k].rjust(cell_w) for n in numbers) for k in range(digits)]


def _heat_cells(levels: np.ndarray, colour: bool, cell_w: int) -> Line:
    """One row of cells; levels: int (C,), -1 = NaN, MASKED_LEVEL = masked."""
    nan = NAN_CELL.ljust(cell_w) if cell_w < 3 else NAN_CELL.center(cell_w)
    masked = masked_cell(cell_w, colour)
    blank = " " * cell_w
    cells: list[tuple[str, Style | None]] = []
    for v in levels.tolist():
        if v == MASKED_LEVEL:
            cells.append(masked)
        elif v < 0:
            cells.append((nan, None))
        else:
            cells.append((blank, _bg_style(v)) if colour else (SHADES[v] * cell_w, None))
    return _runs(cells)


class Heatmap:
    """One attention matrix as a labelled heatmap (a rich renderable).

    matrix: float [Tq, Tk]; rows are queries (who attends), columns are keys.
    col_labels None means the same as row_labels; when they differ, a `keys:` legend
    maps column numbers to labels. The colour scale runs from 0 to vmax (default: the
    largest finite value, or 1.0 when that is 0). Wide matrices are split into pages of
    columns; on a terminal too narrow for even that, a one-line note is shown.
    """

    def __init__(
        self,
        matrix: np.ndarray,
        row_labels: Sequence[str],
        col_labels: Sequence[str] | None = None,
        *,
        title: str | None = None,
        vmax: float | None = None,
        lang: str = "en",
        masked: np.ndarray | None = None,
        highlight: int | None = None,
    ) -> None:
        """`masked` (Tq, Tk) bool: the cells drawn masked (keys the model could not see);
        `highlight`: the row whose label is drawn in reverse (an interactive view's cursor)."""
        values = np.asarray(matrix, dtype=float)  # (Tq, Tk)
        if values.ndim != 2 or 0 in values.shape:
            raise ValueError(f"matrix must be 2-D and non-empty, got shape {values.shape}")
        n_rows, n_cols = values.shape
        if len(row_labels) != n_rows:
            raise ValueError(f"{len(row_labels)} row labels for {n_rows} matrix rows")
        if col_labels is not None and len(col_labels) != n_cols:
            raise ValueError(f"{len(col_labels)} column labels for {n_cols} matrix columns")
        self.values = values
        self.row_labels = clean_labels(row_labels)
        self.col_labels = self.row_labels if col_labels is None else clean_labels(col_labels)
        self.keys_differ = self.col_labels != self.row_labels  # then columns get a legend
        self.title = title
        self.lang = lang  # the language of its headers and notes: "en" or "pt"
        self.scale = _scale_for(values, vmax)
        self.masked = as_mask(masked, values.shape)
        self.highlight = highlight

    @property
    def _label_w(self) -> int:
        return min(MAX_LABEL_CELLS, max(cell_len(label) for label in self.row_labels))

    @property
    def _index_w(self) -> int:
        return len(str(self.values.shape[0] - 1))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        n_cols = self.values.shape[1]
        widest = _HeatLayout(self._index_w, self._label_w, _CELL_WIDTHS[0], n_cols)
        narrowest = _HeatLayout(self._index_w, 0, 1, n_cols)
        minimum = narrowest.left_w + min(n_cols, _MIN_PAGE_COLS)
        maximum = max(
            widest.left_w + n_cols * widest.cell_w,
            _legend_min_width(self.scale),
            title_width(self.title),
        )
        return Measurement(minimum, maximum).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        n_cols = self.values.shape[1]
        layout = _heat_layout(width, n_cols, self._index_w, self._label_w)
        if layout is None:
            yield from emit(_note(TOO_NARROW, width)[:1], width)
            return
        colour = _use_colour(console)
        lines = title_lines(self.title, console, options)
        lines += _legend_lines(self.scale, colour, width)
        lines += _masked_legend(self.masked, colour, width, self.lang)
        pages = [
            range(s, min(s + layout.page_cols, n_cols)) for s in range(0, n_cols, layout.page_cols)
        ]
        levels = self._levels(colour)  # (Tq, Tk)
        for cols in pages:
            lines.append([])
            if len(pages) > 1:
                caption = _page_caption(cols, n_cols, width, self.lang)
                lines.append([Segment(caption, _BOLD)])
            lines += self._page(levels[:, cols.start : cols.stop], cols, layout, colour, width)
        yield from emit(lines, width)

    def _page(
        self, levels: np.ndarray, cols: range, layout: _HeatLayout, colour: bool, width: int
    ) -> list[Line]:
        """Header, one line per query row, and the key legend for columns `cols`.

        levels: int (Tq, len(cols)), colour levels (0..255) or shade levels (0..4), -1 = NaN.
        """
        header = _column_header(cols, layout.cell_w)
        corners = [lexicon.label(self.lang, key) for key in ("corner", "corner_short")]
        corner = next((c for c in corners if cell_len(c) < layout.left_w), "")
        lines: list[Line] = [[Segment(" " * layout.left_w), Segment(h, _DIM)] for h in header]
        lines[-1][0] = Segment(corner.rjust(layout.left_w - 1) + " ", _DIM)
        for i, label in enumerate(self.row_labels):
            left = str(i).rjust(layout.index_w) + " "
            if layout.label_w:
                left += pad(truncate(label, layout.label_w), layout.label_w) + " "
            cursor = Style(reverse=True, bold=True) if i == self.highlight else None
            lines.append([Segment(left, cursor), *_heat_cells(levels[i], colour, layout.cell_w)])
        if self.keys_differ:
            lines += _label_list(
                lexicon.label(self.lang, "keys_list"), cols, self.col_labels, width
            )
        return lines

    def _levels(self, colour: bool) -> np.ndarray:
        """Colour or shade level of every cell: int (Tq, Tk), -1 = NaN, -2 masked."""
        if colour:
            return with_masked(self.scale.colour_levels(self.values), self.masked)
        return with_masked(self.scale.shade_levels(self.values), self.masked)


# ---------------------------------------------------------------------------
# HeadGrid


def _half_block_lines(levels: np.ndarray, cell_w: int) -> list[Line]:
    """A panel with two matrix rows per line: `▀` fg = upper row, bg = lower row.

    levels: int (T, T), -1 = NaN, MASKED_LEVEL = masked (both blank: no colour in that
    half). Returns ceil(T / 2) lines of T * cell_w cells.
    """
    lines = []
    for top in range(0, levels.shape[0], 2):
        upper = levels[top]  # (T,)
        lower = levels[top + 1] if top + 1 < levels.shape[0] else np.full_like(upper, -1)
        cells: list[tuple[str, Style | None]] = []
        for u, low in zip(upper.tolist(), lower.tolist(), strict=True):
            u, low = max(u, -1), max(low, -1)  # masked is blank, as NaN is
            if u >= 0:
                cells.append(("▀" * cell_w, _half_style(u, low)))
            elif low >= 0:
                cells.append(("▄" * cell_w, _half_style(low, -1)))
            else:
                cells.append((" " * cell_w, None))
        lines.append(_runs(cells))
    return lines


def _shade_lines(levels: np.ndarray, cell_w: int) -> list[Line]:
    """A panel with one matrix row per line of shade characters; levels int (T, T)
    (-1 NaN and MASKED_LEVEL both `·`)."""
    return [
        [Segment("".join(NAN_CELL * cell_w if v < 0 else SHADES[v] * cell_w for v in row))]
        for row in levels.tolist()
    ]


def _panels_per_line(width: int, slot: int) -> int:
    return max(1, (width + _PANEL_GAP) // (slot + _PANEL_GAP))


class HeadGrid:
    """Every head of one layer as a grid of small heatmaps (a rich renderable).

    matrices: float [H, T, T], one shared colour scale from 0 to the max over all heads;
    [H, Tq, Tk] with `key_labels` for a rectangle (queries and keys from different inputs),
    which lists the queries (rows) and the keys (columns) apart.
    With colour each panel packs two matrix rows per text line (`▀`, foreground = upper
    row, background = lower row), 1 character per column, or 2 when that does not need
    more lines of panels. Without colour: shade characters, one matrix row per line.
    Panels wrap left to right, each with its title above; below the grid come the legend
    and the token list. If one panel is wider than the terminal, a note is shown instead
    suggesting `attnviz show --head N` or `--out FILE` (panels are not paged); below 20
    cells, just one cropped line, as for Heatmap.
    """

    def __init__(
        self,
        matrices: np.ndarray,
        labels: Sequence[str],
        *,
        panel_titles: Sequence[str],
        title: str | None = None,
        columns: int | None = None,
        lang: str = "en",
        masked: np.ndarray | None = None,
        key_labels: Sequence[str] | None = None,
        units: str = "tokens",
    ) -> None:
        """`columns`: panels per line when they fit, e.g. the heads of one layer per line;
        `masked` (H, T, T) bool: the cells drawn masked (keys the model could not see);
        `key_labels`: the columns' labels, when the keys are not the queries; `units`
        ("tokens" or "words") what the labels are, as the legend names them."""
        values = np.asarray(matrices, dtype=float)  # (H, Tq, Tk)
        square = key_labels is None
        if values.ndim != 3 or 0 in values.shape or (square and values.shape[1] != values.shape[2]):
            raise ValueError(f"matrices must be [H, T, T] and non-empty, got {values.shape}")
        if len(labels) != values.shape[1]:
            raise ValueError(f"{len(labels)} labels for {values.shape[1]} tokens")
        if key_labels is not None and len(key_labels) != values.shape[2]:
            raise ValueError(f"{len(key_labels)} key labels for {values.shape[2]} keys")
        self.key_labels = None if key_labels is None else clean_labels(key_labels)
        if len(panel_titles) != values.shape[0]:
            raise ValueError(f"{len(panel_titles)} panel titles for {values.shape[0]} heads")
        self.values = values
        self.labels = clean_labels(labels)
        self.panel_titles = [truncate(t, MAX_LABEL_CELLS) for t in clean_labels(panel_titles)]
        self.title = title
        self.scale = _scale_for(values, None)
        self.columns = columns
        self.lang = lang  # the language of its notes: "en" or "pt"
        self.masked = as_mask(masked, values.shape)
        self.units = "words" if units == "words" else "tokens"

    def _per_line(self, width: int, slot: int) -> int:
        """Panels on one line: as many as fit, or `columns` (or an even share of it)."""
        fit = _panels_per_line(width, slot)
        if self.columns is None or self.columns < 1:
            return fit
        if fit >= self.columns:
            return self.columns
        return max(d for d in range(1, fit + 1) if self.columns % d == 0)

    def _slot(self, cell_w: int) -> int:
        """Cells one panel takes: its matrix or its title, whichever is wider."""
        return max(self.values.shape[2] * cell_w, max(map(cell_len, self.panel_titles)))

    def _cell_w(self, width: int) -> int:
        """2 cells per column if that needs no more lines of panels than 1 does."""
        heads = self.values.shape[0]
        rows = [math.ceil(heads / self._per_line(width, self._slot(w))) for w in (1, 2)]
        return 2 if self._slot(2) <= width and rows[1] <= rows[0] else 1

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        heads = self.values.shape[0]
        maximum = max(
            heads * self._slot(2) + (heads - 1) * _PANEL_GAP,
            _legend_min_width(self.scale),
            title_width(self.title),
        )
        return Measurement(self._slot(1), maximum).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        n_tokens = self.values.shape[2]
        if self._slot(1) > width:
            message = (
                f"(one head is {self._slot(1)} columns wide, the terminal {width}: "
                "show a single head with `attnviz show --head N` or write an image "
                "with --out FILE)"
            )
            if width < _WRAP_MIN:  # one short line, as Heatmap shows
                yield from emit(_note(TOO_NARROW, width), width)
                return
            yield from emit(
                title_lines(self.title, console, options) + _note(message, width), width
            )
            return
        lines = title_lines(self.title, console, options)
        colour = _use_colour(console)
        cell_w = self._cell_w(width)
        slot = self._slot(cell_w)
        per_line = self._per_line(width, slot)
        panels = self._panels(colour, cell_w)
        for start in range(0, len(panels), per_line):
            heads = range(start, min(start + per_line, len(panels)))
            lines += self._grid_row(heads, panels, slot)
        lines += _legend_lines(self.scale, colour, width)
        lines += _masked_legend(self.masked, colour, width, self.lang)
        words = self.units == "words"
        lines += _note(lexicon.label(self.lang, "panels_note_words" if words else "panels_note"),
                       width)  # fmt: skip
        if self.key_labels is None:
            listed = lexicon.label(self.lang, "words_list" if words else "tokens_list")
            lines += _label_list(listed, range(n_tokens), self.labels, width)
        else:  # a rectangle: the rows' queries, then the columns' keys
            queries = range(self.values.shape[1])
            lines += _label_list(lexicon.label(self.lang, "queries_list"), queries, self.labels,
                                 width)  # fmt: skip
            lines += _label_list(
                lexicon.label(self.lang, "keys_list"), range(n_tokens), self.key_labels, width
            )
        yield from emit(lines, width)

    def _panels(self, colour: bool, cell_w: int) -> list[list[Line]]:
        """The lines of every panel, head by head."""
        if colour:
            levels = with_masked(self.scale.colour_levels(self.values), self.masked)  # (H, T, T)
            return [_half_block_lines(head, cell_w) for head in levels]
        levels = with_masked(self.scale.shade_levels(self.values), self.masked)  # (H, T, T)
        return [_shade_lines(head, cell_w) for head in levels]

    def _grid_row(self, heads: range, panels: list[list[Line]], slot: int) -> list[Line]:
        """Titles, then the panels of `heads` side by side, then a blank line."""
        gap = Segment(" " * _PANEL_GAP)
        titles: Line = []
        for h in heads:
            titles += [gap] if titles else []
            titles.append(Segment(pad(self.panel_titles[h], slot), _BOLD))
        lines = [titles]
        for k in range(len(panels[heads.start])):
            line: Line = []
            for h in heads:
                line += [gap] if line else []
                line += panels[h][k]
                line.append(Segment(" " * (slot - Segment.get_line_length(panels[h][k]))))
            lines.append(line)
        lines.append([])
        return lines

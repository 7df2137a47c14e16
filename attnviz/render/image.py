"""Attention heatmaps as matplotlib figures, saved as PNG, SVG or PDF.

Only this module imports matplotlib. It uses the object-oriented API
(`matplotlib.figure.Figure`) without pyplot, so no display is touched, no
figure is registered globally and no global style is changed: colours and
fonts are set on each artist.

Conventions: rows are queries (who attends, y axis), columns are keys (who is
attended to, x axis). Colour scales start at 0, since attention weights are
non-negative. Text is drawn literally (no mathtext), so tokens such as `$` or
`\\n` cannot break a drawing.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import logging
import math
import sys
import textwrap
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.colors import Colormap, Normalize
from matplotlib.font_manager import FontProperties

from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable
    from matplotlib.figure import Figure
    from matplotlib.ft2font import FT2Font
    from matplotlib.image import AxesImage

# Importing this module costs little more than `import matplotlib`: the Figure API (figure,
# axes, artists, the Agg backend) is imported by the functions that build figures, so a PNG
# grid, drawn straight to pixels (attnviz.render.raster), never loads it.

DEFAULT_CMAP = "viridis"
THEMES: tuple[str, ...] = ("light", "dark")

# Background and text colours of each theme.
_THEME_COLOURS = {
    "light": {"face": "#ffffff", "text": "#222222"},
    "dark": {"face": "#161a1f", "text": "#e8e8e8"},
}

# Sizes in inches and points. A cell of 0.2 in or more fits a 9 pt label beside
# each of its neighbours. The heatmap grows with the tokens up to 12 in a side
# (60 tokens); beyond MAX_DENSE_TOKENS only every k-th token is labelled, at
# most 40 labels in a slightly larger font.
_CELL_IN = 0.22
_ANNOTATED_CELL_IN = 0.42
_MIN_SIDE_IN = 3.0
_MAX_SIDE_IN = 12.0
_TICK_PT = 9.0
_SPARSE_TICK_PT = 10.0
MAX_DENSE_TOKENS = 60
_MAX_SPARSE_TICKS = 40
_MAX_LABEL_CHARS = 20
_ANNOTATE_MAX_TOKENS = 20
_GRID_ANNOTATE_MAX_TOKENS = 8
_GRID_TICK_PT = 7.0
_GRID_TICK_SPACING_IN = 0.15
_KEY_ROTATION = 60
# No side of a figure grows past this (6000 px at 200 dpi): grid panels shrink to fit,
# and long titles wrap onto at most _MAX_TITLE_LINES lines instead of widening the image.
MAX_FIGURE_IN = 30.0
_MIN_PANEL_IN = 0.6
_MAX_TITLE_LINES = 3

# Fonts tried, in this order, for glyphs missing from the default font. Only
# those installed are used; colour-bitmap emoji fonts are left out because
# FreeType cannot scale them.
_FALLBACK_FONTS = (
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
    "Noto Sans Devanagari",
    "Noto Sans Thai",
    "Noto Emoji",
    "Noto Sans Symbols 2",
    "Arial Unicode MS",
    "Microsoft YaHei",
    "Yu Gothic",
    "Malgun Gothic",
    "Segoe UI Symbol",
    "Segoe UI Emoji",
    "Hiragino Sans",
    "PingFang SC",
    "Apple SD Gothic Neo",
)


# ---------------------------------------------------------------- checks


def check_colormap(name: str) -> None:
    """Raise BadInput unless `name` is a registered matplotlib colormap."""
    known = list(matplotlib.colormaps)
    if name in known:
        return
    by_lower: dict[str, str] = {}
    for known_name in known:
        by_lower.setdefault(known_name.lower(), known_name)
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(by_lower[c] for c in close)}?)" if close else ""
    raise BadInput(
        f"unknown colormap {name!r}{hint}: use a matplotlib colormap such as "
        "viridis, magma, Blues, Greys"
    )


def _check_theme(theme: str) -> None:
    if theme not in THEMES:
        raise BadInput(f"unknown theme {theme!r}: use one of {', '.join(THEMES)}")


def _check_labels(labels: Sequence[str], count: int, what: str) -> None:
    if len(labels) != count:
        raise ValueError(f"{what}: {len(labels)} labels for {count} tokens")


def _image_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in IMAGE_SUFFIXES:
        shown = repr(path.suffix) if path.suffix else "no extension"
        raise BadInput(
            f"cannot save an image as {path.name} ({shown}): "
            f"end the file name with {', '.join(IMAGE_SUFFIXES)}"
        )
    return suffix[1:]


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def _quiet_fonts() -> Iterator[None]:
    """Silence matplotlib's per-glyph, font-lookup and layout complaints for odd labels."""
    logger = logging.getLogger("matplotlib.font_manager")
    level = logger.level
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*Glyph .* missing from")
        warnings.filterwarnings("ignore", message=r"(?s).*Matplotlib currently does not support")
        # Extreme labels can leave no room to lay out; the image is still written.
        warnings.filterwarnings("ignore", message=r"constrained_layout not applied")
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(level)


@cache
def _installed_fallbacks() -> tuple[str, ...]:
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return tuple(name for name in _FALLBACK_FONTS if name in installed)


def _font_family() -> list[str]:
    """The user's font family followed by the installed fallback fonts, for labels."""
    base = matplotlib.rcParams["font.family"]
    return [*([base] if isinstance(base, str) else base), *_installed_fallbacks()]


def _undrawable(char: str) -> bool:
    """A control character, a lone surrogate (an undecodable byte) or U+FFFE/U+FFFF:
    FreeType cannot draw a surrogate, and none of them may appear in an SVG (XML) file."""
    return unicodedata.category(char) in ("Cc", "Cs") or char in "\ufffe\uffff"


# Invisible characters that are dropped: bidirectional controls (matplotlib ignores them,
# but a browser showing an SVG obeys them and reverses or moves the text after them), and
# U+FEFF, a byte-order mark at the start of a file, which crashes matplotlib's PDF writer.
_DROPPED = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
)


def _clean_text(text: str) -> str:
    """`text` drawable on one line: undrawable characters escaped (`\\n`, `\\udcff`),
    bidirectional controls and U+FEFF dropped."""
    return "".join(
        repr(ch)[1:-1] if _undrawable(ch) else ch for ch in str(text) if ch not in _DROPPED
    )


def _clean_label(label: str) -> str:
    """A label drawn literally on one line: control characters escaped, long ones cut."""
    text = _clean_text(label)
    if len(text) > _MAX_LABEL_CHARS:
        text = text[: _MAX_LABEL_CHARS - 1] + "…"
    return text


def _ems(text: str) -> float:
    """Rough width of `text` in ems (wide East Asian characters count 1, others 0.6)."""
    return sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6 for ch in text)


def _text_width_in(labels: Sequence[str], size_pt: float) -> float:
    """Rough width in inches of the widest label (wide East Asian characters count double)."""
    return max((_ems(label) for label in labels), default=0.0) * size_pt / 72


def _title_text(title: str, width_in: float, size_pt: float) -> str:
    """The title, cleaned and wrapped to `width_in` on at most _MAX_TITLE_LINES lines (the
    last cut with `…`), so that a long title cannot make the image wider than the figure."""
    text = _clean_text(title)
    em_per_char = max(0.6, _ems(text) / max(1, len(text)))
    chars = max(10, int(width_in * 72 / (size_pt * em_per_char)))
    lines = textwrap.wrap(text, chars, break_on_hyphens=False) or [text]
    if len(lines) > _MAX_TITLE_LINES:
        lines = [*lines[: _MAX_TITLE_LINES - 1], lines[_MAX_TITLE_LINES - 1][: chars - 1] + "…"]
    return "\n".join(lines)


def _tick_step(count: int, max_ticks: int) -> int:
    """Label every token when they fit, else every k-th so that at most max_ticks show."""
    return 1 if count <= max_ticks else math.ceil(count / max_ticks)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _axis_name(name: str, step: int) -> str:
    return name if step == 1 else f"{name} (every {_ordinal(step)} token labelled)"


def _as_matrix(values: np.ndarray, ndim: int, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != ndim or 0 in array.shape:
        raise ValueError(f"{what}: expected a non-empty {ndim}-d array, got shape {array.shape}")
    return array


def _colour_max(values: np.ndarray, vmax: float | None) -> float:
    if vmax is not None:
        if not math.isfinite(vmax) or vmax <= 0:
            raise BadInput(f"colour scale maximum {vmax} is not positive: give a value above 0")
        return float(vmax)
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def _contrast_text(rgba: tuple[float, float, float, float]) -> str:
    """Black or white, whichever reads better on a cell of colour rgba (WCAG luminance)."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.179 else "#ffffff"


def _annotate(
    ax: Axes, values: np.ndarray, cmap: Colormap, norm: Normalize, size_pt: float, x0: float = 0
) -> None:
    """Each cell's value on the cell, in black or white; the matrix starts at x = x0."""
    family = _font_family()
    for (row, col), value in np.ndenumerate(values):
        if not math.isfinite(value):
            continue
        ax.text(
            x0 + col,
            row,
            f"{value:.2f}",
            ha="center",
            va="center",
            fontsize=size_pt,
            color=_contrast_text(cmap(norm(value))),
            parse_math=False,
            family=family,
        )


def _style_axes(ax: Axes, fg: str) -> None:
    ax.tick_params(colors=fg, which="both")
    for spine in ax.spines.values():
        spine.set_edgecolor(fg)


def _colorbar(
    fig: Figure, image: ScalarMappable, rect: tuple[float, float, float, float], fg: str
) -> None:
    """A colour bar for `image` in `rect` (figure fractions), labelled on its right."""
    cax = fig.add_axes(rect, label="<colorbar>")
    bar = fig.colorbar(image, cax=cax)
    bar.set_label("attention weight", color=fg)
    bar.ax.tick_params(colors=fg, which="both")
    bar.outline.set_edgecolor(fg)


def _set_ticks(ax: Axes, axis: str, labels: Sequence[str], step: int, size_pt: float) -> None:
    """A tick at every `step`-th token, with its label."""
    positions = list(range(0, len(labels), step))
    texts = [labels[i] for i in positions]
    family = _font_family()
    if axis == "x":
        ax.set_xticks(
            positions,
            labels=texts,
            rotation=_KEY_ROTATION,
            ha="right",
            rotation_mode="anchor",
            fontsize=size_pt,
            parse_math=False,
            family=family,
        )
    else:
        ax.set_yticks(positions, labels=texts, fontsize=size_pt, parse_math=False, family=family)


# ---------------------------------------------------------------- geometry
#
# Figures are laid out here, to the inch, from the measured size of their text, the way
# the renderer will draw it: no layout engine runs while drawing and nothing is cropped
# when saving, which took most of the time of writing a grid of small heatmaps.

_PAD_IN = 0.1  # the blank border around the drawing
_GAP_IN = 0.08  # between a block of text and the next thing
_BAR_GAP_IN = 0.12  # between the heatmaps and the colour bar
_MEASURE_DPI = 288.0  # text is measured at this resolution (4 pixels to the point)
_SLACK = 1.04  # measured widths grow by this much: hinting differs a little between resolutions
_SIN_ROT = math.sin(math.radians(_KEY_ROTATION))
_COS_ROT = math.cos(math.radians(_KEY_ROTATION))


def _hinting() -> Any:
    """The glyph-loading flag for rcParams["text.hinting"], as matplotlib's Agg backend
    chooses it (without importing that backend)."""
    from matplotlib import ft2font

    name = {
        "default": "DEFAULT",
        "no_autohint": "NO_AUTOHINT",
        "force_autohint": "FORCE_AUTOHINT",
        "no_hinting": "NO_HINTING",
        True: "FORCE_AUTOHINT",
        False: "NO_HINTING",
        "either": "DEFAULT",
        "native": "NO_AUTOHINT",
        "auto": "FORCE_AUTOHINT",
        "none": "NO_HINTING",
    }.get(matplotlib.rcParams["text.hinting"], "FORCE_AUTOHINT")
    flags = getattr(ft2font, "LoadFlags", None)  # matplotlib >= 3.10
    return getattr(flags, name) if flags is not None else getattr(ft2font, f"LOAD_{name}")


def _ft_font(font: FontProperties, dpi: float) -> FT2Font:
    """The FreeType font (with its fallbacks) for `font`, cleared and sized for `dpi`, as
    matplotlib's Agg renderer prepares it."""
    ft = font_manager.get_font(font_manager.fontManager._find_fonts_by_props(font))
    ft.clear()
    ft.set_size(font.get_size_in_points(), dpi)
    return ft


def _extent(text: str, font: FontProperties, dpi: float) -> tuple[float, float, float]:
    """Width, height and descent in pixels of one line of `text` at `dpi`, as the Agg
    renderer measures it (`RendererAgg.get_text_width_height_descent`)."""
    ft = _ft_font(font, dpi)
    ft.set_text(text, 0.0, flags=_hinting())
    width, height = ft.get_width_height()
    return width / 64, height / 64, ft.get_descent() / 64


def _font(size: float | str, family: list[str] | None = None) -> FontProperties:
    return FontProperties(family=family, size=size)


def _sizes_in(texts: Sequence[str], font: FontProperties) -> tuple[list[float], float]:
    """The width of each one-line text, and the height of a line of the tallest, in inches,
    as the Agg renderer draws them (matplotlib lays out a line at least as tall as "lp")."""
    _, line, _ = _extent("lp", font, _MEASURE_DPI)
    widths = []
    for text in texts:
        width, height, _ = _extent(text, font, _MEASURE_DPI)
        widths.append(width)
        line = max(line, height)
    return [w / _MEASURE_DPI * _SLACK for w in widths], line / _MEASURE_DPI * _SLACK


def _text_block_in(text: str, font: FontProperties) -> tuple[float, float]:
    """Width and height in inches of `text`, which may have several lines."""
    lines = text.split("\n")
    widths, line = _sizes_in(lines, font)
    return max(widths), line * (1 + 1.2 * (len(lines) - 1))


def _fit_title(title: str, width_in: float, font: FontProperties) -> tuple[str, float]:
    """`title` wrapped (see _title_text) so that its widest line, as measured, fits in
    `width_in`; and the height of the wrapped title in inches."""
    size = font.get_size_in_points()
    text = _title_text(title, width_in, size)
    for _ in range(4):
        wide, high = _text_block_in(text, font)
        if wide <= width_in:
            break
        text = _title_text(title, width_in * width_in / wide * 0.95, size)
    else:
        high = _text_block_in(text, font)[1]
    return text, high


def _tick_in(axis: str) -> float:
    """Length plus padding of a tick, in inches."""
    rc = matplotlib.rcParams
    if axis == "x":
        return (rc["xtick.major.size"] + rc["xtick.major.pad"]) / 72
    return (rc["ytick.major.size"] + rc["ytick.major.pad"]) / 72


def _axis_label_in() -> float:
    """Room for an axis name ("key", "query", "attention weight") beside its tick labels."""
    _, line = _sizes_in([], _font(matplotlib.rcParams["axes.labelsize"]))
    return matplotlib.rcParams["axes.labelpad"] / 72 + line


def _key_labels_in(widths: Sequence[float], line: float) -> float:
    """How far rotated key labels reach below the axis (past the tick and its padding)."""
    return max((w * _SIN_ROT + line * _COS_ROT for w in widths), default=0.0)


def _bar_ticks(top: float, length_in: float) -> tuple[list[float], list[str], str]:
    """The ticks of a colour bar of `length_in` from 0 to `top`, their labels and the
    multiplier over the bar ("1e-5", or ""), as the bar's locator and formatter pick them."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    size = _font(matplotlib.rcParams["ytick.labelsize"]).get_size_in_points()
    bins = min(9, max(1, int(length_in * 72 // (2 * size))))
    locator = MaxNLocator(bins, steps=[1, 2, 2.5, 5, 10])
    ticks = [float(t) for t in locator.tick_values(0, top) if t >= 0]  # some past the top
    formatter = ScalarFormatter()
    formatter.create_dummy_axis()
    formatter.axis.set_view_interval(0.0, top)  # type: ignore[union-attr]
    texts = formatter.format_ticks(ticks)
    return ticks, texts, formatter.get_offset()


def _bar_right_in(top: float, length_in: float) -> float:
    """Room right of a colour bar of `length_in` from 0 to `top`: ticks, their labels and
    the bar's name, with the tick labels its locator and formatter will pick."""
    font = _font(matplotlib.rcParams["ytick.labelsize"])
    _, texts, offset = _bar_ticks(top, length_in)
    widths, _ = _sizes_in(texts, font)
    # A scale of tiny weights gets a multiplier ("1e-5") over the bar, reaching right.
    reach = _sizes_in([offset], font)[0][0] if offset else 0.0
    return max(_tick_in("y") + max(widths, default=0.0) + _axis_label_in(), reach)


# ---------------------------------------------------------------- figures


def heatmap_figure(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str] | None = None,
    *,
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
    vmax: float | None = None,
    axis_names: tuple[str, str] = ("query", "key"),
) -> Figure:
    """One attention matrix [Tq, Tk]: queries on the y axis, keys on the x axis.

    `axis_names` names the y and x axes (a layers × heads grid: ("layer", "head")).

    The colour scale runs from 0 to `vmax` (default: the matrix maximum). Cell
    values are written only when `annotate` and both sides have at most 20 tokens.
    Beyond 60 tokens an axis labels every k-th token only (at most 40 labels). A long
    title wraps (at most 3 lines) instead of widening the image.
    """
    check_colormap(cmap)
    _check_theme(theme)
    values = _as_matrix(matrix, 2, "heatmap")
    n_q, n_k = values.shape
    rows = [_clean_label(label) for label in row_labels]
    cols = rows if col_labels is None else [_clean_label(label) for label in col_labels]
    _check_labels(rows, n_q, "query labels")
    _check_labels(cols, n_k, "key labels")
    top = _colour_max(values, vmax)
    colours = _THEME_COLOURS[theme]
    fg = colours["text"]

    write_values = annotate and max(n_q, n_k) <= _ANNOTATE_MAX_TOKENS
    cell = _ANNOTATED_CELL_IN if write_values else _CELL_IN
    width, height = cell * n_k, cell * n_q
    grow = max(1.0, _MIN_SIDE_IN / max(width, height))
    ax_w = min(max(width * grow, 1.2), _MAX_SIDE_IN)
    ax_h = min(max(height * grow, 1.2), _MAX_SIDE_IN)
    x_step = _tick_step(n_k, MAX_DENSE_TOKENS if n_k <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    y_step = _tick_step(n_q, MAX_DENSE_TOKENS if n_q <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    x_pt = _TICK_PT if x_step == 1 else _SPARSE_TICK_PT
    y_pt = _TICK_PT if y_step == 1 else _SPARSE_TICK_PT
    shown_cols = [cols[i] for i in range(0, n_k, x_step)]
    shown_rows = [rows[i] for i in range(0, n_q, y_step)]
    title_pt = 12.0 if max(ax_w, ax_h) < 8 else 14.0

    with _quiet_fonts():
        family = _font_family()
        # Margins (inches) from the measured labels: query labels and name on the left (or
        # the first key label, leaning left), key labels and name below, the colour bar
        # right, the title above.
        col_widths, col_line = _sizes_in(shown_cols, _font(x_pt, family))
        row_widths, _ = _sizes_in(shown_rows, _font(y_pt, family))
        leaning = col_widths[0] * _COS_ROT - ax_w / (2 * n_k)
        left = _PAD_IN + max(_axis_label_in() + max(row_widths) + _tick_in("y"), leaning)
        bottom = _PAD_IN + _axis_label_in() + _key_labels_in(col_widths, col_line) + _tick_in("x")
        bar_w = min(ax_h / 15, 0.25)
        right = _BAR_GAP_IN + bar_w + _bar_right_in(top, ax_h) + _PAD_IN
        title_font = _font(title_pt, family)
        # The title is centred on the heatmap and may use the margins on both sides.
        title_text, title_h = _fit_title(
            title, ax_w + 2 * min(left, right) - 2 * _PAD_IN, title_font
        )
        above = _PAD_IN + title_h + matplotlib.rcParams["axes.titlepad"] / 72
        fig_w, fig_h = left + ax_w + right, bottom + ax_h + above

        from matplotlib.figure import Figure

        fig = Figure(figsize=(fig_w, fig_h), facecolor=colours["face"])
        ax = fig.add_axes((left / fig_w, bottom / fig_h, ax_w / fig_w, ax_h / fig_h))
        ax.set_facecolor(colours["face"])
        colormap = matplotlib.colormaps[cmap]
        norm = Normalize(vmin=0.0, vmax=top)
        image = _show(ax, values, colormap, norm)
        _set_ticks(ax, "x", cols, x_step, x_pt)
        _set_ticks(ax, "y", rows, y_step, y_pt)
        ax.set_xlabel(_axis_name(axis_names[1], x_step), color=fg)
        ax.set_ylabel(_axis_name(axis_names[0], y_step), color=fg)
        ax.set_title(title_text, color=fg, fontproperties=title_font, parse_math=False)
        _style_axes(ax, fg)
        bar_x = (left + ax_w + _BAR_GAP_IN) / fig_w
        _colorbar(fig, image, (bar_x, bottom / fig_h, bar_w / fig_w, ax_h / fig_h), fg)
        if write_values:
            _annotate(ax, values, colormap, norm, 8.0)
    return fig


def bars_figure(
    labels: Sequence[str],
    values: Sequence[float] | np.ndarray,
    *,
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
) -> Figure:
    """Horizontal bars, one per label, top to bottom in the order given (one query's row).

    Bars take their colour from `cmap` by value (0 .. the largest); `annotate` writes
    each value beside its bar. Beyond 60 bars only every k-th label is written.
    """
    check_colormap(cmap)
    _check_theme(theme)
    values = _as_matrix(np.asarray(values, dtype=float), 1, "bars")
    names = [_clean_label(label) for label in labels]
    _check_labels(names, len(values), "labels")
    colours = _THEME_COLOURS[theme]
    fg = colours["text"]
    n = len(values)
    step = _tick_step(n, MAX_DENSE_TOKENS if n <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    size_pt = _TICK_PT if step == 1 else _SPARSE_TICK_PT
    left = _text_width_in([names[i] for i in range(0, n, step)], size_pt) + 0.6
    height = min(max(0.22 * n, 1.6), _MAX_SIDE_IN) + 1.0
    top = _colour_max(values, None)

    from matplotlib.figure import Figure

    with _quiet_fonts():
        fig = Figure(figsize=(left + 5.0, height), layout="constrained", facecolor=colours["face"])
        ax = fig.add_subplot()
        ax.set_facecolor(colours["face"])
        colormap = matplotlib.colormaps[cmap]
        norm = Normalize(vmin=0.0, vmax=top)
        finite = np.nan_to_num(values, nan=0.0)
        positions = np.arange(n)
        ax.barh(positions, finite, color=[colormap(norm(v)) for v in finite], height=0.8)
        ax.set_ylim(n - 0.5, -0.5)  # the first label on top
        ax.set_xlim(0.0, top * (1.18 if annotate else 1.02))
        _set_ticks(ax, "y", names, step, size_pt)
        ax.set_xlabel("attention weight", color=fg)
        ax.set_title(
            _title_text(title, left + 4.0, 12.0),
            color=fg,
            fontsize=12.0,
            parse_math=False,
            family=_font_family(),
        )
        _style_axes(ax, fg)
        if annotate and n <= MAX_DENSE_TOKENS:
            for y, value in zip(positions, finite, strict=True):
                ax.text(
                    value + top * 0.01, float(y), f"{value:.2f}", va="center", fontsize=8, color=fg
                )
    return fig


def _show(ax: Axes, values: np.ndarray, colormap: Colormap, norm: Normalize) -> AxesImage:
    """`values` as a heatmap on `ax`, one flat colour per cell: the small matrix goes through
    the colormap first, and only its colours are enlarged to the pixels of the panel."""
    return ax.imshow(
        values,
        cmap=colormap,
        norm=norm,
        aspect="auto",
        interpolation="nearest",
        interpolation_stage="rgba",
    )


def _grid_shape(count: int) -> tuple[int, int]:
    """Rows and columns of a near-square grid, wider than tall: 12 -> (3, 4)."""
    cols = math.ceil(math.sqrt(count))
    return math.ceil(count / cols), cols


@dataclass(frozen=True)
class _GridGeometry:
    """Where everything of a grid goes, in inches: panels of `side`, `wgap` and `hgap`
    apart, the margins around them, every `step`-th token labelled. The gap between two
    panels of a row is `gap_cells` cells wide, a whole number of `1 / subcells` cells,
    so that a row of panels can be one image."""

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
) -> _GridGeometry:
    family = _font_family()
    n = len(tokens)
    step = _tick_step(n, max(1, int(side / _GRID_TICK_SPACING_IN)))
    widths, line = _sizes_in([tokens[i] for i in range(0, n, step)], _font(_GRID_TICK_PT, family))
    _, name_line = _sizes_in([], _font(10))  # "key", "query"
    _, panel_title_line = _sizes_in([], _font(9, family))
    panel_title = panel_title_line * 1.15 + matplotlib.rcParams["axes.titlepad"] / 72
    gap = 0.15 / side * n  # cells in 0.15 in, rounded to whole subcells
    subcells = max(1, math.ceil(4 / gap))
    gap_cells = max(1, round(gap * subcells)) / subcells
    wgap, hgap = gap_cells * side / n, panel_title + _GAP_IN
    grid_w = n_cols * side + (n_cols - 1) * wgap
    grid_h = n_rows * side + (n_rows - 1) * hgap
    leaning = widths[0] * _COS_ROT - side / (2 * n)  # the first key label, leaning left
    left = _PAD_IN + max(name_line + _GAP_IN + max(widths) + _tick_in("y"), leaning)
    bottom = _PAD_IN + name_line + _GAP_IN + _key_labels_in(widths, line) + _tick_in("x")
    right = _BAR_GAP_IN + min(grid_h / 15, 0.25) + _bar_right_in(top, grid_h) + _PAD_IN
    fig_w = left + grid_w + right
    text, title_h = _fit_title(title, fig_w - 2 * _PAD_IN, _font(13, family))
    above = _PAD_IN + title_h + _GAP_IN + panel_title
    return _GridGeometry(
        side, step, subcells, gap_cells, wgap, hgap, left, bottom, right, above, text
    )


def _strip(colours: np.ndarray, subcells: int, gap_cells: float) -> np.ndarray:
    """Panels of RGBA colours (k, T, T, 4) side by side as one image (T, width, 4), each
    cell `subcells` pixels wide, with transparent gaps of `gap_cells` cells between."""
    k, n = colours.shape[:2]
    gap = round(gap_cells * subcells)
    wide = np.repeat(colours, subcells, axis=2)  # (k, T, T*sub, 4)
    padded = np.zeros((k, n, n * subcells + gap, 4), dtype=colours.dtype)
    padded[:, :, : n * subcells] = wide
    return padded.transpose(1, 0, 2, 3).reshape(n, -1, 4)[:, : k * (n * subcells + gap) - gap]


@dataclass(frozen=True)
class _GridPlan:
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
    g: _GridGeometry
    fig_w: float
    fig_h: float

    @property
    def grid_h(self) -> float:
        return self.fig_h - self.g.bottom - self.g.above

    @property
    def bar(self) -> tuple[float, float, float, float]:
        """The colour bar's left, bottom, width and height in inches."""
        width = min(self.grid_h / 15, 0.25)
        return self.fig_w - self.g.right + _BAR_GAP_IN, self.g.bottom, width, self.grid_h

    def panel(self, head: int) -> tuple[float, float]:
        """Left and bottom in inches of the panel of `head`."""
        row, col = divmod(head, self.n_cols)
        g = self.g
        return g.left + col * (g.side + g.wgap), g.bottom + (self.n_rows - 1 - row) * (
            g.side + g.hgap
        )


def _plan_grid(
    matrices: np.ndarray,
    labels: Sequence[str],
    *,
    panel_titles: Sequence[str],
    title: str,
    cmap: str,
    theme: str,
    annotate: bool,
    columns: int | None,
) -> _GridPlan:
    check_colormap(cmap)
    _check_theme(theme)
    values = _as_matrix(matrices, 3, "head grid")
    heads, n_q, n_k = values.shape
    if n_q != n_k:
        raise ValueError(f"head grid: expected square matrices, got {n_q}x{n_k}")
    tokens = [_clean_label(label) for label in labels]
    _check_labels(tokens, n_q, "grid labels")
    if len(panel_titles) != heads:
        raise ValueError(f"head grid: {len(panel_titles)} panel titles for {heads} heads")
    titles = [_clean_label(t) for t in panel_titles]
    top = _colour_max(values, None)

    write_values = annotate and n_q <= _GRID_ANNOTATE_MAX_TOKENS
    if columns is not None and columns < 1:
        raise ValueError(f"head grid: columns must be at least 1, got {columns}")
    n_rows, n_cols = _grid_shape(heads) if columns is None else (-(-heads // columns), columns)
    sin_rot = math.sin(math.radians(_KEY_ROTATION))
    widest_in = _text_width_in(tokens, _GRID_TICK_PT)  # at least the width of those shown
    fit_w = (MAX_FIGURE_IN - widest_in - 1.7) / n_cols - 0.15  # panel sides that keep the
    fit_h = (MAX_FIGURE_IN - widest_in * sin_rot - 1.3) / n_rows - 0.4  # figure in bounds
    side = min(max(2.2, (0.34 if write_values else 0.15) * n_q), 3.6, fit_w, fit_h)
    side = max(side, _MIN_PANEL_IN)

    with _quiet_fonts():
        g = _grid_geometry(side, tokens, title, top, n_rows, n_cols)
        for _ in range(3):  # the measured labels may need more room than the estimate gave
            fig_w, fig_h = g.size(n_rows, n_cols)
            over = max((fig_w - MAX_FIGURE_IN) / n_cols, (fig_h - MAX_FIGURE_IN) / n_rows)
            if over <= 0 or g.side <= _MIN_PANEL_IN:
                break
            g = _grid_geometry(
                max(_MIN_PANEL_IN, g.side - over), tokens, title, top, n_rows, n_cols
            )
    fig_w, fig_h = g.size(n_rows, n_cols)
    return _GridPlan(
        values, tokens, titles, top, cmap, theme, write_values, n_rows, n_cols, g, fig_w, fig_h
    )


def grid_figure(
    matrices: np.ndarray,
    labels: Sequence[str],
    *,
    panel_titles: Sequence[str],
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
    columns: int | None = None,
) -> Figure:
    """Every head of a layer, [H, T, T], as a grid of panels with one shared colour scale.

    `columns` panels per row (e.g. one row per layer); by default a near-square grid.

    The scale runs from 0 to the maximum over all heads and has one colour bar.
    Tokens are labelled on the outer panels only (left column, bottom of each
    column); inner panels carry no ticks. Cell values are written only when `annotate`
    and T <= 8. Panels shrink (down to 0.6 in) so that neither side of the figure
    passes MAX_FIGURE_IN.

    Each row of panels is one Axes holding one image: the panels' colours side by side
    with gaps between them, a frame and a title over each panel. Drawing a 72-panel
    model view this way takes a fraction of the time of 72 Axes with an image each.
    A PNG of the same grid is drawn faster still, straight to pixels, by `save_grid`.
    """
    plan = _plan_grid(
        matrices,
        labels,
        panel_titles=panel_titles,
        title=title,
        cmap=cmap,
        theme=theme,
        annotate=annotate,
        columns=columns,
    )
    from matplotlib import transforms
    from matplotlib.cm import ScalarMappable
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    values, tokens, titles, top, g = plan.values, plan.tokens, plan.titles, plan.top, plan.g
    heads, n_q, _ = values.shape
    n_rows, n_cols, fig_w, fig_h = plan.n_rows, plan.n_cols, plan.fig_w, plan.fig_h
    write_values = plan.write_values
    colours = _THEME_COLOURS[theme]
    fg = colours["text"]
    family = _font_family()
    grid_h = plan.grid_h

    with _quiet_fonts():
        fig = Figure(figsize=(fig_w, fig_h), facecolor=colours["face"])
        colormap = matplotlib.colormaps[cmap]
        norm = Normalize(vmin=0.0, vmax=top)
        rgba = colormap(norm(values), bytes=True)  # (H, T, T, 4): the colours, then enlarged
        n, pitch = n_q, n_q + g.gap_cells  # panel c of a row starts at x = c * pitch
        positions = list(range(0, n, g.step))
        shown = [tokens[i] for i in positions]
        title_offset = transforms.ScaledTranslation(
            0, matplotlib.rcParams["axes.titlepad"] / 72, fig.dpi_scale_trans
        )
        for row in range(n_rows):
            first = row * n_cols
            members = range(first, min(first + n_cols, heads))
            k = len(members)
            width = k * g.side + (k - 1) * g.wgap
            bottom = g.bottom + (n_rows - 1 - row) * (g.side + g.hgap)
            ax = fig.add_axes((g.left / fig_w, bottom / fig_h, width / fig_w, g.side / fig_h))
            ax.set_facecolor(colours["face"])
            ax.imshow(
                _strip(rgba[first : first + k], g.subcells, g.gap_cells),
                extent=(-0.5, k * pitch - g.gap_cells - 0.5, n - 0.5, -0.5),
                aspect="auto",
                interpolation="nearest",
            )
            for spine in ax.spines.values():
                spine.set_visible(False)
            # Keys under a panel with no panel below it; queries left of the row.
            under = [c for c, head in enumerate(members) if head + n_cols >= heads]
            ax.set_xticks(
                [c * pitch + i for c in under for i in positions],
                labels=shown * len(under),
                rotation=_KEY_ROTATION,
                ha="right",
                rotation_mode="anchor",
                fontsize=_GRID_TICK_PT,
                parse_math=False,
                family=family,
            )
            ax.set_yticks(
                positions, labels=shown, fontsize=_GRID_TICK_PT, parse_math=False, family=family
            )
            ax.tick_params(colors=fg, which="both")
            over_panel = transforms.blended_transform_factory(ax.transData, ax.transAxes)
            for c, head in enumerate(members):
                x0 = c * pitch
                ax.add_patch(
                    Rectangle(
                        (x0 - 0.5, -0.5),
                        n,
                        n,
                        fill=False,
                        edgecolor=fg,
                        linewidth=matplotlib.rcParams["axes.linewidth"],
                        clip_on=False,
                    )
                )
                ax.text(
                    x0 + (n - 1) / 2,
                    1.0,
                    titles[head],
                    transform=over_panel + title_offset,
                    ha="center",
                    va="baseline",
                    color=fg,
                    fontsize=9,
                    parse_math=False,
                    family=family,
                )
                if write_values:
                    _annotate(ax, values[head], colormap, norm, 6.0, x0=x0)
        middle_x = (g.left + (fig_w - g.left - g.right) / 2) / fig_w
        middle_y = (g.bottom + grid_h / 2) / fig_h
        fig.supxlabel(
            _axis_name("key", g.step), color=fg, fontsize=10, x=middle_x, y=_PAD_IN / fig_h
        )
        fig.supylabel(
            _axis_name("query", g.step), color=fg, fontsize=10, x=_PAD_IN / fig_w, y=middle_y
        )
        fig.suptitle(
            g.title,
            color=fg,
            fontsize=13,
            parse_math=False,
            family=family,
            y=1 - _PAD_IN / fig_h,
        )
        bar_x, bar_y, bar_w, bar_h = plan.bar
        scale = ScalarMappable(norm=norm, cmap=colormap)
        _colorbar(fig, scale, (bar_x / fig_w, bar_y / fig_h, bar_w / fig_w, bar_h / fig_h), fg)
    return fig


# ---------------------------------------------------------------- saving


def _release(fig: Figure) -> None:
    """Close the figure. Figures made here are not registered anywhere, so only one that
    pyplot made (and registered) needs closing; pyplot is never imported for this."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)


def _check_pixels(fig: Figure, dpi: float) -> None:
    """Refuse an image too big to draw in bounded memory, before it is drawn."""
    width_in, height_in = (float(v) for v in fig.get_size_inches())
    try:
        _check_size(width_in, height_in, dpi)
    except BadInput:
        _release(fig)
        raise


def _check_size(width_in: float, height_in: float, dpi: float) -> None:
    from attnviz.limits import MAX_IMAGE_PIXELS

    pixels = width_in * dpi * height_in * dpi
    if pixels > MAX_IMAGE_PIXELS:
        fits = max(1, int((MAX_IMAGE_PIXELS / (width_in * height_in)) ** 0.5))
        raise BadInput(
            f"the image would be {width_in * dpi:,.0f} × {height_in * dpi:,.0f} pixels at "
            f"--dpi {dpi}, more than attnviz draws ({MAX_IMAGE_PIXELS // 10**6} million): use "
            f"--dpi {fits} or less, or show fewer heads"
        )


_Z_RLE = 3  # zlib's Z_RLE strategy


def _crop(fig: Figure) -> dict[str, Any]:
    """Save options: the figures made here are laid out to the inch and saved whole; one
    with a layout engine (the head statistics) is cropped to what it draws, plus a border."""
    if fig.get_layout_engine() is None:
        return {}
    return {"bbox_inches": "tight", "pad_inches": _PAD_IN}


def _check_dpi(dpi: object) -> None:
    if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not dpi > 0:
        raise BadInput(f"dpi must be a positive number, got {dpi}: try 200 for slides")


def save_grid(
    matrices: np.ndarray,
    labels: Sequence[str],
    path: Path,
    *,
    panel_titles: Sequence[str],
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
    columns: int | None = None,
    dpi: int = 200,
    transparent: bool = False,
) -> None:
    """Write the grid that `grid_figure` draws to `path` (PNG, SVG or PDF), all or nothing.

    A PNG is drawn straight to pixels (attnviz.render.raster) from the same layout, without
    building a Figure; SVG and PDF go through `grid_figure` and keep their text as text."""
    path = Path(path)
    fmt = _image_format(path)
    _check_dpi(dpi)
    options: dict[str, Any] = {
        "panel_titles": panel_titles,
        "title": title,
        "cmap": cmap,
        "theme": theme,
        "annotate": annotate,
        "columns": columns,
    }
    if fmt != "png":
        save_figure(
            grid_figure(matrices, labels, **options), path, dpi=dpi, transparent=transparent
        )
        return
    from attnviz.render.raster import grid_pixels

    plan = _plan_grid(matrices, labels, **options)
    _check_size(plan.fig_w, plan.fig_h, dpi)
    with _quiet_fonts():
        pixels = grid_pixels(plan, dpi, transparent=transparent)
    with atomic_write(path, "wb") as handle:
        _encode_png(pixels, handle, dpi)


def save_figure(fig: Figure, path: Path, *, dpi: int = 200, transparent: bool = False) -> None:
    """Write `fig` to `path` as PNG, SVG or PDF (chosen by the suffix), all or nothing.

    SVG keeps text as text (searchable, editable in slide software); PDF embeds
    TrueType fonts (no Type 3 fonts, which some publishers reject). SVG and PDF
    carry no creation date, so the same figure gives the same bytes. The figure
    is closed afterwards, also when writing fails.
    """
    path = Path(path)
    fmt = _image_format(path)
    _check_dpi(dpi)
    _check_pixels(fig, dpi)  # SVG and PDF embed the heatmaps as images at this dpi too
    metadata: dict[str, str | None] = {}
    if fmt == "svg":
        metadata = {"Date": None}
    elif fmt == "pdf":
        metadata = {"CreationDate": None}
    # Text stays text in SVG; PDF embeds TrueType; SVG ids do not change between runs.
    rc_vector = matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "attnviz", "pdf.fonttype": 42}
    )
    options: dict[str, Any] = {
        "dpi": dpi,
        "transparent": transparent,
        "facecolor": "none" if transparent else fig.get_facecolor(),
    }
    try:
        with _quiet_fonts(), rc_vector, atomic_write(path, "wb") as handle:
            if fmt == "png" and fig.get_layout_engine() is None:
                _write_png(fig, handle, options)
            else:
                fig.savefig(handle, format=fmt, **_crop(fig), **options, metadata=metadata)
    finally:
        _release(fig)


def _write_png(fig: Figure, handle: IO[bytes], options: dict[str, Any]) -> None:
    """`fig` as PNG: drawn by Agg, encoded by Pillow as RGB unless transparent, with
    zlib's run-length strategy, which suits heatmaps (rows of equal pixels): about half
    the time of matplotlib's RGBA at the default setting, for files of similar size."""
    from PIL import Image

    raw = io.BytesIO()
    fig.savefig(raw, format="rgba", **options)
    data = np.frombuffer(raw.getbuffer(), dtype=np.uint8)  # the pixels, not a copy
    dpi = options["dpi"]
    width = int(fig.get_figwidth() * dpi)  # as Agg sizes its canvas
    height = data.size // (4 * width)
    image = Image.frombuffer("RGBA", (width, height), data, "raw", "RGBA", 0, 1)
    if not options["transparent"]:
        image = image.convert("RGB")
    image.save(handle, format="png", dpi=(dpi, dpi), compress_type=_Z_RLE)


def _encode_png(pixels: np.ndarray, handle: IO[bytes], dpi: float) -> None:
    """(height, width, 3 or 4) uint8 pixels as an RGB or RGBA PNG with its dpi. Each row is
    stored as its difference from the row above (PNG's "Up" filter, in numpy: a heatmap's
    cells repeat rows, so most bytes are 0) and deflated at zlib level 3. Pillow's encoder
    tries every filter on every row: about 3 times the time, for files of similar size."""
    import struct
    import zlib

    height, width, channels = pixels.shape
    flat = pixels.reshape(height, width * channels)
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = 2  # the Up filter
    rows[0, 1:] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=rows[1:, 1:])  # modulo 256, as PNG wants

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    colour_type = 2 if channels == 3 else 6
    per_metre = round(dpi / 0.0254)
    handle.write(b"\x89PNG\r\n\x1a\n")
    handle.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)))
    handle.write(chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)))
    handle.write(chunk(b"IDAT", zlib.compress(rows.data, 3)))
    handle.write(chunk(b"IEND", b""))


def figure_png(fig: Figure, *, dpi: int = 100) -> bytes:
    """`fig` as PNG bytes, for a notebook's rich display; the figure is closed afterwards."""
    buffer = io.BytesIO()
    try:
        with _quiet_fonts():
            fig.savefig(buffer, format="png", dpi=dpi, **_crop(fig))
    finally:
        _release(fig)
    return buffer.getvalue()

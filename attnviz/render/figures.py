"""Attention heatmaps as matplotlib figures: one matrix, one row as bars, a grid of heads.

They use the object-oriented API (`matplotlib.figure.Figure`) without pyplot, so no
display is touched, no figure is registered globally and no global style is changed:
colours and fonts are set on each artist (`attnviz.render.style`). Saving is
`attnviz.render.saving`.

Conventions: rows are queries (who attends, y axis), columns are keys (who is
attended to, x axis). Colour scales start at 0, since attention weights are
non-negative. Text is drawn literally (no mathtext), so tokens such as `$` or
`\\n` cannot break a drawing.

Masked cells (`masked`: keys the model could not see, a decoder's future) are drawn in
the theme's neutral grey (`THEME_COLOURS[theme]["masked"]`), not in any colour of the
scale, and `annotate` writes `–` in them.

Importing this module costs little more than `import matplotlib`: the Figure API (figure,
axes, artists, the Agg backend) is imported by the functions that build figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
from matplotlib.colors import Colormap, Normalize

from attnviz import lexicon
from attnviz.output import check_colormap
from attnviz.render.cells import as_mask
from attnviz.render.labels import (
    axis_name,
    check_labels,
    clean_label,
    fit_title,
    sizes_in,
    text_width_in,
    tick_step,
    wrap_title,
)
from attnviz.render.layout import (
    AXES,
    BAR_GAP_IN,
    COS_ROT,
    GRID_TICK_PT,
    KEY_ROTATION,
    MASKED_KEY_PT,
    MASKED_SWATCH_IN,
    MASKED_TEXT,
    PAD_IN,
    as_matrix,
    axis_label_in,
    bar_right_in,
    key_labels_in,
    masked_key_in,
    plan_grid,
    tick_in,
)
from attnviz.render.style import (
    DEFAULT_CMAP,
    THEME_COLOURS,
    check_theme,
    colour_max,
    colour_norm,
    contrast_text,
    font_family,
    font_properties,
    quiet_fonts,
    style_axes,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.cm import ScalarMappable
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

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
_ANNOTATE_MAX_TOKENS = 20


def _annotate(
    ax: Axes,
    values: np.ndarray,
    cmap: Colormap,
    norm: Normalize,
    size_pt: float,
    x0: float = 0,
    masked: np.ndarray | None = None,
    masked_colour: str = "#d9d9d9",
) -> None:
    """Each cell's value on the cell, in black or white (`–` on a masked cell); the matrix
    starts at x = x0."""
    from matplotlib.colors import to_rgba

    family = font_family()
    on_masked = contrast_text(to_rgba(masked_colour))
    for (row, col), value in np.ndenumerate(values):
        hidden = masked is not None and bool(masked[row, col])
        if not hidden and not math.isfinite(value):
            continue
        ax.text(
            x0 + col,
            row,
            MASKED_TEXT if hidden else f"{value:.2f}",
            ha="center",
            va="center",
            fontsize=size_pt,
            color=on_masked if hidden else contrast_text(cmap(norm(value))),
            parse_math=False,
            family=family,
        )


def _masked_key(fig: Figure, grey: str, fg: str, lang: str) -> None:
    """A grey square and `masked` in the figure's bottom right corner: what grey cells mean."""
    from matplotlib.patches import Rectangle

    fig_w, fig_h = fig.get_size_inches()
    text = lexicon.label(lang, "masked_short")
    swatch, right, bottom = masked_key_in(text, fig_w)
    side = MASKED_SWATCH_IN
    fig.patches.append(
        Rectangle(
            (swatch / fig_w, bottom / fig_h),
            side / fig_w,
            side / fig_h,
            transform=fig.transFigure,
            facecolor=grey,
            edgecolor=fg,
            linewidth=0.5,
        )
    )
    fig.text(
        right / fig_w,
        bottom / fig_h,
        text,
        ha="right",
        va="bottom",
        fontsize=MASKED_KEY_PT,
        color=fg,
        parse_math=False,
        family=font_family(),
    )


def _colorbar(
    fig: Figure,
    image: ScalarMappable,
    rect: tuple[float, float, float, float],
    fg: str,
    lang: str = "en",
    name: str = "attention_weight",
) -> None:
    """A colour bar for `image` in `rect` (figure fractions), labelled on its right with the
    lexicon's `name`."""
    cax = fig.add_axes(rect, label="<colorbar>")
    bar = fig.colorbar(image, cax=cax)
    bar.set_label(lexicon.label(lang, name), color=fg)
    bar.ax.tick_params(colors=fg, which="both")
    bar.outline.set_edgecolor(fg)


def _set_ticks(ax: Axes, axis: str, labels: Sequence[str], step: int, size_pt: float) -> None:
    """A tick at every `step`-th token, with its label."""
    positions = list(range(0, len(labels), step))
    texts = [labels[i] for i in positions]
    if axis == "x":
        _key_ticks(ax, positions, texts, size_pt)
    else:
        ax.set_yticks(
            positions, labels=texts, fontsize=size_pt, parse_math=False, family=font_family()
        )


def _key_ticks(ax: Axes, positions: Sequence[float], texts: Sequence[str], size_pt: float) -> None:
    """The keys' ticks under `ax`: labels rotated, each anchored at its tick's right end."""
    ax.set_xticks(positions, labels=texts, rotation=KEY_ROTATION, ha="right",
                  rotation_mode="anchor", fontsize=size_pt, parse_math=False,
                  family=font_family())  # fmt: skip


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
    lang: str = "en",
    masked: np.ndarray | None = None,
    bar_name: str = "attention_weight",
    scale: str = "linear",
) -> Figure:
    """One attention matrix [Tq, Tk]: queries on the y axis, keys on the x axis.

    `masked` (Tq, Tk) bool marks the cells the model could not see: drawn in the theme's
    neutral grey, `–` under `annotate`.

    `axis_names` names the y and x axes (a layers × heads grid: ("layer", "head")), as
    keys of `attnviz.lexicon`; `lang` ("en" or "pt") is the language of every label.

    The colour scale runs from 0 to `vmax` (default: the matrix maximum). Cell
    values are written only when `annotate` and both sides have at most 20 tokens.
    Beyond 60 tokens an axis labels every k-th token only (at most 40 labels). A long
    title wraps (at most 3 lines) instead of widening the image.
    """
    check_colormap(cmap)
    check_theme(theme)
    values = as_matrix(matrix, 2, "heatmap")
    mask = as_mask(masked, values.shape)
    n_q, n_k = values.shape
    rows = [clean_label(label) for label in row_labels]
    cols = rows if col_labels is None else [clean_label(label) for label in col_labels]
    check_labels(rows, n_q, "query labels")
    check_labels(cols, n_k, "key labels")
    top = colour_max(values, vmax)
    colours = THEME_COLOURS[theme]
    fg = colours["text"]

    write_values = annotate and max(n_q, n_k) <= _ANNOTATE_MAX_TOKENS
    cell = _ANNOTATED_CELL_IN if write_values else _CELL_IN
    width, height = cell * n_k, cell * n_q
    grow = max(1.0, _MIN_SIDE_IN / max(width, height))
    ax_w = min(max(width * grow, 1.2), _MAX_SIDE_IN)
    ax_h = min(max(height * grow, 1.2), _MAX_SIDE_IN)
    x_step = tick_step(n_k, MAX_DENSE_TOKENS if n_k <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    y_step = tick_step(n_q, MAX_DENSE_TOKENS if n_q <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    x_pt = _TICK_PT if x_step == 1 else _SPARSE_TICK_PT
    y_pt = _TICK_PT if y_step == 1 else _SPARSE_TICK_PT
    shown_cols = [cols[i] for i in range(0, n_k, x_step)]
    shown_rows = [rows[i] for i in range(0, n_q, y_step)]
    title_pt = 12.0 if max(ax_w, ax_h) < 8 else 14.0

    with quiet_fonts():
        family = font_family()
        # Margins (inches) from the measured labels: query labels and name on the left (or
        # the first key label, leaning left), key labels and name below, the colour bar
        # right, the title above.
        col_widths, col_line = sizes_in(shown_cols, font_properties(x_pt, family))
        row_widths, _ = sizes_in(shown_rows, font_properties(y_pt, family))
        leaning = col_widths[0] * COS_ROT - ax_w / (2 * n_k)
        left = PAD_IN + max(axis_label_in() + max(row_widths) + tick_in("y"), leaning)
        bottom = PAD_IN + axis_label_in() + key_labels_in(col_widths, col_line) + tick_in("x")
        bar_w = min(ax_h / 15, 0.25)
        right = BAR_GAP_IN + bar_w + bar_right_in(top, ax_h) + PAD_IN
        title_font = font_properties(title_pt, family)
        # The title is centred on the heatmap and may use the margins on both sides.
        title_text, title_h = fit_title(title, ax_w + 2 * min(left, right) - 2 * PAD_IN, title_font)
        above = PAD_IN + title_h + matplotlib.rcParams["axes.titlepad"] / 72
        fig_w, fig_h = left + ax_w + right, bottom + ax_h + above

        from attnviz.render.inline import InlineFigure

        fig = InlineFigure(figsize=(fig_w, fig_h), facecolor=colours["face"])
        ax = fig.add_axes((left / fig_w, bottom / fig_h, ax_w / fig_w, ax_h / fig_h))
        ax.set_facecolor(colours["face"])
        colormap = matplotlib.colormaps[cmap]
        norm = colour_norm(top, scale)
        shown = values if mask is None else np.ma.masked_array(values, mask)
        image = _show(ax, shown, colormap.with_extremes(bad=colours["masked"]), norm)
        _set_ticks(ax, "x", cols, x_step, x_pt)
        _set_ticks(ax, "y", rows, y_step, y_pt)
        ax.set_xlabel(axis_name(axis_names[1], x_step, lang), color=fg)
        ax.set_ylabel(axis_name(axis_names[0], y_step, lang), color=fg)
        ax.set_title(title_text, color=fg, fontproperties=title_font, parse_math=False)
        style_axes(ax, fg)
        bar_x = (left + ax_w + BAR_GAP_IN) / fig_w
        bar_rect = (bar_x, bottom / fig_h, bar_w / fig_w, ax_h / fig_h)
        _colorbar(fig, image, bar_rect, fg, lang, bar_name)
        if write_values:
            _annotate(ax, values, colormap, norm, 8.0, masked=mask, masked_colour=colours["masked"])
        if mask is not None and mask.any():
            _masked_key(fig, colours["masked"], fg, lang)
    return fig


def bars_figure(
    labels: Sequence[str],
    values: Sequence[float] | np.ndarray,
    *,
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
    lang: str = "en",
) -> Figure:
    """Horizontal bars, one per label, top to bottom in the order given (one query's row).

    Bars take their colour from `cmap` by value (0 .. the largest); `annotate` writes
    each value beside its bar. Beyond 60 bars only every k-th label is written.
    """
    check_colormap(cmap)
    check_theme(theme)
    values = as_matrix(np.asarray(values, dtype=float), 1, "bars")
    names = [clean_label(label) for label in labels]
    check_labels(names, len(values), "labels")
    colours = THEME_COLOURS[theme]
    fg = colours["text"]
    n = len(values)
    step = tick_step(n, MAX_DENSE_TOKENS if n <= MAX_DENSE_TOKENS else _MAX_SPARSE_TICKS)
    size_pt = _TICK_PT if step == 1 else _SPARSE_TICK_PT
    left = text_width_in([names[i] for i in range(0, n, step)], size_pt) + 0.6
    height = min(max(0.22 * n, 1.6), _MAX_SIDE_IN) + 1.0
    top = colour_max(values, None)

    from attnviz.render.inline import InlineFigure

    with quiet_fonts():
        fig = InlineFigure(
            figsize=(left + 5.0, height), layout="constrained", facecolor=colours["face"]
        )
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
        ax.set_xlabel(lexicon.label(lang, "attention_weight"), color=fg)
        ax.set_title(
            wrap_title(title, left + 4.0, 12.0),
            color=fg,
            fontsize=12.0,
            parse_math=False,
            family=font_family(),
        )
        style_axes(ax, fg)
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


def _strip(colours: np.ndarray, subcells: int, gap_cells: float) -> np.ndarray:
    """Panels of RGBA colours (k, Tq, Tk, 4) side by side as one image (Tq, width, 4), each
    cell `subcells` pixels wide, with transparent gaps of `gap_cells` cells between."""
    k, n, m = colours.shape[:3]
    gap = round(gap_cells * subcells)
    wide = np.repeat(colours, subcells, axis=2)  # (k, Tq, Tk*sub, 4)
    padded = np.zeros((k, n, m * subcells + gap, 4), dtype=colours.dtype)
    padded[:, :, : m * subcells] = wide
    return padded.transpose(1, 0, 2, 3).reshape(n, -1, 4)[:, : k * (m * subcells + gap) - gap]


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
    lang: str = "en",
    masked: np.ndarray | None = None,
    key_labels: Sequence[str] | None = None,
    axes: tuple[str, str, str] = AXES,
    scale: str = "linear",
) -> Figure:
    """Every head of a layer, [H, T, T], as a grid of panels with one shared colour scale.

    A rectangle, [H, Tq, Tk] (queries and keys from different inputs), names its columns
    in `key_labels`; its panels stay square.

    `masked` (H, T, T) bool marks the cells the model could not see (the theme's grey).

    `columns` panels per row (e.g. one row per layer); by default a near-square grid.

    The scale runs from 0 to the maximum over all heads and has one colour bar.
    Tokens are labelled on the outer panels only (left column, bottom of each
    column); inner panels carry no ticks. Cell values are written only when `annotate`
    and T <= 8. Panels shrink (down to 0.6 in) so that neither side of the figure
    passes MAX_FIGURE_IN.

    Each row of panels is one Axes holding one image: the panels' colours side by side
    with gaps between them, a frame and a title over each panel. Drawing a 72-panel
    model view this way takes a fraction of the time of 72 Axes with an image each.
    A PNG of the same grid is drawn faster still, straight to pixels, by
    `attnviz.render.saving.save_grid`.
    """
    plan = plan_grid(
        matrices,
        labels,
        panel_titles=panel_titles,
        title=title,
        cmap=cmap,
        theme=theme,
        annotate=annotate,
        columns=columns,
        lang=lang,
        masked=masked,
        key_labels=key_labels,
        axes=axes,
        scale=scale,
    )
    from matplotlib import transforms
    from matplotlib.cm import ScalarMappable
    from matplotlib.patches import Rectangle

    from attnviz.render.inline import InlineFigure

    values, tokens, titles, top, g = plan.values, plan.tokens, plan.titles, plan.top, plan.g
    heads, n_q, n_k = values.shape
    n_rows, n_cols, fig_w, fig_h = plan.n_rows, plan.n_cols, plan.fig_w, plan.fig_h
    write_values = plan.write_values
    colours = THEME_COLOURS[theme]
    fg = colours["text"]
    family = font_family()
    grid_h = plan.grid_h

    with quiet_fonts():
        fig = InlineFigure(figsize=(fig_w, fig_h), facecolor=colours["face"])
        colormap = matplotlib.colormaps[cmap]
        norm = colour_norm(top, plan.scale)
        rgba = plan.colours(colormap, norm)  # (H, T, T, 4): the colours, then enlarged
        n, pitch = n_k, n_k + g.gap_cells  # panel c of a row starts at x = c * pitch
        positions = list(range(0, n_q, g.step))  # the queries labelled
        shown = [tokens[i] for i in positions]
        key_positions = list(range(0, n_k, g.keys_step))  # the keys labelled
        key_shown = [plan.columns[i] for i in key_positions]
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
                extent=(-0.5, k * pitch - g.gap_cells - 0.5, n_q - 0.5, -0.5),
                aspect="auto",
                interpolation="nearest",
            )
            for spine in ax.spines.values():
                spine.set_visible(False)
            # Keys under a panel with no panel below it; queries left of the row.
            under = [c for c, head in enumerate(members) if head + n_cols >= heads]
            keys = [c * pitch + i for c in under for i in key_positions]
            _key_ticks(ax, keys, key_shown * len(under), GRID_TICK_PT)
            ax.set_yticks(
                positions, labels=shown, fontsize=GRID_TICK_PT, parse_math=False, family=family
            )
            ax.tick_params(colors=fg, which="both")
            over_panel = transforms.blended_transform_factory(ax.transData, ax.transAxes)
            for c, head in enumerate(members):
                x0 = c * pitch
                ax.add_patch(
                    Rectangle(
                        (x0 - 0.5, -0.5),
                        n,
                        n_q,
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
                    hidden = None if plan.masked is None else plan.masked[head]
                    _annotate(
                        ax,
                        values[head],
                        colormap,
                        norm,
                        6.0,
                        x0=x0,
                        masked=hidden,
                        masked_colour=colours["masked"],
                    )
        middle_x = (g.left + (fig_w - g.left - g.right) / 2) / fig_w
        middle_y = (g.bottom + grid_h / 2) / fig_h
        fig.supxlabel(
            axis_name(axes[1], g.keys_step, lang),
            color=fg,
            fontsize=10,
            x=middle_x,
            y=PAD_IN / fig_h,
        )
        fig.supylabel(
            axis_name(axes[0], g.step, lang),
            color=fg,
            fontsize=10,
            x=PAD_IN / fig_w,
            y=middle_y,
        )
        fig.suptitle(
            g.title,
            color=fg,
            fontsize=13,
            parse_math=False,
            family=family,
            y=1 - PAD_IN / fig_h,
        )
        bar_x, bar_y, bar_w, bar_h = plan.bar
        mappable = ScalarMappable(norm=norm, cmap=colormap)
        bar_rect = (bar_x / fig_w, bar_y / fig_h, bar_w / fig_w, bar_h / fig_h)
        _colorbar(fig, mappable, bar_rect, fg, lang, axes[2])
        if plan.masked is not None and plan.masked.any():
            _masked_key(fig, colours["masked"], fg, lang)
    return fig

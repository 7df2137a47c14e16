"""Head statistics as one matplotlib figure: a layers × heads heatmap per statistic.

Seven panels (entropy, then the attention shares to [CLS], [SEP], punctuation, the
token itself, the previous and the next token), each with its colour bar; a decoder's
five (entropy, the first token, punctuation, itself, the previous token). By default
the six share panels share one scale, 0 to the largest share of any panel, so a
[SEP] maximum of 0.11 looks weak beside a previous-token 0.95; entropy (in nats, not
a share) keeps its own. `shared_scale=False` gives each panel its own 0 .. maximum.
Layer 0 is the top row, head 0 the left column. Built like `attnviz.render.figures`:
the Figure API without pyplot, colours from `attnviz.render.style`'s themes, and saved
with `attnviz.render.saving.save_figure`. matplotlib is imported inside the function, so
importing this module stays cheap. A record is a plain mapping (`attnviz.HeadRecord`):
layer, head, label and the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz import lexicon

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PANEL_TITLES", "held_statistics", "stats_figure", "stats_grids"]

PANEL_TITLES: dict[str, str] = {
    "entropy": "entropy (nats)",
    "cls": "to [CLS]",
    "sep": "to [SEP]",
    "first": "to the first token",
    "punct": "to punctuation",
    "self": "to itself",
    "prev": "to previous token",
    "next": "to next token",
}
_PANEL_COLS = 4  # 7 panels: 4 on the first row, 3 on the second
_CELL_IN = 0.24
_MIN_PANEL_IN = 1.8
_MAX_PANEL_IN = 4.5
_MAX_TICKS = 12  # beyond this, every k-th layer or head is numbered


def held_statistics(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The statistics the records hold, in the order of PANEL_TITLES (entropy first)."""
    return tuple(name for name in PANEL_TITLES if records and name in records[0])


def stats_grids(
    records: Sequence[Mapping[str, Any]],
    layers: int,
    heads: int,
    statistics: Sequence[str] | None = None,
) -> np.ndarray:
    """The records as arrays: float (S, layers, heads), one per statistic in `statistics`
    (default: those the records hold, see `held_statistics`); NaN where none."""
    statistics = held_statistics(records) if statistics is None else statistics
    grids = np.full((len(statistics), layers, heads), np.nan)  # (S, L, H)
    for record in records:
        layer, head = record["layer"], record["head"]
        if not (0 <= layer < layers and 0 <= head < heads):
            raise ValueError(f"record for layer {layer}, head {head} outside {layers}×{heads}")
        for s, name in enumerate(statistics):
            grids[s, layer, head] = record[name]
    return grids


def _ticks(count: int) -> list[int]:
    step = 1 if count <= _MAX_TICKS else math.ceil(count / _MAX_TICKS)
    return list(range(0, count, step))


def stats_figure(
    records: Sequence[Mapping[str, Any]],
    layers: int,
    heads: int,
    *,
    title: str,
    statistics: Sequence[str] | None = None,
    cmap: str = "viridis",
    theme: str = "light",
    shared_scale: bool = True,
    lang: str = "en",
) -> Figure:
    """One layers × heads heatmap per statistic in `statistics` (entropy first; default:
    those the records hold), the shares on one scale unless not `shared_scale`."""
    import matplotlib
    from matplotlib.colors import Normalize

    from attnviz.output import check_colormap
    from attnviz.render.cells import visible
    from attnviz.render.inline import InlineFigure
    from attnviz.render.style import (
        THEME_COLOURS,
        check_theme,
        colour_max,
        font_family,
        quiet_fonts,
        style_axes,
    )

    check_colormap(cmap)
    check_theme(theme)
    if layers < 1 or heads < 1:
        raise ValueError(f"need at least one layer and one head, got {layers}, {heads}")
    statistics = held_statistics(records) if statistics is None else tuple(statistics)
    grids = stats_grids(records, layers, heads, statistics)  # (S, L, H)
    shares_max = colour_max(grids[1:], None)  # grids[0] is entropy
    colours = THEME_COLOURS[theme]
    fg = colours["text"]
    panel_w = min(max(_CELL_IN * heads, _MIN_PANEL_IN), _MAX_PANEL_IN)
    panel_h = min(max(_CELL_IN * layers, _MIN_PANEL_IN), _MAX_PANEL_IN)
    n_rows = math.ceil(len(statistics) / _PANEL_COLS)
    fig_w = _PANEL_COLS * (panel_w + 1.3) + 0.4
    fig_h = n_rows * (panel_h + 0.9) + 0.6

    with quiet_fonts():
        fig = InlineFigure(figsize=(fig_w, fig_h), layout="constrained", facecolor=colours["face"])
        spec = fig.add_gridspec(n_rows, _PANEL_COLS)
        colormap = matplotlib.colormaps[cmap].with_extremes(bad=colours["face"])
        for s, name in enumerate(statistics):
            row, col = divmod(s, _PANEL_COLS)
            ax = fig.add_subplot(spec[row, col])
            ax.set_facecolor(colours["face"])
            values = grids[s]  # (L, H)
            shared = shared_scale and name != "entropy"
            norm = Normalize(vmin=0.0, vmax=shares_max if shared else colour_max(values, None))
            image = ax.imshow(
                values, cmap=colormap, norm=norm, aspect="auto", interpolation="nearest"
            )
            ax.set_xticks(_ticks(heads))
            ax.set_yticks(_ticks(layers))
            ax.set_xlabel(lexicon.label(lang, "head"), color=fg)
            ax.set_ylabel(lexicon.label(lang, "layer"), color=fg)
            ax.set_title(lexicon.label(lang, f"panel_{name}"), color=fg, fontsize=10)
            style_axes(ax, fg)
            bar = fig.colorbar(image, ax=ax, pad=0.02, fraction=0.08)
            bar.ax.tick_params(colors=fg, which="both", labelsize=8)
            bar.outline.set_edgecolor(fg)
        fig.suptitle(visible(title), color=fg, fontsize=13, parse_math=False, family=font_family())
    return fig

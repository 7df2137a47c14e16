"""Head ablation and patching drawn: a terminal table of the heads and a layers × heads heatmap.

Plain values in (the effects (layers, heads), the layers' numbers, the ranked rows, a title and
the lines above the table), a rich renderable or a matplotlib Figure out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnviz.render.cells import clean_labels, visible

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Group

__all__ = ["ablation_figure", "ablation_table"]


def ablation_table(
    rows: Sequence[tuple[int, int, float, float]],
    *,
    title: str,
    lines: Sequence[str],
    effect: str,
    total: int,
) -> Group:
    """The title, `lines` (what was measured), then one row per head (layer, head, logit
    difference, effect) in the order given; a last line says how many heads are not shown."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False, pad_edge=False)
    for name in ("layer", "head", "logit diff", effect):
        table.add_column(name, justify="right")
    for layer, head, diff, value in rows:
        style = "bold" if value == rows[0][3] else ""
        table.add_row(str(layer), str(head), f"{diff:+.3f}", Text(f"{value:+.3f}", style=style))
    parts: list[Text | Table] = [Text(clean_labels([title])[0], style="bold")]
    parts += [Text(clean_labels([line])[0]) for line in lines]
    parts.append(table)
    if total > len(rows):
        parts.append(Text(f"({total - len(rows)} more heads: --json or --out for all)", "dim"))
    return Group(*parts)


def ablation_figure(
    effects: np.ndarray,
    layers: Sequence[int],
    *,
    title: str,
    label: str,
    caption: str,
    cmap: str = "RdBu_r",
    theme: str = "light",
    annotate: bool = False,
) -> Figure:
    """A layers × heads heatmap of `effects` (len(layers), H), its colour scale symmetric
    around 0 (`label` names it), `caption` under it; `annotate` writes each cell's value."""
    from attnviz.output import check_colormap
    from attnviz.render.inline import InlineFigure
    from attnviz.render.style import THEME_COLOURS, check_theme, contrast_text, quiet_fonts

    check_colormap(cmap)
    check_theme(theme)
    L, H = effects.shape
    colours = THEME_COLOURS[theme]
    fg = colours["text"]
    finite = effects[np.isfinite(effects)]
    top = float(np.abs(finite).max()) if finite.size else 1.0
    top = top if top > 0 else 1.0
    with quiet_fonts():
        fig = InlineFigure(
            figsize=(min(3.5 + 0.45 * H, 40), min(2.5 + 0.28 * L, 40)),
            facecolor=colours["face"],
            layout="constrained",
        )
        ax = fig.add_subplot()
        import matplotlib

        colormap = matplotlib.colormaps[cmap]
        image = ax.imshow(effects, cmap=colormap, vmin=-top, vmax=top, aspect="auto",
                          origin="lower", interpolation="nearest")  # fmt: skip
        if annotate:
            for i in range(L):
                for h in range(H):
                    value = float(effects[i, h])
                    ax.text(h, i, f"{value:.2f}", ha="center", va="center", fontsize=6,
                            color=contrast_text(colormap((value + top) / (2 * top))))  # fmt: skip
        ax.set_xticks(range(H), [str(h) for h in range(H)], fontsize=7)
        ax.set_yticks(range(L), [str(layer) for layer in layers], fontsize=7)
        ax.set_xlabel("head\n" + visible(caption), color=fg, fontsize=8, parse_math=False)
        ax.set_ylabel("layer", color=fg)
        ax.set_title(visible(title), color=fg, parse_math=False, fontsize=9)
        ax.tick_params(colors=fg)
        bar = fig.colorbar(image, ax=ax, fraction=0.04)
        bar.set_label(label, color=fg)
        bar.ax.tick_params(colors=fg)
    return fig

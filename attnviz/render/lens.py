"""The logit lens drawn: a terminal table and a figure (layers × positions).

Plain values in (the guesses, their probabilities, the tokens read), a rich renderable
or a matplotlib Figure out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnviz.render.cells import clean_labels, visible

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Group

__all__ = ["lens_figure", "lens_table", "shown_layers"]

_GUESS_CELLS = 10  # a guess's column width in the terminal


def shown_layers(num_layers: int, columns: int) -> list[int]:
    """At most `columns` layers, evenly spread, the first and the last always among them."""
    if num_layers <= columns:
        return list(range(num_layers))
    picked = np.linspace(0, num_layers - 1, max(columns, 2)).round().astype(int)
    return sorted(set(picked.tolist()))


def lens_table(
    guesses: Sequence[Sequence[str]],
    probabilities: np.ndarray,
    labels: Sequence[str],
    title: str,
    width: int = 100,
) -> Group:
    """One row per position (the token read), one column per layer: its top guess."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    L = len(guesses)
    layers = shown_layers(L, max(2, (width - 18) // (_GUESS_CELLS + 3)))
    note = "" if len(layers) == L else f" (layers {', '.join(map(str, layers))} of {L})"
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("token read", overflow="ellipsis", max_width=16, no_wrap=True)
    for layer in layers:
        table.add_column(f"L{layer}", overflow="ellipsis", max_width=_GUESS_CELLS, no_wrap=True)
    rows = clean_labels(list(labels))
    for i, label in enumerate(rows):
        cells = []
        for layer in layers:
            guess = clean_labels([guesses[layer][i]])[0]
            final = layer == L - 1
            strong = float(probabilities[layer, i]) >= 0.5
            cells.append(Text(guess, style="bold" if final else ("" if strong else "dim")))
        table.add_row(Text(str(i)), Text(label), *cells)  # Text: never read as markup
    return Group(Text(clean_labels([title + note])[0], style="bold"), table)


def lens_figure(
    guesses: Sequence[Sequence[str]],
    probabilities: np.ndarray,
    labels: Sequence[str],
    *,
    title: str,
    cmap: str = "viridis",
    theme: str = "light",
) -> Figure:
    """A layers × positions heatmap of the top guess's probability, each cell its guess."""
    from attnviz.output import check_colormap
    from attnviz.render.inline import InlineFigure
    from attnviz.render.style import THEME_COLOURS, check_theme, contrast_text, quiet_fonts

    check_colormap(cmap)
    check_theme(theme)
    L, T = probabilities.shape
    colours = THEME_COLOURS[theme]
    fg = colours["text"]
    cell_w, cell_h = 0.7, 0.3
    with quiet_fonts():
        fig = InlineFigure(
            figsize=(min(3.0 + cell_w * T, 60), min(2.5 + cell_h * L, 40)),
            facecolor=colours["face"],
            layout="constrained",
        )
        ax = fig.add_subplot()
        import matplotlib

        colormap = matplotlib.colormaps[cmap]
        image = ax.imshow(probabilities, cmap=colormap, vmin=0.0, vmax=1.0, aspect="auto",
                          origin="lower", interpolation="nearest")  # fmt: skip
        for layer in range(L):
            for i in range(T):
                p = float(probabilities[layer, i])
                ax.text(i, layer, clean_labels([guesses[layer][i]])[0][:8], ha="center",
                        va="center", fontsize=6, parse_math=False,
                        color=contrast_text(colormap(p)))  # fmt: skip
        ax.set_xticks(range(T), clean_labels(list(labels)), rotation=60, ha="right", fontsize=7,
                      parse_math=False)  # fmt: skip
        ax.set_yticks(range(L), [str(layer) for layer in range(L)], fontsize=7)
        ax.set_xlabel("token read (the guess is for the token after it)", color=fg)
        ax.set_ylabel("layer", color=fg)
        ax.set_title(visible(title), color=fg, parse_math=False)
        ax.tick_params(colors=fg)
        bar = fig.colorbar(image, ax=ax, fraction=0.03)
        bar.set_label("probability of the top guess", color=fg)
        bar.ax.tick_params(colors=fg)
    return fig

"""A head's role over labelled examples, drawn (`attnviz find --file`): a table and a heatmap.

The table lists the heads given (already ranked): layer, head, accuracy with a bar, its 95%
interval, how many examples it got right and the mean weight on the `to` word; the
baselines and the held-out accuracy sit in its caption. The figure is a layers × heads
heatmap of accuracy with the baselines under it. rich for the table; matplotlib, imported
inside, for the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.table import Table
from rich.text import Text

from attnviz import lexicon
from attnviz.render.bars import bar
from attnviz.render.cells import BAR_COLUMN, BarsWhenTheyFit, add_columns, result_table, visible

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.figure import Figure

__all__ = ["RolesTable", "roles_figure"]

_BAR_CELLS = 10
_BOLD = Style(bold=True)
_DIM = Style(dim=True)


class RolesTable(BarsWhenTheyFit):
    """The `rows` given (each a head's record: layer, head, accuracy, correct, total, low,
    high, mean_weight), best first, with the baselines in `caption` and `note` under it."""

    def __init__(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        title: str,
        caption: str,
        note: str = "",
        held_out: Mapping[str, Any] | None = None,
        lang: str = "en",
    ) -> None:
        self.rows = list(rows)
        self.title, self.caption, self.note = visible(title), visible(caption), visible(note)
        self.held_out = held_out
        self.lang = lang

    def _table(self, bars: bool = True) -> Table:
        table = result_table(
            self.title, f"{self.caption}\n{self.note}" if self.note else self.caption
        )
        held = self.held_out is not None and bool(self.held_out["halves"])
        bar_column = [BAR_COLUMN] if bars else []
        heads = ["col_layer", "col_head", "col_accuracy", *bar_column, "col_interval"]
        add_columns(table, self.lang, [*heads, "col_correct", "col_mean_weight"]
                    + (["col_held_out"] if held else []))  # fmt: skip
        for i, row in enumerate(self.rows):
            cells: list[str | Text] = [str(row["layer"]), str(row["head"])]
            cells.append(f"{row['accuracy']:.2f}")
            if bars:
                cells.append(bar(row["accuracy"], _BAR_CELLS))
            cells.append(f"{row['low']:.2f}–{row['high']:.2f}")
            cells.append(f"{row['correct']}/{row['total']}")
            cells.append(f"{row['mean_weight']:.2f}")
            if held:
                assert self.held_out is not None
                cells.append(f"{self.held_out['accuracy']:.2f}" if i == 0 else "")
            table.add_row(*cells)
        return table


def roles_figure(
    accuracy: np.ndarray,
    *,
    title: str,
    caption: str,
    cmap: str = "viridis",
    theme: str = "light",
    lang: str = "en",
) -> Figure:
    """A layers × heads heatmap of accuracy (0..1, each cell written), `caption` under it."""
    import textwrap

    from attnviz.render.figures import heatmap_figure
    from attnviz.render.style import THEME_COLOURS

    L, H = accuracy.shape
    figure = heatmap_figure(
        accuracy,
        [str(layer) for layer in range(L)],
        [str(head) for head in range(H)],
        title=title,
        cmap=cmap,
        theme=theme,
        annotate=True,
        vmax=1.0,
        axis_names=("layer", "head"),
        lang=lang,
    )
    width = max(40, int(figure.get_figwidth() * 12))  # characters a line holds, about
    text = "\n".join(textwrap.wrap(caption, width))
    lines = text.count("\n") + 1
    height = figure.get_figheight()
    extra = 0.2 * lines + 0.2  # inches for the caption
    figure.set_figheight(height + extra)
    for ax in figure.axes:  # the plot and its colour bar keep their inches, moved up
        x0, y0, w, h = ax.get_position().bounds
        ax.set_position((x0, (y0 * height + extra) / (height + extra), w,
                         h * height / (height + extra)))  # fmt: skip
    for ax in figure.axes:
        if ax.get_label() == "<colorbar>":  # the bar measures accuracy, not a weight
            ax.set_ylabel(lexicon.label(lang, "col_accuracy"), color=THEME_COLOURS[theme]["text"])
    figure.text(0.02, 0.01, text, fontsize=8, va="bottom", ha="left",
                color=THEME_COLOURS[theme]["text"])  # fmt: skip
    return figure

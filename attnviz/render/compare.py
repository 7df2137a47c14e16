"""A comparison of measures for one query: a terminal table and a figure of bar charts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from attnviz import lexicon
from attnviz.render.cells import visible

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.figure import Figure

__all__ = ["Compared", "ComparisonTable", "comparison_figure"]


class Compared(Protocol):
    """One query's row under several measures, as the table and the figure read it
    (`attnviz.measures.compare.Comparison`)."""

    @property
    def title(self) -> str: ...
    @property
    def labels(self) -> Sequence[str]: ...  # (N,) the keys
    @property
    def measures(self) -> Sequence[str]: ...  # (M,) their names
    @property
    def top(self) -> int: ...  # how many ranks to show
    @property
    def shares(self) -> np.ndarray: ...  # (M, N) each measure's row divided by its sum

    def ranking(self, measure: str) -> list[int]: ...  # keys from the largest, by `measure`
    def disagreements(self, lang: str = ...) -> list[str]: ...  # where the measures differ
    @property
    def lang(self) -> str: ...  # the language of the headers and names: "en" or "pt"


class ComparisonTable:
    """Rank by rank, the key each measure puts there and its share of the row."""

    def __init__(self, comparison: Compared) -> None:
        self.c = comparison

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        c = self.c
        title = Text(visible(c.title, newlines=True), "table.title")  # Text: never markup
        table = Table(title=title, title_justify="left", box=None, pad_edge=False)
        table.add_column(lexicon.label(c.lang, "col_rank"), justify="right")
        for measure in c.measures:
            table.add_column(Text(visible(measure)), overflow="fold")
        shares = c.shares
        orders = [c.ranking(m) for m in c.measures]
        for rank in range(min(c.top, len(c.labels))):
            cells = []
            for m, order in enumerate(orders):
                j = order[rank]
                cells.append(Text(f"{visible(c.labels[j])} {shares[m, j]:.2f}"))
            table.add_row(str(rank + 1), *cells)
        notes = [Text(visible(line), style="dim") for line in c.disagreements(c.lang)]
        shares_note = Text(lexicon.label(c.lang, "compare_shares_note"))
        yield Group(table, shares_note, *notes)


def comparison_figure(comparison: Compared, *, theme: str = "light") -> Figure:
    """One horizontal bar chart per measure, the top keys largest first, on one share axis."""
    from attnviz.render.inline import InlineFigure
    from attnviz.render.style import THEME_COLOURS, check_theme

    check_theme(theme)
    c = comparison
    colours = THEME_COLOURS[theme]
    count = min(c.top, len(c.labels))
    figure = InlineFigure(figsize=(2.6 * len(c.measures) + 0.6, 0.35 * count + 1.4))
    figure.set_facecolor(colours["face"])
    axes = figure.subplots(1, len(c.measures), sharex=True, squeeze=False)[0]
    shares = c.shares
    for ax, (m, measure) in zip(axes, enumerate(c.measures), strict=True):
        order = c.ranking(measure)[:count]
        ax.barh(range(count), [shares[m, j] for j in order], color="#0072B2")
        names = [visible(c.labels[j]) for j in order]
        ax.set_yticks(range(count), names, color=colours["text"], parse_math=False)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_title(visible(measure), color=colours["text"], fontsize=10, parse_math=False)
        ax.set_facecolor(colours["face"])
        ax.tick_params(colors=colours["text"], labelsize=8)
        for spine in ax.spines.values():
            spine.set_color(colours["text"])
    figure.suptitle(visible(c.title), color=colours["text"], fontsize=10, parse_math=False)
    figure.supxlabel(lexicon.label(c.lang, "compare_share"), color=colours["text"], fontsize=9)
    figure.set_layout_engine("constrained")
    return figure

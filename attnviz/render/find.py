"""The heads that link two words, as a table in the terminal (`attnviz find`).

One row per head, strongest first: layer, head, the weight from the query to the
target with a bar, the target's rank among the query's keys, the query's top key
when it is another word, and how many other words attend to the target more.
No torch, no matplotlib.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.style import Style
from rich.table import Table
from rich.text import Text

from attnviz import lexicon
from attnviz.render.bars import bar
from attnviz.render.cells import result_table, truncate, visible

__all__ = ["Link", "LinkTable"]

_BAR_CELLS = 10
_TOP_KEY_CELLS = 16
_BOLD = Style(bold=True)
_DIM = Style(dim=True)


class Link(Protocol):
    """One head's link from the query word to the target word, as the table reads it
    (`attnviz.measures.find.HeadLink`)."""

    @property
    def layer(self) -> int: ...
    @property
    def head(self) -> int: ...
    @property
    def weight(self) -> float: ...  # the query's weight on the target
    @property
    def rank(self) -> int: ...  # the target's place among the query's keys: 1 is its largest
    @property
    def top_key(self) -> str: ...  # the query's largest key
    @property
    def top_weight(self) -> float: ...  # its weight
    @property
    def others_above(self) -> int: ...  # other words weighing the target more
    @property
    def sink(self) -> float: ...  # share of queries putting over half their weight on the target


class LinkTable:
    """The `links` given (already ranked) from `source` to `target`, as a table."""

    def __init__(
        self,
        links: Sequence[Link],
        source: str,
        target: str,
        title: str | None = None,
        note: str = "",
        lang: str = "en",
    ) -> None:
        self.links = list(links)
        self.source, self.target = visible(source), visible(target)
        self.title = title
        self.note = visible(note)
        self.lang = lang  # the language of its headers and caption: "en" or "pt"

    def _table(self, bars: bool = True) -> Table:
        table = result_table(
            self.title,
            lexicon.label(self.lang, "find_caption", source=self.source, target=self.target)
            + (f"\n{self.note}" if self.note else "")
            + "\n"
            + lexicon.label(self.lang, "find_one_sentence"),
        )
        name = functools.partial(lexicon.label, self.lang)
        table.add_column(name("col_layer"), justify="right", no_wrap=True)
        table.add_column(name("col_head"), justify="right", no_wrap=True)
        table.add_column(name("col_weight"), justify="right", no_wrap=True)
        if bars:
            table.add_column("", no_wrap=True)
        table.add_column(name("col_rank"), justify="right", no_wrap=True)
        table.add_column(name("col_top_key"), no_wrap=True)
        table.add_column(name("col_others"), justify="right", no_wrap=True)
        table.add_column(name("col_sink"), justify="right", no_wrap=True)
        largest = max((link.weight for link in self.links), default=0.0) or 1.0
        for link in self.links:
            cells: list[str | Text] = [str(link.layer), str(link.head), f"{link.weight:.2f}"]
            if bars:
                cells.append(bar(link.weight / largest, _BAR_CELLS))
            cells.append(str(link.rank))
            top = (
                name("the_target")
                if link.rank == 1
                else f"{truncate(visible(link.top_key), _TOP_KEY_CELLS)} {link.top_weight:.2f}"
            )
            cells.append(Text(top, style=_DIM if link.rank == 1 else ""))
            cells.append(str(link.others_above))
            cells.append(f"{link.sink:.0%}")
            table.add_row(*cells)
        return table

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._table())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self._table()
        natural = Measurement.get(console, options.update_width(10_000), table).maximum
        yield table if natural <= options.max_width else self._table(bars=False)

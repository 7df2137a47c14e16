"""The heads that link two words, as a table in the terminal (`attnviz find`).

One row per head, strongest first: layer, head, the weight from the query to the
target with a bar, the target's rank among the query's keys, the query's top key
when it is another word, and how many other words attend to the target more.
No torch, no matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rich.style import Style
from rich.table import Table
from rich.text import Text

from attnviz import lexicon
from attnviz.render.bars import bar
from attnviz.render.cells import (
    BAR_COLUMN,
    BarsWhenTheyFit,
    add_columns,
    result_table,
    truncate,
    visible,
)

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


class LinkTable(BarsWhenTheyFit):
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
        bar_column = [BAR_COLUMN] if bars else []
        heads = ["col_layer", "col_head", "col_weight", *bar_column, "col_rank"]
        add_columns(table, self.lang, [*heads, "col_top_key", "col_others", "col_sink"],
                    left="col_top_key")  # fmt: skip
        largest = max((link.weight for link in self.links), default=0.0) or 1.0
        for link in self.links:
            cells: list[str | Text] = [str(link.layer), str(link.head), f"{link.weight:.2f}"]
            if bars:
                cells.append(bar(link.weight / largest, _BAR_CELLS))
            cells.append(str(link.rank))
            top = (
                lexicon.label(self.lang, "the_target")
                if link.rank == 1
                else f"{truncate(visible(link.top_key), _TOP_KEY_CELLS)} {link.top_weight:.2f}"
            )
            cells.append(Text(top, style=_DIM if link.rank == 1 else ""))
            cells.append(str(link.others_above))
            cells.append(f"{link.sink:.0%}")
            table.add_row(*cells)
        return table

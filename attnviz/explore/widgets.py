"""The explorer's panes: the heatmap with its cursor row, the query's keys, and the
screens over them (help, a result's panel, a new text)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.events import Click, Paste
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from attnviz.explore.keys import KEYS, say
from attnviz.limits import EXPLORE_TEXT_CHARS
from attnviz.measures.query import QueryRow
from attnviz.measures.views import AttentionView
from attnviz.render.bars import BarList
from attnviz.render.cells import visible
from attnviz.render.terminal import Heatmap

__all__ = [
    "HeatmapPane",
    "HelpScreen",
    "PanelScreen",
    "RowPane",
    "Shaded",
    "TextLine",
    "TextScreen",
    "typed",
]


class HeatmapPane(Static):
    """One view's heatmap, as `show` draws it, the query's row label in reverse."""

    class Picked(Message):
        """A click on row `query` (and on column `key`, None on the row's label)."""

        def __init__(self, query: int, key: int | None) -> None:
            super().__init__()
            self.query = query
            self.key = key

    def __init__(self, *, colour: bool = True, **options: Any) -> None:
        super().__init__(**options)
        self.heatmap: Heatmap | None = None
        self.colour = colour  # False: the shades ` ░▒▓█` carry the values, as `show` without

    def draw(self, view: AttentionView, query: int) -> None:
        self.heatmap = Heatmap(
            view.matrix,
            view.labels,
            view.key_labels,
            lang=view.lang,
            masked=view.masked,
            highlight=query,
        )
        self.update(self.heatmap if self.colour else Shaded(self.heatmap))

    def row_line(self, query: int) -> int | None:
        """The line `query`'s row is drawn on (in the first page of keys); None when the
        heatmap is not drawn, or its keys are listed under it (a rectangle)."""
        lines = self.lines()
        if lines is None:
            return None
        return next((y for y, line in enumerate(lines) if self.row_of(line) == query), None)

    def lines(self) -> list[list[Segment]] | None:
        """The heatmap's lines at this pane's width; None when there is none, or when a key
        list follows its rows (a rectangle: its lines are not only rows)."""
        heatmap = self.heatmap
        if heatmap is None or heatmap.keys_differ or self.size.width <= 0:
            return None
        console = Console(width=self.size.width, color_system=None, file=io.StringIO())
        return console.render_lines(heatmap, console.options, pad=False)

    def row_of(self, line: list[Segment]) -> int | None:
        """The row a line draws (its first segment is the row's number and label), or None."""
        if self.heatmap is None or len(line) < 2:
            return None
        rows = self.heatmap.values.shape[0]
        number = line[0].text[: len(str(rows - 1))].strip()
        return int(number) if number.isdigit() and line[0].text.strip() else None

    def on_click(self, event: Click) -> None:
        """A click on a row picks it as the query; on a cell, its key too."""
        lines = self.lines()
        if lines is None or self.heatmap is None or not 0 <= event.y < len(lines):
            return
        line = lines[event.y]
        row = self.row_of(line)
        if row is None:
            return
        n_cols = self.heatmap.values.shape[1]
        page = sum(1 for above in lines[: event.y] if not above) - 1  # a blank line opens one
        left = cell_len(line[0].text)  # the row's number and label
        drawn = sum(cell_len(s.text) for s in line) - left
        pages = sum(1 for each in lines if not each)
        cell_w = 1 if pages > 1 else max(1, drawn // n_cols)  # pages only at 1 cell each
        first = 0 if pages == 1 else page * _first_page_cells(lines, self)
        key = first + (event.x - left) // cell_w if event.x >= left else None
        self.post_message(self.Picked(row, key if key is not None and key < n_cols else None))


def _first_page_cells(lines: list[list[Segment]], pane: HeatmapPane) -> int:
    """How many keys the first page of a paged heatmap holds (one cell each)."""
    for line in lines:
        if pane.row_of(line) is not None:
            return sum(cell_len(s.text) for s in line) - cell_len(line[0].text)
    return 1


class Shaded:
    """A renderable drawn as a console without colour draws it (`NO_COLOR`): Textual would
    only grey its colours, where `show` draws the shades."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        plain = Console(width=options.max_width, color_system=None, file=io.StringIO())
        for line in plain.render_lines(self.renderable, plain.options, pad=False):
            yield from line
            yield Segment.line()


class RowPane(Static):
    """The query's keys, largest first, with weights and bars (`show --query`); a click on
    a key picks it (for `f`)."""

    class Picked(Message):
        """A click on key `key` (a column of the view)."""

        def __init__(self, key: int) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.bars: BarList | None = None

    def draw(self, row: QueryRow, lang: str) -> None:
        bars = self.bars = BarList(
            row.keys,
            row.weights,
            title=say(lang, "keys_of", query=row.query),
            indices=row.indices,
            lang=lang,
            masked=None if row.masked is None else [bool(m) for m in row.masked],
        )
        self.update(bars)

    def on_click(self, event: Click) -> None:
        bars = self.bars
        if bars is None or self.size.width <= 0:
            return
        console = Console(width=self.size.width, color_system=None, file=io.StringIO())
        lines = console.render_lines(bars, console.options, pad=False)
        texts = ["".join(s.text for s in line) for line in lines]
        first = str(bars.indices[0]).rjust(len(str(max(bars.indices)))) + " "
        start = next((y for y, text in enumerate(texts) if text.startswith(first)), None)
        if start is not None and 0 <= event.y - start < len(bars.indices):
            self.post_message(self.Picked(bars.indices[event.y - start]))


class HelpScreen(ModalScreen[None]):
    """`?`: every key and what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, lang: str) -> None:
        super().__init__()
        self.lang = lang

    def compose(self) -> ComposeResult:
        text = Text()
        for key in KEYS:
            text.append(f"{key.shown:>10}  ", style="bold")
            text.append((key.pt if self.lang == "pt" else key.en) + "\n")
        box = Vertical(id="help")
        box.border_title = say(self.lang, "help")
        box.border_subtitle = say(self.lang, "close")
        text.rstrip()
        with box:
            yield Static(text)


class PanelScreen(ModalScreen[None]):
    """A result drawn over the view (`explain`'s walkthrough, `find`'s table); scrolls."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,q", "dismiss", "close")]

    def __init__(self, renderable: Any, close: str) -> None:
        super().__init__()
        self.renderable = renderable
        self.close_key = close

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="panel"):
            yield Static(self.renderable)

    def on_key(self, event: Any) -> None:
        if event.key == self.close_key:
            event.stop()
            self.dismiss(None)


class TextLine(Input):
    """The line a new text is typed or pasted in: a paste's lines joined by spaces (Textual's
    Input keeps only the first), what a terminal would act on (an escape, a bidirectional
    override) left out, and a text past EXPLORE_TEXT_CHARS refused as it comes, in the
    line above (`refused`), before the screen holds it."""

    def __init__(self, refused: Callable[[], None], **options: Any) -> None:
        super().__init__(max_length=EXPLORE_TEXT_CHARS, **options)
        self.refused = refused

    def replace(self, text: str, start: int, end: int) -> None:
        if len(self.value) - (end - start) + len(text) > EXPLORE_TEXT_CHARS:
            self.restricted()  # by its length, before a character of it is looked at
            return
        super().replace(typed(text), start, end)

    def restricted(self) -> None:
        self.refused()
        self.app.bell()

    def _on_paste(self, event: Paste) -> None:  # Input's own would drop all but one line
        event.prevent_default()
        event.stop()
        if event.text:
            start, end = sorted(self.selection)
            self.replace(event.text, start, end)


def typed(text: str) -> str:
    """`text` as a line: runs of whitespace (newlines, tabs) one space, and the characters
    `visible` would escape (controls, bidirectional overrides, zero-width ones) left out."""
    line = " ".join(text.split()) if text.strip() else (" " if text else "")
    if visible(line) == line:
        return line
    return "".join(char for char in line if visible(char) == char)


class TextScreen(ModalScreen[str | None]):
    """`/`: a line to type a new text in; Enter gives it, Esc gives None."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "dismiss", "close")]

    def __init__(self, lang: str) -> None:
        super().__init__()
        self.lang = lang

    def compose(self) -> ComposeResult:
        with Vertical(id="retext"):
            yield Static(say(self.lang, "new_text"), id="prompt")
            yield TextLine(self.too_long, id="text")

    def too_long(self) -> None:
        line = say(self.lang, "too_long", most=f"{EXPLORE_TEXT_CHARS:,}")
        self.query_one("#prompt", Static).update(Text(line))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

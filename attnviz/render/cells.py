"""Text measured in display cells, for the one-line layouts of the terminal renderers.

A display cell is one column of a terminal: `a` takes one, `銀` or `👍` two, a
combining accent none. Widths are counted with `rich.cells.cell_len`, as rich
counts them when it lays out a table or a line.

Text from strangers (a model card, a tokenizer's pieces, a cache entry, the typed text)
is made safe by `visible`, the one rule every title, caption, panel heading, axis label
and token label goes through, on a terminal, in an image (`attnviz.render.labels`) and on
a page, and that the command line's error lines use: control characters are escaped
Python-style (`\\x1b`, `\\n`, `\\x9b`) and invisible format characters (bidirectional
overrides, isolates and marks, zero-width spaces and joiners, U+FEFF, line separators),
lone surrogates and the noncharacters U+FFFE and U+FFFF (never valid in an SVG) as
`U+202E`, so nothing can retitle the window, move the cursor, reorder or hide text.
Ordinary text is untouched: accents, CJK, right-to-left scripts, `##ou`, `Ġ`, `▁`,
emoji, and the joiners that belong to text: a zero-width joiner between two emoji
(`👨\\u200d👩\\u200d👧`), a zero-width non-joiner between two letters of a script that uses
it (Persian `می\\u200cخواهم`), the tags of a subdivision flag. `truncate` cuts text to a
number of cells, ending in `…`; labels are shown at most `MAX_LABEL_CELLS` cells wide.

Whole lines are lists of rich `Segment`s (`Line`); `emit` writes them cropped to the
width, and `title_lines` lays out a bold title. Used by every terminal renderer
(`terminal`, `bars`, `stats`, `find`, `compare`, `explain`) and by the command line
(`tokens`, `info`, its notes and error lines, `--json`). No torch, no matplotlib.
`as_mask` checks the masked cells every renderer, terminal or image, is given.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

if TYPE_CHECKING:
    import numpy as np
    from rich.table import Table

__all__ = [
    "ELLIPSIS",
    "MAX_LABEL_CELLS",
    "Line",
    "clean_labels",
    "emit",
    "json_visible",
    "pad",
    "title_lines",
    "title_width",
    "truncate",
    "visible",
    "wrap_items",
]

MAX_LABEL_CELLS = 14  # longest label shown, in display cells (longer ones end in "…")
ELLIPSIS = "…"  # ends text that `truncate` cut

_BOLD = Style(bold=True)
_ZWJ = "\u200d"
_ZWNJ = "\u200c"
_SKIN_TONES = frozenset(chr(c) for c in range(0x1F3FB, 0x1F400))
_BLACK_FLAG = "\U0001f3f4"
_CANCEL_TAG = "\U000e007f"
_MAX_FLAG_TAGS = 6  # a subdivision flag: 🏴 + up to 6 tag letters (`gbsct`) + cancel tag
# Unicode categories escaped: controls (C0, DEL, C1), format characters (bidirectional
# controls, zero-width characters, U+FEFF, soft hyphen, tags), lone surrogates (undecodable
# bytes), line and paragraph separators.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# And the two noncharacters no XML file (an SVG) may hold, which no font draws.
_NONCHARACTERS = "\ufffe\uffff"
# Every character of those categories (Unicode 14, as Python 3.11 knows it; a test checks
# this against the running Python) and the two noncharacters, to find them in bulk.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f\ufffe\uffff]"
)


# ---------------------------------------------------------------------------
# Making text from strangers safe for a terminal


def _is_pictograph(char: str) -> bool:
    """Roughly: a symbol that can be an emoji (not ASCII `^` or the like)."""
    return ord(char) >= 0x2100 and unicodedata.category(char) == "So"


def _is_emoji(char: str) -> bool:
    """A pictograph, a skin tone or the emoji variation selector."""
    return char == "\ufe0f" or char in _SKIN_TONES or _is_pictograph(char)


def _is_script_letter(char: str, *, marks: bool = True) -> bool:
    """A letter (or a mark, with `marks`) of a script other than ASCII's, such as Persian
    or Devanagari."""
    return not char.isascii() and unicodedata.category(char)[0] in ("LM" if marks else "L")


def _escape(char: str) -> str:
    """How `visible` shows one unsafe character: `\\x1b`, `\\n`, `\\x9b` for a control
    character (as Python writes it), `U+202E` for any other."""
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0:
        return repr(char)[1:-1]
    return f"U+{code:04X}"


def _flag_tags(text: str, start: int) -> int:
    """The end of the tags of a subdivision flag whose 🏴 is at `start - 1`, or `start`."""
    end = start
    while end < len(text) and end - start < _MAX_FLAG_TAGS and 0xE0020 <= ord(text[end]) < 0xE007F:
        end += 1
    if end > start and end < len(text) and text[end] == _CANCEL_TAG:
        return end + 1
    return start


def _kept(text: str) -> list[bool]:
    """For each character of `text`, whether it is shown as it is (else escaped).

    Escaped: every character of the `_ESCAPED` categories (and U+FFFE, U+FFFF) except the
    joiners that belong to the text around them, and a skin tone that modifies nothing
    (rich counts it 0 cells, terminals 2). A zero-width joiner stays only between two
    emoji: rich counts "a\\u200db" as 1 cell where terminals draw 2, and "\\u200dx" as 0.
    """
    kept = [
        unicodedata.category(char) not in _ESCAPED and char not in _NONCHARACTERS for char in text
    ]
    last = len(text) - 1
    for i, char in enumerate(text):
        if char in _SKIN_TONES:
            kept[i] = i > 0 and _is_pictograph(text[i - 1])
        elif char == _BLACK_FLAG:
            end = _flag_tags(text, i + 1)
            kept[i + 1 : end] = [True] * (end - i - 1)
    for i, char in enumerate(text):
        if 0 < i < last and char == _ZWJ:
            before, after = text[i - 1], text[i + 1]
            kept[i] = kept[i - 1] and kept[i + 1] and _is_emoji(before) and _is_emoji(after)
        elif 0 < i < last and char == _ZWNJ:
            after = text[i + 1]
            kept[i] = _is_script_letter(text[i - 1]) and _is_script_letter(after, marks=False)
    return kept


def visible(text: str, *, newlines: bool = False) -> str:
    """`text` safe to print on a terminal, every unsafe character shown escaped.

    Control characters become `\\x1b`, `\\r`, `\\x07`, `\\x9b` (and `\\n`, unless
    `newlines`: where a newline is meant); bidirectional overrides, isolates and marks,
    zero-width characters and other invisible format characters, lone surrogates, line
    separators and the noncharacters U+FFFE and U+FFFF become `U+202E`, `U+200B`. A
    zero-width joiner between two emoji, a zero-width non-joiner between two letters of
    a script that uses it and the tags of a subdivision flag stay: they belong to the
    text. Nothing else changes; a backslash is not doubled, so `\\x1b` typed as four
    characters shows the same as an escape.
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        char if keep or (newlines and char == "\n") else _escape(char)
        for char, keep in zip(text, _kept(text), strict=True)
    )


def json_visible(document: str) -> str:
    """A JSON document with every character `visible` would escape written as a JSON
    `\\u` escape (`\\u202e`): the same data when read back, nothing a terminal acts on."""
    return _UNSAFE.sub(lambda match: json.dumps(match[0])[1:-1], document)


def clean_labels(labels: Sequence[str]) -> list[str]:
    """Every label as a string, made `visible` (not cut: see `truncate`)."""
    return [visible(str(label)) for label in labels]


# ---------------------------------------------------------------------------
# Fitting text to a number of cells


def truncate(text: str, cells: int) -> str:
    """`text` cut to at most `cells` display cells, ending in `…` when cut.

    A zero-width joiner or emoji variation selector left dangling before the `…` is
    dropped too; `cells` <= 0 gives "".
    """
    if cell_len(text) <= cells:
        return text
    if cells <= 0:
        return ""
    out, used = [], 0
    for char in text[: 4 * cells + 8]:  # more characters than can ever fit
        width = cell_len(char)
        if used + width > cells - 1:
            break
        out.append(char)
        used += width
    kept = "".join(out).rstrip(_ZWJ + "\ufe0f")
    while kept and cell_len(kept) > cells - 1:  # joins can measure differently
        kept = kept[:-1].rstrip(_ZWJ + "\ufe0f")
    return kept + ELLIPSIS


def pad(text: str, cells: int) -> str:
    """`text` (already at most `cells` wide) followed by spaces up to `cells`."""
    return text + " " * (cells - cell_len(text))


def wrap_items(items: Sequence[str], width: int, gap: int = 2) -> list[str]:
    """Items joined by `gap` spaces into lines of at most `width` cells; no item is split.

    An item wider than `width` is cut with `truncate`.
    """
    lines: list[str] = []
    current: list[str] = []
    used = 0
    for item in items:
        item = truncate(item, width)
        size = cell_len(item)
        if current and used + gap + size > width:
            lines.append((" " * gap).join(current))
            current, used = [], 0
        used += size + (gap if current else 0)
        current.append(item)
    if current:
        lines.append((" " * gap).join(current))
    return lines


def title_width(title: str | None) -> int:
    """Cells the widest line of `title` takes once made `visible` (0 for no title)."""
    return max(cell_len(part) for part in visible(title or "", newlines=True).split("\n"))


# ---------------------------------------------------------------------------
# Lines of segments

Line = list[Segment]  # one output line, without its newline


def title_lines(title: str | None, console: Console, options: ConsoleOptions) -> list[Line]:
    """The title in bold, word-wrapped to the width (rich wraps; its newlines are meant,
    anything else unsafe is escaped by `visible`)."""
    if not title:
        return []
    text = Text(visible(title, newlines=True), style=_BOLD)
    return console.render_lines(text, options.update(height=None), pad=False)


def emit(lines: Sequence[Line], width: int) -> Iterator[Segment]:
    """Segments of every line, each cropped to `width` (a safety net) and ended."""
    newline = Segment.line()
    for line in lines:
        yield from Segment.adjust_line_length(line, width, pad=False)
        yield newline


def result_table(title: str | None, caption: str) -> Table:
    """The table a result of rows prints (`find`'s links, `find --file`'s heads, `stats`): its
    title bold and escaped, its caption dim below, left-aligned; both plain text, never markup."""
    from rich import box
    from rich.table import Table

    return Table(
        title=Text(visible(title, newlines=True), _BOLD) if title else None,
        caption=Text(caption, Style(dim=True)),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        padding=(0, 1),
    )


BAR_COLUMN = ""  # in `add_columns`: the bar column, no heading


def add_columns(table: Table, lang: str, names: Sequence[str], *, left: str = "") -> None:
    """`table`'s columns, headed by the lexicon's labels `names` (`BAR_COLUMN`: a bar column),
    never wrapped, numbers right-justified: all but the column `left`."""
    from attnviz import lexicon

    for name in names:
        if name == BAR_COLUMN:
            table.add_column("", no_wrap=True)
        else:
            heading = lexicon.label(lang, name)
            table.add_column(heading, justify="left" if name == left else "right", no_wrap=True)


class BarsWhenTheyFit:
    """A result table (`_table`) drawn with its bar column, or without it where the table
    with bars is wider than the terminal (`find`'s links, `find --file`'s heads)."""

    def _table(self, bars: bool = True) -> Table:
        raise NotImplementedError

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._table())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self._table()
        natural = Measurement.get(console, options.update_width(10_000), table).maximum
        yield table if natural <= options.max_width else self._table(bars=False)


def as_mask(masked: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """`masked` (the cells the model could not see) as a bool array of `shape`; None stays
    None; ValueError when the shapes differ."""
    import numpy as np

    if masked is None:
        return None
    mask = np.asarray(masked, dtype=bool)
    if mask.shape != shape:
        raise ValueError(f"masked has shape {mask.shape}, the values {shape}")
    return mask

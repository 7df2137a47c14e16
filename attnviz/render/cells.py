"""Text measured in display cells, for the one-line layouts of the terminal renderers.

A display cell is one column of a terminal: `a` takes one, `銀` or `👍` two, a
combining accent none. Widths are counted with `rich.cells.cell_len`, as rich
counts them when it lays out a table or a line.

Labels are made safe for a one-line layout by `sanitize`: control characters become
visible stand-ins (`\\n` -> `␊`), bidirectional overrides and other invisible format
characters that move or hide text are dropped, and a zero-width joiner is kept only
between emoji (elsewhere rich and terminals disagree on the width). `truncate` cuts
text to a number of cells, ending in `…`; labels are shown at most `MAX_LABEL_CELLS`
cells wide.

Whole lines are lists of rich `Segment`s (`Line`); `emit` writes them cropped to the
width, and `title_lines` lays out a bold title. Used by `attnviz.render.terminal`,
`attnviz.render.stats` and `attnviz.render.explain`. No torch, no matplotlib.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

__all__ = [
    "ELLIPSIS",
    "MAX_LABEL_CELLS",
    "Line",
    "clean_labels",
    "emit",
    "pad",
    "sanitize",
    "title_lines",
    "title_width",
    "truncate",
    "wrap_items",
]

MAX_LABEL_CELLS = 14  # longest label shown, in display cells (longer ones end in "…")
ELLIPSIS = "…"  # ends text that `truncate` cut

_BOLD = Style(bold=True)
_DROPPED = frozenset(
    "\u00ad\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)  # soft hyphen and bidirectional controls: invisible, but they move or hide text
_ZWJ = "\u200d"
_SKIN_TONES = frozenset(chr(c) for c in range(0x1F3FB, 0x1F400))


# ---------------------------------------------------------------------------
# Making text safe for one line


def _is_pictograph(char: str) -> bool:
    """Roughly: a symbol that can be an emoji (not ASCII `^` or the like)."""
    return ord(char) >= 0x2100 and unicodedata.category(char) == "So"


def _is_emoji(char: str) -> bool:
    """A pictograph, a skin tone or the emoji variation selector."""
    return char == "\ufe0f" or char in _SKIN_TONES or _is_pictograph(char)


def _stand_in(char: str) -> str:
    """What one character of a label becomes (joiners and skin tones are left to
    `_joined_only`, which looks at their neighbours)."""
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # control pictures: ␀ ␉ ␊ ...
    if code == 0x7F:
        return "␡"
    if 0x80 <= code < 0xA0 or 0xD800 <= code < 0xE000:
        return "?"  # C1 controls, lone surrogates
    if char in ("\u2028", "\u2029"):
        return "␤"
    if char in _DROPPED:
        return ""
    return char


def _joined_only(text: str) -> str:
    """`text` with emoji modifiers kept only where they modify something.

    A skin tone stays only right after a pictograph (alone, rich counts 0 cells and
    terminals 2), then a zero-width joiner only between two emoji: rich counts
    "a\u200db" as 1 cell where terminals draw 2, and a joiner left at the end of a
    label would swallow the space after it in rich's count, shifting the row.
    """
    toned = "".join(
        char
        for i, char in enumerate(text)
        if char not in _SKIN_TONES or (i > 0 and _is_pictograph(text[i - 1]))
    )
    last = len(toned) - 1
    return "".join(
        char
        for i, char in enumerate(toned)
        if char != _ZWJ or (0 < i < last and _is_emoji(toned[i - 1]) and _is_emoji(toned[i + 1]))
    )


def sanitize(text: str) -> str:
    """`text` with every character that could break a one-line layout replaced.

    Control characters become visible stand-ins (`\\n` -> `␊`, C1 controls and lone
    surrogates -> `?`), invisible characters that move or hide text are dropped, and
    emoji joiners and skin tones stay only where they join or tone an emoji.
    """
    if text.isprintable() and text.isascii():
        return text
    return _joined_only("".join(_stand_in(char) for char in text))


def clean_labels(labels: Sequence[str]) -> list[str]:
    """Every label as a string, sanitized (not cut: see `truncate`)."""
    return [sanitize(str(label)) for label in labels]


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
    """Cells the widest line of `title` takes once sanitized (0 for no title)."""
    return max((cell_len(sanitize(part)) for part in (title or "").split("\n")), default=0)


# ---------------------------------------------------------------------------
# Lines of segments

Line = list[Segment]  # one output line, without its newline


def title_lines(title: str | None, console: Console, options: ConsoleOptions) -> list[Line]:
    """The title in bold, word-wrapped to the width (rich wraps, we only sanitize)."""
    if not title:
        return []
    text = Text("\n".join(sanitize(part) for part in title.split("\n")), style=_BOLD)
    return console.render_lines(text, options.update(height=None), pad=False)


def emit(lines: Sequence[Line], width: int) -> Iterator[Segment]:
    """Segments of every line, each cropped to `width` (a safety net) and ended."""
    newline = Segment.line()
    for line in lines:
        yield from Segment.adjust_line_length(line, width, pad=False)
        yield newline

"""Labels and titles as drawn: cleaned to one line, cut, wrapped and measured in inches.

Text is drawn literally (no mathtext), so tokens such as `$` or `\\n` cannot break a
drawing, and made `visible` first (`attnviz.render.cells`: the one rule for text from
strangers, the terminal's too): a control character, a bidirectional override, a lone
surrogate or U+FFFE is drawn escaped, never obeyed, never crashing a writer. A label is
measured the way matplotlib's Agg renderer will draw it, so that a figure can be laid out
to the inch before anything is drawn.
"""

from __future__ import annotations

import math
import textwrap
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attnviz import lexicon
from attnviz.render.cells import visible
from attnviz.render.style import ft_font, hinting

if TYPE_CHECKING:
    from matplotlib.font_manager import FontProperties

_MAX_LABEL_CHARS = 20
# Long titles wrap onto at most this many lines instead of widening the image.
_MAX_TITLE_LINES = 3
_MEASURE_DPI = 288.0  # text is measured at this resolution (4 pixels to the point)
_SLACK = 1.04  # measured widths grow by this much: hinting differs a little between resolutions


def check_labels(labels: Sequence[str], count: int, what: str) -> None:
    if len(labels) != count:
        raise ValueError(f"{what}: {len(labels)} labels for {count} tokens")


def clean_label(label: str) -> str:
    """A label drawn literally on one line, made `visible` (the one rule for text from
    strangers: `attnviz.render.cells`), long ones cut."""
    text = visible(str(label))
    if len(text) > _MAX_LABEL_CHARS:
        text = text[: _MAX_LABEL_CHARS - 1] + "…"
    return text


def _ems(text: str) -> float:
    """Rough width of `text` in ems (wide East Asian characters count 1, others 0.6)."""
    return sum(1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6 for ch in text)


def text_width_in(labels: Sequence[str], size_pt: float) -> float:
    """Rough width in inches of the widest label (wide East Asian characters count double)."""
    return max((_ems(label) for label in labels), default=0.0) * size_pt / 72


def wrap_title(title: str, width_in: float, size_pt: float) -> str:
    """The title, cleaned and wrapped to `width_in` on at most _MAX_TITLE_LINES lines (the
    last cut with `…`), so that a long title cannot make the image wider than the figure."""
    text = visible(str(title))
    em_per_char = max(0.6, _ems(text) / max(1, len(text)))
    chars = max(10, int(width_in * 72 / (size_pt * em_per_char)))
    lines = textwrap.wrap(text, chars, break_on_hyphens=False) or [text]
    if len(lines) > _MAX_TITLE_LINES:
        lines = [*lines[: _MAX_TITLE_LINES - 1], lines[_MAX_TITLE_LINES - 1][: chars - 1] + "…"]
    return "\n".join(lines)


def tick_step(count: int, max_ticks: int) -> int:
    """Label every token when they fit, else every k-th so that at most max_ticks show."""
    return 1 if count <= max_ticks else math.ceil(count / max_ticks)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def axis_name(key: str, step: int, lang: str = "en") -> str:
    """The axis `key` ("query", "key", "layer", "head": see attnviz.lexicon) in `lang`,
    saying how sparse its labels are when only every `step`-th token is labelled."""
    name = lexicon.label(lang, key)
    if step == 1:
        return name
    every = "axis_every_block" if key.endswith("_blocks") else "axis_every"
    return lexicon.label(lang, every, name=name, nth=_ordinal(step) if lang == "en" else step)


def _extent(text: str, font: FontProperties, dpi: float) -> tuple[float, float, float]:
    """Width, height and descent in pixels of one line of `text` at `dpi`, as the Agg
    renderer measures it (`RendererAgg.get_text_width_height_descent`)."""
    ft = ft_font(font, dpi)
    ft.set_text(text, 0.0, flags=hinting())
    width, height = ft.get_width_height()
    return width / 64, height / 64, ft.get_descent() / 64


def sizes_in(texts: Sequence[str], font: FontProperties) -> tuple[list[float], float]:
    """The width of each one-line text, and the height of a line of the tallest, in inches,
    as the Agg renderer draws them (matplotlib lays out a line at least as tall as "lp")."""
    _, line, _ = _extent("lp", font, _MEASURE_DPI)
    widths = []
    for text in texts:
        width, height, _ = _extent(text, font, _MEASURE_DPI)
        widths.append(width)
        line = max(line, height)
    return [w / _MEASURE_DPI * _SLACK for w in widths], line / _MEASURE_DPI * _SLACK


def _text_block_in(text: str, font: FontProperties) -> tuple[float, float]:
    """Width and height in inches of `text`, which may have several lines."""
    lines = text.split("\n")
    widths, line = sizes_in(lines, font)
    return max(widths), line * (1 + 1.2 * (len(lines) - 1))


def fit_title(title: str, width_in: float, font: FontProperties) -> tuple[str, float]:
    """`title` wrapped (see wrap_title) so that its widest line, as measured, fits in
    `width_in`; and the height of the wrapped title in inches."""
    size = font.get_size_in_points()
    text = wrap_title(title, width_in, size)
    for _ in range(4):
        wide, high = _text_block_in(text, font)
        if wide <= width_in:
            break
        text = wrap_title(title, width_in * width_in / wide * 0.95, size)
    else:
        high = _text_block_in(text, font)[1]
    return text, high

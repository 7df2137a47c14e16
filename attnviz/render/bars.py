"""A list of labelled values with bars, largest first, in the terminal: one query's row.

`BarList(labels, values)` prints one line per key: its column number, its label, the
value to two decimals and a bar in eighths of a cell (`█▉▊▋▌▍▎▏`), scaled so the
largest value fills the space left. Lines never exceed the console width; labels are
cut with `…` like the heatmaps'. No torch, no matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style

from attnviz import lexicon
from attnviz.render.cells import (
    MAX_LABEL_CELLS,
    Line,
    clean_labels,
    emit,
    pad,
    title_lines,
    title_width,
    truncate,
)

__all__ = ["BarList", "bar"]

_EIGHTHS = " ▏▎▍▌▋▊▉"
_FULL = "█"
_MAX_BAR = 40  # widest bar, in cells
_MIN_BAR = 4  # below this the label is cut instead
_DIM = Style(dim=True)


def bar(fraction: float, cells: int) -> str:
    """A bar `fraction` (0..1) of `cells` wide, in eighths of a cell."""
    if not math.isfinite(fraction):
        fraction = 0.0
    eighths = round(max(0.0, min(1.0, fraction)) * cells * 8)
    full, part = divmod(eighths, 8)
    return _FULL * full + (_EIGHTHS[part] if part else "")


class BarList:
    """`values` with `labels`, one line each, in the order given (sort them first)."""

    def __init__(
        self,
        labels: Sequence[str],
        values: Sequence[float] | np.ndarray,
        *,
        title: str | None = None,
        indices: Sequence[int] | None = None,
        lang: str = "en",
        masked: Sequence[bool] | None = None,
    ) -> None:
        """`masked`: per label, True for a key the model could not see (shown `   –`, dim)."""
        if len(labels) != len(values):
            raise ValueError(f"{len(labels)} labels for {len(values)} values")
        if masked is not None and len(masked) != len(labels):
            raise ValueError(f"{len(masked)} masked flags for {len(labels)} labels")
        self.masked = [bool(m) for m in masked] if masked is not None else [False] * len(labels)
        self.labels = clean_labels(labels)
        self.values = np.asarray(values, dtype=float)
        self.indices = list(indices) if indices is not None else list(range(len(labels)))
        self.title = title
        self.lang = lang  # the language of its header: "en" or "pt"

    @property
    def _index_w(self) -> int:
        return max((len(str(i)) for i in self.indices), default=1)

    @property
    def _label_w(self) -> int:
        return min(MAX_LABEL_CELLS, max((cell_len(label) for label in self.labels), default=0))

    def _left_w(self, label_w: int) -> int:
        return self._index_w + 1 + label_w + 1 + 4 + 1  # "12 label 0.70 "

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        maximum = max(self._left_w(self._label_w) + _MAX_BAR, title_width(self.title))
        minimum = self._left_w(1) + 1
        return Measurement(min(minimum, maximum), maximum).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        label_w = self._label_w
        if width - self._left_w(label_w) < _MIN_BAR:  # cut labels before the bars vanish
            label_w = max(1, width - self._left_w(0) - _MIN_BAR)
        bar_w = max(0, min(_MAX_BAR, width - self._left_w(label_w)))
        finite = self.values[np.isfinite(self.values)]
        top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        lines: list[Line] = title_lines(self.title, console, options)
        lines.append(
            [
                Segment(
                    truncate(lexicon.label(self.lang, "bars_header", top=f"{top:.2f}"), width), _DIM
                )
            ]
        )
        rows = zip(self.indices, self.labels, self.values, self.masked, strict=True)
        for i, label, value, hidden in rows:
            left = f"{str(i).rjust(self._index_w)} {pad(truncate(label, label_w), label_w)} "
            if hidden:  # a key the model could not see: no number, no bar
                lines.append([Segment(left + "   –", _DIM)])
                continue
            shown = f"{value:.2f}" if np.isfinite(value) else " nan"
            lines.append([Segment(left + shown + " "), Segment(bar(value / top, bar_w))])
        if any(self.masked):
            lines += [[Segment(truncate(lexicon.label(self.lang, "masked_mark", mark="–"), width),
                               _DIM)]]  # fmt: skip
        yield from emit(lines, width)

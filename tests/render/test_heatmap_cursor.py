"""`Heatmap(highlight=i)`: row i's number and label drawn in reverse (the explorer's cursor),
every other line as before."""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from attnviz.render.terminal import Heatmap

LABELS = ["[CLS]", "the", "cat", "[SEP]"]


def _lines(heatmap: Heatmap) -> list[list]:
    console = Console(width=60, color_system="truecolor", file=io.StringIO())
    return console.render_lines(heatmap, console.options, pad=False)


def test_only_the_highlighted_row_is_reversed_and_nothing_else_changes() -> None:
    matrix = np.full((4, 4), 0.25)
    plain, cursor = _lines(Heatmap(matrix, LABELS)), _lines(Heatmap(matrix, LABELS, highlight=2))
    reversed_rows = [
        "".join(s.text for s in line).strip()
        for line in cursor
        if any(s.style is not None and s.style.reverse for s in line)
    ]
    assert reversed_rows == ["2 cat"]
    texts = [["".join(s.text for s in line)] for line in plain]
    assert texts == [["".join(s.text for s in line)] for line in cursor]

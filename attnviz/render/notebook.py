"""A result in a notebook cell: what the terminal prints, as an HTML fragment.

A notebook asks a result for `_repr_html_`; the results that print a table or a
walkthrough in the terminal (an explanation, head statistics, `find`'s heads, the
measures compared, a model's details, a long input's profiles) answer with the same
rich renderable, recorded and exported as HTML with inline styles: the same columns,
colours and words as `attnviz` prints, in a `<pre>` of its own (no stylesheet, no
script, nothing global), so any number of them share a notebook.

Text is escaped: a token `<script>` shows as the text `<script>`. The renderables have
already passed strangers' text through `attnviz.render.cells.visible`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

__all__ = ["MAX_ROWS", "WIDTH", "details_table", "more_rows", "rich_html"]

WIDTH = 110  # characters: a notebook's output area at its usual font size
# A table in a notebook shows at most this many rows (every head of SmolLM2-135M's 30 × 9),
# so that a result of any size displays in bounded time (rich lays out 1,024 rows of head
# statistics in about 4 s); a line says how to see the rest.
MAX_ROWS = 300

# Light background, dark text (rich's own export theme): the terminal's colours on the
# paper they were chosen for, whatever the notebook's theme.
_PRE = (
    '<pre class="attnviz-text" style="margin:0;padding:0.5em 0.75em;overflow-x:auto;'
    "font-family:Menlo,'DejaVu Sans Mono',Consolas,'Liberation Mono',monospace;"
    'font-size:12px;line-height:1.25;color:{foreground};background-color:{background}">'
    "<code>{code}</code></pre>"
)


def rich_html(*renderables: Any, width: int = WIDTH) -> str:
    """The renderables as `rich.print` draws them `width` characters wide, as HTML."""
    from rich.console import Console

    console = Console(
        record=True,
        width=width,
        file=io.StringIO(),  # recorded only; nothing is written anywhere
        color_system="truecolor",
        force_terminal=True,
        force_jupyter=False,  # in a kernel rich would otherwise display it itself
        force_interactive=False,
        legacy_windows=False,
    )
    for renderable in renderables:
        console.print(renderable)
    return console.export_html(inline_styles=True, code_format=_PRE)


def more_rows(count: int, how: str, lang: str = "en") -> Any:
    """The line under a table cut at `MAX_ROWS`: how many rows were left out, and the call
    (`how`) that shows them."""
    from rich.text import Text

    from attnviz.lexicon import label

    return Text(label(lang, "notebook_more", n=count, how=how), style="dim")


def details_table(rows: Sequence[tuple[str, str]]) -> Any:
    """Two columns, a name in bold and its value, as `attnviz info` prints them."""
    from rich.table import Table
    from rich.text import Text

    from attnviz.render.cells import visible

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for name, value in rows:
        table.add_row(name, Text(visible(value)))  # a model card's text: never markup
    return table

"""Whether the explorer has a terminal to take over, and the one line that says it has none
(the command and `Analysis.explore` both ask, before the screen opens; no Textual import)."""

from __future__ import annotations

import sys

from attnviz.errors import BadInput

NO_TERMINAL = (
    "explore draws a full-screen view and needs a terminal (this is a pipe or a file): run it "
    "in one, or print a view with attnviz show"
)


def on_a_terminal() -> bool:
    """Whether standard input and output are a terminal the app can take over."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def need_a_terminal() -> None:
    """Refuse, in one line, to open the full-screen view without a terminal."""
    if not on_a_terminal():
        raise BadInput(NO_TERMINAL)

"""The two kinds of error a user can see.

Each carries a one-line message that names the problem and the fix. The CLI
prints it on stderr and exits with the error's code; nothing else is shown
unless `--debug` is given.
"""

from __future__ import annotations

import re


class AttnvizError(Exception):
    """A failure while running (model not found, corrupt weights, unwritable path)."""

    exit_code = 1


class BadInput(AttnvizError):
    """A bad argument: a value out of range, empty text, an unknown extension."""

    exit_code = 2


def short_reason(exc: BaseException, limit: int = 160) -> str:
    """A short reason from an exception's message, cut at a sentence or word boundary."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + "…"
    return text.rstrip(".")

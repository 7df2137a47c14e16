"""The two kinds of error a user can see.

Each carries a one-line message that names the problem and the fix. The CLI
prints it on stderr and exits with the error's code; nothing else is shown
unless `--debug` is given.
"""

from __future__ import annotations


class AttnvizError(Exception):
    """A failure while running (model not found, corrupt weights, unwritable path)."""

    exit_code = 1


class BadInput(AttnvizError):
    """A bad argument: a value out of range, empty text, an unknown extension."""

    exit_code = 2

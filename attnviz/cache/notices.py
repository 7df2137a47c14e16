"""The cache's one-line warnings on stderr: the cache steps aside, it never fails a command."""

from __future__ import annotations

import sys

warned: set[str] = set()  # messages already shown by warn(..., once=True)
quiet = False  # the command line's --quiet: notes are not printed (warnings still are)


def warn(message: str, *, once: bool = False) -> None:
    """Print `warning: <message>` on stderr (only the first time, if `once`)."""
    if once:
        if message in warned:
            return
        warned.add(message)
    print(f"warning: {message}", file=sys.stderr)


def note(message: str) -> None:
    """Print `note: <message>` on stderr, unless the command line was asked to be quiet."""
    if not quiet:
        print(f"note: {message}", file=sys.stderr)

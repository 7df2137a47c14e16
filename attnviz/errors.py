"""The two kinds of error a user can see.

Each carries a one-line message that names the problem and the fix. The CLI
prints it on stderr and exits with the error's code; nothing else is shown
unless `--debug` is given.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self

# What a failing call into a foreign library must let through: the user's interrupt, the
# interpreter's own exits, and running out of memory (reported as such). Anything else it
# raises is the input's fault, BaseException included: pyo3 turns a Rust panic in tokenizers
# or safetensors (a catastrophic regex, a lying header) into PanicException, which derives
# from BaseException so that `except Exception` misses it.
PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)


# How Python callers read an argument whose name alone would not say what to pass.
KEYWORDS = {"truncate": "truncate=True", "bos": "bos=False", "target_text": "target"}


class AttnvizError(Exception):
    """A failure while running (model not found, corrupt weights, unwritable path).

    The message names an argument in the caller's words: `{top}` in the message stands for
    the parameter `top` listed in `param`; `str(exc)` spells it as Python does (`top must be
    at least 1`), and the command line as its flag (`--top must be at least 1`, through
    `spelled`). Text not listed in `param` is left as it is, braces included.
    """

    exit_code = 1

    def __init__(self, message: str, *, param: str | tuple[str, ...] | None = None) -> None:
        self.template = message
        self.params: tuple[str, ...] = (param,) if isinstance(param, str) else tuple(param or ())
        super().__init__(self.spelled(lambda name: KEYWORDS.get(name, name)))

    @property
    def param(self) -> str | None:
        """The argument this error is about (the first one named), or None."""
        return self.params[0] if self.params else None

    def spelled(self, spell: Callable[[str], str]) -> str:
        """The message with each argument named as `spell(name)` says (a flag, a keyword)."""
        text = self.template
        for name in self.params:
            text = text.replace("{" + name + "}", spell(name))
        return text

    def prefixed(self, prefix: str) -> Self:
        """The same error, its message after `prefix` (which names no argument)."""
        return type(self)(prefix + self.template, param=self.params)


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


_quiet_lock = threading.Lock()
_quiet: dict[str, int] = {"depth": 0, "saved": -1}


@contextlib.contextmanager
def quiet_panics() -> Iterator[None]:
    """Keep stderr (file descriptor 2) silent during a call into tokenizers or safetensors.

    A Rust panic there prints its message and, with RUST_BACKTRACE set, a backtrace
    straight to file descriptor 2, before Python sees it as an exception; attnviz
    reports that exception in one line instead. Nested and concurrent uses share one
    redirection, restored when the last one ends.
    """
    with _quiet_lock:
        if _quiet["depth"] == 0:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                sys.stderr.flush()
            try:
                saved = os.dup(2)
            except OSError:  # no stderr at all: nothing to keep quiet
                saved = -1
            if saved >= 0:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 2)
                os.close(devnull)
            _quiet["saved"] = saved
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0 and _quiet["saved"] >= 0:
                os.dup2(_quiet["saved"], 2)
                os.close(_quiet["saved"])
                _quiet["saved"] = -1


OUT_OF_MEMORY = (
    "out of memory: shorten the text (or read fewer pieces, {max_tokens} N with {truncate}), "
    "look at one layer, use a lighter measure than value-zeroing, a smaller {batch_size}, or "
    "lower "
    "ATTNVIZ_ATTENTION_MB (the attention kept: 512 MB by default)"
)
TOO_DEEP = (
    "too deeply nested to read (past Python's recursion limit): a file or input nested this "
    "deep is refused; shorten it"
)


def exhaustion(exc: BaseException) -> str | None:
    """The line for an exception that means memory (or the stack) ran out, else None.

    MemoryError (numpy's `_ArrayMemoryError` is one), torch's OutOfMemoryError and the
    RuntimeError its CPU allocator raises ("can't allocate memory"), and RecursionError.
    The line names the arguments as `{max_tokens}` (see `AttnvizError`)."""
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    if isinstance(exc, MemoryError):
        return OUT_OF_MEMORY
    if type(exc).__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError, CUDA's included
        return OUT_OF_MEMORY
    if isinstance(exc, RuntimeError):
        text = str(exc)[:500].lower()
        words = ("can't allocate memory", "cannot allocate memory", "out of memory",
                 "not enough memory", "bad_alloc", "failed to allocate")  # fmt: skip
        if any(word in text for word in words):
            return OUT_OF_MEMORY
    return None


def exhausted(exc: BaseException) -> AttnvizError | None:
    """`exhaustion(exc)` as an AttnvizError (one line, exit code 1), else None."""
    line = exhaustion(exc)
    if line is None:
        return None
    memory = line == OUT_OF_MEMORY
    return AttnvizError(line, param=("max_tokens", "truncate", "batch_size") if memory else None)

"""How a declared command runs: its option groups spelled out for typer (`options.grouped`),
its body under its --debug, its failures one line on stderr (`errors`)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import typer

from attnviz.cli.errors import failures
from attnviz.cli.options import grouped
from attnviz.perf import import_quietly

Declared = Callable[[Callable[..., None]], Callable[..., None]]


def declare(on: typer.Typer, name: str | None = None) -> Declared:
    """Declare a command `on` a Typer (the catalogue or a group of it), its option groups
    spelled out (`options.grouped`), its body run by `running` with the command's --debug."""

    def declared(function: Callable[..., None]) -> Callable[..., None]:
        body = grouped(function)

        @functools.wraps(body)
        def run(**values: Any) -> None:
            with running(values["debug"]):
                body(**values)

        return on.command(name)(run)

    return declared


@contextlib.contextmanager
def running(debug: bool) -> Iterator[None]:
    """A command's body: its failures one line on stderr (`errors`), freed memory given back
    to the system (`perf.return_freed_memory`). The modules the bodies share (with numpy, rich
    and the API) are imported first with the collector paused: they live as long as the
    process (see attnviz.perf)."""
    from attnviz.perf import return_freed_memory

    return_freed_memory()
    with failures(debug):
        for module in BODIES:
            import_quietly(module)
        yield


BODIES = ("attnviz.cli.analysing", "attnviz.cli.long", "attnviz.cli.printing")

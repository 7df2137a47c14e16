"""The `attnviz` command line: one face of the public API in `attnviz`.

`app` declares the commands and their options, `options` the options they share (and
their groups), `command_options` each command's own, `input` reads and checks what the user
typed, `errors` turns failures into one line and an exit code, and a module a command
(`show`, `heads`, `model_view`, ..., `cache`), over `analysing`, `long` and `printing`,
calls the API and prints; `lazy` and `help` keep the start-up light.

`main`, the console script, first replays a memoised `show` (`cache.views`): then neither
typer nor rich is imported. `app` is imported on first use.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from attnviz.perf import paused_gc

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: a memoised `show` replayed, else `app.main`, memoising
    the view `show` prints when it may be (see `attnviz.cache.views`)."""
    from attnviz.cache import views

    with views.recording(sys.argv):
        if views.replay(sys.argv):
            return
        _app_module().main()


def _app_module() -> Any:
    # typer, click and the commands' declarations: objects that live as long as the process,
    # made with the collector paused and kept out of its scans (see attnviz.perf).
    with paused_gc():
        declared = importlib.import_module("attnviz.cli.app")
    globals()["app"] = declared.app  # the name `app` is the group, as the submodule binds it
    return declared


def __getattr__(name: str) -> Any:
    if name == "app":
        _app_module()
        return globals()["app"]
    raise AttributeError(name)

"""The `attnviz` command line: one face of the public API in `attnviz`.

`app` declares the commands and their options, `options` the options they share (and
their groups), `command_options` each command's own, `input` reads and checks what the user
typed, `errors` turns failures into one line and an exit code, and a module a command
(`show`, `heads`, `model_view`, ..., `cache`), over `analysing`, `long` and `printing`,
calls the API and prints; `lazy` and `help` keep the start-up light.
"""

from attnviz.perf import paused_gc

# typer, click and the commands' declarations: objects that live as long as the process,
# made with the collector paused and kept out of its scans (see attnviz.perf).
with paused_gc():
    from attnviz.cli.app import app, main

__all__ = ["app", "main"]

"""The `attnviz` command line: one face of the public API in `attnviz`.

`app` declares the commands and their options, `options` the options they share,
`input` reads and checks what the user typed, `errors` turns failures into one line
and an exit code, and `commands` calls the API and prints.
"""

from attnviz.cli.app import app, main

__all__ = ["app", "main"]

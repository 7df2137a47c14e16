"""How the declared commands run: the `attnviz` group over their catalogue (--version,
--debug), each command's option groups spelled out for typer (`options.grouped`), its body
under its --debug, its failures one line on stderr (`errors`), and the entry point."""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from attnviz import __version__
from attnviz.cli.errors import (
    debug_all,
    failures,
    os_error_line,
    replace_unencodable,
    silence_stdout,
)
from attnviz.cli.help import import_rich_help
from attnviz.cli.lazy import lazy_group
from attnviz.cli.options import DebugOpt, grouped
from attnviz.perf import import_quietly

# The commands are declared on `catalogue` (in `app`) and built only when one runs (`lazy`).
catalogue = typer.Typer(pretty_exceptions_enable=False)


def command(
    name: str | None = None, on: typer.Typer = catalogue
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare a command on the catalogue (or `on` a group of it), its option groups spelled
    out (`options.grouped`), its body run by `running` with the command's --debug."""

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


def application() -> typer.Typer:
    """The `attnviz` group: the commands declared on `catalogue`, each built only when it runs
    (`lazy`), and the group's own --version and --debug."""
    app = typer.Typer(
        cls=lazy_group(catalogue),
        name="attnviz",
        help=(
            "Look inside transformer attention: heatmaps of the attention weights of a real "
            "encoder (BERT family) or decoder (GPT-2, Llama, Mistral, Qwen, Phi-3, Gemma; "
            "folders or GGUF files), computed by a from-scratch multi-head attention, in the "
            "terminal or as images. `attnviz models` lists the models at hand."
        ),
        rich_markup_mode="rich",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_main)
    return app


def _version(value: bool) -> None:
    if value:
        typer.echo(f"attnviz {__version__}")
        raise typer.Exit()


def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Look inside transformer attention."""
    debug_all["on"] = debug


def entry(app: typer.Typer) -> None:
    """Run `app` as the console script does.

    Commands report their own errors; this catches what happens outside them,
    such as `attnviz --help > /dev/full`.
    """
    replace_unencodable()
    if len(sys.argv) < 2 or {"-h", "--help"} & set(sys.argv[1:]):
        # The help is printed and the process ends: the cyclic collector would only walk
        # the objects of typer's and rich's imports, finding nothing to free.
        gc.disable()
        import_rich_help()
    try:
        app()
    except BrokenPipeError:
        sys.exit(silence_stdout())
    except OSError as exc:
        print(os_error_line(exc), file=sys.stderr)
        sys.exit(1)

"""How the command line fails: one line on stderr and an exit code, never a traceback.

Exit code 2 is a bad argument (usage errors included), 1 a failure while running,
130 an interrupt, 141 a closed pipe. `--debug` (global or per command) re-raises so
the traceback shows.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperGroup

from attnviz.errors import AttnvizError, exhaustion

# A parameter of the public API -> the flag the command line spells it as, where the two
# differ by more than `--` and dashes (`max_tokens` is `--max-tokens`); tests/test_cli_options
# checks that every API parameter is spelled as a flag some command has.
FLAGS = {
    "source": "--from",  # Analysis.find
    "target": "--to",
    "target_text": "--target",  # an encoder-decoder's target text (analyse's `target`)
    "subset": "--heads",
    "cache": "--no-cache",
    "bos": "--no-bos",
    "as_json": "--json",
    "path": "--out",  # Analysis.save, HeadStats.save
    "text": "TEXT",
    "texts": "TEXTS",  # head_stats
    "by": "--sort",  # HeadStats.sorted
    "shared_scale": "--own-scales",  # HeadStats.save
}


def flag(param: str) -> str:
    """How the command line names the API's parameter `param`: `top` is `--top`."""
    return FLAGS.get(param, "--" + param.replace("_", "-"))


def in_flags(text: str) -> str:
    """A library text that names arguments as `{max_tokens}` (see AttnvizError), with each
    spelled as its flag."""
    import re

    return re.sub(r"\{([a-z_]+)\}", lambda m: flag(m[1]), text)


def message(exc: AttnvizError) -> str:
    """The error's line in the command line's words: its arguments named by their flags."""
    return exc.spelled(flag)


debug_all = {"on": False}  # set by the global --debug
_notes: list[str] = []  # printed on stderr when the command succeeds


def defer_note(message: str) -> None:
    """A note for stderr, printed after the command's output if it succeeds.

    A command that fails prints only its one error line; one that succeeds prints its
    output (stdout stays clean for JSON) and then the notes. A note may quote a model
    card or the text: it is printed on one line, with anything unsafe escaped.
    """
    _notes.append(one_line(message))


class OneLineUsageErrors(TyperGroup):
    """Usage errors (an unknown option, a bad choice, a missing value) as one line on stderr.

    Typer would draw a multi-line box with the usage; attnviz keeps every error to one
    line that names the problem and where to look, with exit code 2.
    """

    def main(  # type: ignore[override]
        self, args: Any = None, prog_name: str | None = None, **kwargs: Any
    ) -> Any:
        if not kwargs.pop("standalone_mode", True):
            return super().main(args, prog_name, standalone_mode=False, **kwargs)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **kwargs)
        except typer.TyperException as exc:  # click's UsageError and BadParameter
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            if not message.strip():  # no arguments at all: the help was shown, nothing to add
                sys.exit(getattr(exc, "exit_code", 2))
            ctx = getattr(exc, "ctx", None)
            path = ctx.command_path if ctx is not None else f"{self.name or 'attnviz'} COMMAND"
            where = f" (see '{path} --help')"
            typer.echo(f"Error: {one_line(message)}{where}", err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@contextlib.contextmanager
def failures(debug: bool) -> Iterator[None]:
    """Turn failures into one line on stderr and an exit code (unless debugging)."""
    debug = debug or debug_all["on"]
    _notes.clear()
    try:
        yield
        for note in _notes:
            typer.echo(note, err=True)
    except (typer.Exit, typer.Abort):
        raise
    except AttnvizError as exc:
        _notes.clear()
        if debug:
            raise
        typer.echo(f"Error: {one_line(message(exc))}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        raise typer.Exit(130) from None
    except BrokenPipeError:
        raise typer.Exit(silence_stdout()) from None
    except OSError as exc:
        if debug:
            raise
        typer.echo(os_error_line(exc), err=True)
        raise typer.Exit(1) from None
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # the last net: a Rust panic is a BaseException too
        if debug:
            raise
        exhausted = exhaustion(exc)  # memory or the stack ran out: say what to shrink
        if exhausted is not None:
            typer.echo(f"Error: {one_line(in_flags(exhausted))}", err=True)
            raise typer.Exit(1) from None
        typer.echo(
            f"Error: unexpected {type(exc).__name__}: {one_line(str(exc))[:200]} "
            "(rerun with --debug for the traceback, and please report it)",
            err=True,
        )
        raise typer.Exit(1) from None


def silence_stdout() -> int:
    """The reader went away (`attnviz show --json | head`): stop quietly, code 141."""
    with contextlib.suppress(Exception):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


def replace_unencodable() -> None:
    """Print `?` for what the output's encoding cannot hold, instead of failing on it.

    With PYTHONIOENCODING=ascii, or LC_ALL=C without Python's UTF-8 mode, stdout is
    ASCII: a label such as `João` or a shade character would otherwise end the command
    with a UnicodeEncodeError.
    """
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            "João ░".encode(encoding)
        except UnicodeEncodeError:
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except LookupError:
            pass


def os_error_line(exc: OSError) -> str:
    where = f": {printable(str(exc.filename))}" if exc.filename else ""
    return f"Error: {exc.strerror or exc}{where}: check free space and permissions"


MAX_LINE = 2000  # characters of an error line; a value echoed from a hostile file is cut


SPACES = re.compile(r"[ \t\n]+")  # what a message's lines are joined over; never a \r


def one_line(message: str) -> str:
    """`message` on one line (runs of spaces, tabs and newlines become one space), anything
    unsafe for a terminal (a file name's carriage return or ANSI escape, a bidirectional
    override) shown escaped by `printable`, and at most MAX_LINE characters."""
    line = printable(" ".join(SPACES.split(message[: MAX_LINE * 4].strip(" \t\n"))))
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def printable(text: str) -> str:
    """`text` safe for the terminal, by the rule the output follows too
    (`attnviz.render.cells.visible`): control characters escaped (`\\n`, `\\x1b`),
    bidirectional and zero-width characters shown as `U+202E`, `U+200B`."""
    from attnviz.render.cells import visible  # rich: only when a line is printed

    return visible(text)

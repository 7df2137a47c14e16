"""What the user typed, read and checked before any work: text, stdin, corpora, head lists."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import typer

from attnviz.errors import BadInput


def read_text(text: str | None) -> str:
    """The argument; else stdin when it is a pipe or a file; else the first sample sentence."""
    if text is not None:
        if not text.strip():
            raise BadInput("the text is empty: pass a sentence in quotes, or pipe one in")
        return utf8(text, "the text")
    if stdin_is_data():
        try:
            data = sys.stdin.read()
        except UnicodeDecodeError:
            raise not_utf8("standard input") from None
        if not data.strip():
            raise BadInput("standard input is empty: pipe in some text, or pass it as an argument")
        return utf8(data.strip(), "standard input")
    from attnviz.samples import default_sentence

    return default_sentence()


def utf8(text: str, where: str) -> str:
    """`text` if it is valid UTF-8 (undecodable bytes arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise not_utf8(where) from None
    return text


def not_utf8(where: str) -> BadInput:
    return BadInput(f"{where} is not valid UTF-8: convert it first, e.g. iconv -f latin1 -t utf-8")


IMAGE_OPTIONS = ("dpi", "cmap", "theme", "transparent", "annotate")


def check_image_options(ctx: typer.Context, out: Path | None) -> None:
    """Image options with no image to apply to would be silently ignored: say so instead."""
    from attnviz.output import IMAGE_SUFFIXES

    if out is not None and out.suffix.lower() in IMAGE_SUFFIXES:
        return
    given = [
        f"--{name}"
        for name in IMAGE_OPTIONS
        # compared by name: typer may carry its own copy of click's ParameterSource
        if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        fix = (
            "add --out FILE (.png, .svg or .pdf); the terminal uses its own palette"
            if out is None
            else f"{out.suffix} is not an image; drop the option or write .png, .svg or .pdf"
        )
        raise BadInput(f"{', '.join(given)} only {verb} to images: {fix}")


def stdin_is_data() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False  # no real stdin (e.g. a test runner): treat as a terminal
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def head_list(heads: str | None) -> list[int] | None:
    """`--heads 0,3,5` as numbers (checked against the model later)."""
    if heads is None:
        return None
    parts = [part.strip() for part in heads.split(",")]
    try:
        numbers = [int(part) for part in parts]
    except ValueError:
        raise BadInput(
            f"--heads {heads!r} is not a list of head numbers: write them comma-separated, "
            "e.g. --heads 0,3,5"
        ) from None
    return numbers


def exclude_list(exclude: str | None) -> list[str] | None:
    """`--exclude special,punct` as names (checked by the API)."""
    if exclude is None:
        return None
    return [part.strip() for part in exclude.split(",") if part.strip()] or [exclude]


def corpus(texts: list[str] | None, file: Path | None) -> list[str]:
    """The sentences: arguments and --file lines; else stdin lines; else the samples."""
    sentences = [utf8(t, "a sentence") for t in texts or [] if t.strip()]
    if texts and not sentences:
        raise BadInput("the sentences are empty: pass some text, or use --file")
    if file is not None:
        sentences += lines(file)
    elif not texts:
        if stdin_is_data():
            sentences = lines(Path("-"))
        else:
            from attnviz.samples import sample_sentences

            sentences = sample_sentences()
    return sentences


def lines(file: Path) -> list[str]:
    """The non-blank lines of a UTF-8 file ('-' is stdin)."""
    name = "standard input" if str(file) == "-" else str(file)
    try:
        data = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise not_utf8(name) from None
    except FileNotFoundError:
        raise BadInput(f"cannot read {name}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"cannot read {name}: it is a folder; give a text file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {name}: {exc.strerror or exc}") from None
    lines = [line.strip() for line in data.splitlines() if line.strip()]
    if not lines:
        raise BadInput(f"{name} has no sentences: write one sentence a line")
    return [utf8(line, name) for line in lines]

"""What the user typed, read and checked before any work: the request (text, stdin, pair and
how to read them), corpora, head lists, image options."""

from __future__ import annotations

import io
import itertools
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import typer

from attnviz.cli.options import GIVEN, Dtype, Engine, ImageOptions, Lang, Mask, Measure, Stack
from attnviz.errors import BadInput
from attnviz.limits import MAX_TEXT_BYTES, megabytes

if TYPE_CHECKING:
    from rich.console import Console

    from attnviz.output import ImageStyle


@dataclass(frozen=True)
class Request:
    """What a command analyses and how: the text (and its pair), the model, truncation, mask,
    cache, dtype and measure, as `attnviz.prepare` and `Prepared.analyse` take them."""

    text: str
    model: str | None = None
    truncate: bool = False
    pair: str | None = None
    mask: str = "none"  # "causal": a what-if mask
    cache: bool = True  # read and write the attention cache
    dtype: str = "float32"  # what the encoder computes in
    quiet: bool = False  # no notes on stderr
    from_stdin: bool = False  # the text was read from standard input
    measure: str = "weight"  # what the views draw (see attnviz.measures.contributions)
    max_tokens: int | None = None  # the longest input in pieces (None: the model's bound)
    bos: bool = True  # a decoder's start token in front (False: --no-bos, as typed)
    lang: str = "en"  # the language of titles, labels and pages (resolved: --lang or locale)
    load: Path | None = None  # --load FILE.npz: the attention comes from the file, no model
    engine: str = "auto"  # what computes the weights: auto, attnviz or transformers
    # An encoder-decoder's stack (None: cross), its target text, or new tokens it writes.
    stack: str | None = None
    target: str | None = None
    generate: int | None = None

    @property
    def encdec(self) -> bool:
        """Whether an encoder-decoder's options were given (--stack, --target, --generate)."""
        return self.stack is not None or self.target is not None or self.generate is not None


REQUEST_OPTIONS = ("text", "load", "model", "pair", "stack", "target", "generate", "mask",
                   "truncate", "max_tokens", "no_bos", "engine", "no_cache", "dtype", "measure",
                   "lang", "quiet")  # fmt: skip


def read_request(ctx: typer.Context) -> Request:
    """The command's `Request` from the options of `REQUEST_OPTIONS` it takes, by name, as
    `options.grouped` keeps them on the context. One it does not take has its default; --lang,
    on a command that has it, falls back on the locale's language (`language`). A command with
    no TEXT (`stats`, which reads a corpus) gets a request with no text."""
    given = ctx.meta[GIVEN]
    options = {name: given[name] for name in REQUEST_OPTIONS if name in given}
    if "lang" in options:
        options["lang"] = language(options["lang"])
    return request_from(**options, has_text="text" in given)


def language(lang: Lang | None) -> str:
    """--lang, or when not given the locale's language (LC_ALL, LC_MESSAGES, LANG)."""
    from attnviz.language import resolve_lang

    return resolve_lang(None if lang is None else lang.value)


def request_from(
    text: str | None = None,
    *,
    model: str | None = None,
    pair: str | None = None,
    truncate: bool = False,
    quiet: bool = False,
    max_tokens: int | None = None,
    mask: Mask = Mask.none,
    no_cache: bool = False,
    dtype: Dtype = Dtype.float32,
    measure: Measure = Measure.weight,
    no_bos: bool = False,
    lang: str = "en",
    stack: Stack | None = None,
    target: str | None = None,
    generate: int | None = None,
    engine: Engine = Engine.auto,
    load: Path | None = None,
    has_text: bool = True,
) -> Request:
    """A `Request` from the options, checked (see `read_text`); `lang` is resolved already
    (`language`). `load`: the attention is read from that .npz file, so there is no text (nor
    a model, a pair) to give, nor anything about computing it. `has_text` False: the command
    reads its own texts (no text is read here)."""
    if load is not None:
        named = (("TEXT", text), ("--model", model), ("--pair", pair), ("--stack", stack),
                 ("--target", target), ("--generate", generate), ("--max-tokens", max_tokens),
                 ("--mask", None if mask is Mask.none else mask),
                 ("--truncate", truncate or None), ("--no-bos", no_bos or None),
                 ("--engine", None if engine is Engine.auto else engine),
                 ("--dtype", None if dtype is Dtype.float32 else dtype),
                 ("--no-cache", no_cache or None))  # fmt: skip
        given = [name for name, value in named if value is not None]
        if given:
            raise BadInput(
                f"--load reads the tokens and the attention from the file: drop "
                f"{' and '.join(given)}, or drop --load to compute the attention"
            )
        return Request("", quiet=quiet, measure=measure.value, lang=lang, load=load)
    if pair is not None:
        if not pair.strip():
            raise BadInput("--pair is empty: pass the second sentence in quotes, or drop --pair")
        pair = utf8(pair, "--pair")
    if target is not None:
        if not target.strip():
            raise BadInput("--target is empty: pass the target text in quotes, or drop --target")
        target = utf8(target, "--target")
    from_stdin = has_text and text is None and stdin_is_data()
    return Request(
        read_text(text) if has_text else "",
        model=model,
        truncate=truncate,
        pair=pair,
        mask=mask.value,
        cache=not no_cache,
        dtype=dtype.value,
        quiet=quiet,
        from_stdin=from_stdin,
        measure=measure.value,
        max_tokens=max_tokens,
        bos=not no_bos,
        lang=lang,
        stack=None if stack is None else stack.value,
        target=target,
        generate=generate,
        engine=engine.value,
    )


def read_text(text: str | None) -> str:
    """The argument; else stdin when it is a pipe or a file; else the first sample sentence."""
    if text is not None:
        if not text.strip():
            raise BadInput("the text is empty: pass a sentence in quotes, or pipe one in")
        return utf8(text, "the text")
    if stdin_is_data():
        data = _stdin_text()
        if not data.strip():
            raise BadInput("standard input is empty: pipe in some text, or pass it as an argument")
        return utf8(data.strip(), "standard input")
    from attnviz.api import sample_sentences

    return sample_sentences()[0]


def _stdin_text() -> str:
    """Standard input decoded as UTF-8 whatever the locale, read no further than any model takes."""
    stream = getattr(sys.stdin, "buffer", None)
    try:
        data = stream.read(MAX_TEXT_BYTES + 1) if stream is not None else sys.stdin.read()
    except UnicodeDecodeError:
        raise not_utf8("standard input") from None
    except OSError as exc:
        raise BadInput(f"cannot read standard input: {exc.strerror or exc}") from None
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if len(data) > MAX_TEXT_BYTES:
        raise too_big("standard input")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise not_utf8("standard input") from None


def too_big(where: str) -> BadInput:
    return BadInput(
        f"{where} holds more than {megabytes(MAX_TEXT_BYTES)} of text, more than any model takes: "
        "pass the start of it (e.g. head -c 100000)"
    )


def utf8(text: str, where: str) -> str:
    """`text` if it is valid UTF-8 (undecodable bytes arrive as lone surrogates).

    In a locale that is not UTF-8 (LC_ALL=C without Python's UTF-8 mode) every
    non-ASCII byte of an argument arrives as a lone surrogate: its bytes are taken
    back from the locale's decoding and read as the UTF-8 they are.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return os.fsencode(text).decode("utf-8")
        except (UnicodeError, ValueError):
            raise not_utf8(where) from None
    return text


def not_utf8(where: str) -> BadInput:
    return BadInput(f"{where} is not valid UTF-8: convert it first, e.g. iconv -f latin1 -t utf-8")


IMAGE_OPTIONS = ("dpi", "cmap", "theme", "transparent", "annotate")


def check_image_options(ctx: typer.Context, out: Path | None) -> None:
    """Image options with no image to apply to would be silently ignored: say so instead."""
    from attnviz.output import HTML_SUFFIXES, IMAGE_SUFFIXES

    if out is not None and out.suffix.lower() in IMAGE_SUFFIXES:
        return
    page = out is not None and out.suffix.lower() in HTML_SUFFIXES
    given = [
        f"--{name}"
        for name in IMAGE_OPTIONS
        if given_on_command_line(ctx, name) and not (page and name == "theme")  # pages take it
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        fix = (
            "add --out FILE (.png, .svg or .pdf); the terminal uses its own palette"
            if out is None
            else f"{out.suffix} is not an image; drop the option or write .png, .svg or .pdf"
        )
        raise BadInput(f"{', '.join(given)} only {verb} to images: {fix}")


def image_style(ctx: typer.Context, out: Path | None, images: ImageOptions) -> ImageStyle:
    """The image options, refused when there is no image for them to apply to; a page
    follows the reader's theme unless --theme is given."""
    from attnviz.output import HTML_SUFFIXES, ImageStyle

    check_image_options(ctx, out)
    page = out is not None and out.suffix.lower() in HTML_SUFFIXES
    theme = images.theme.value
    if page and not given_on_command_line(ctx, "theme"):
        theme = "auto"  # the reader's setting
    return ImageStyle(images.dpi, images.cmap, theme, images.transparent, images.annotate)


@dataclass(frozen=True)
class Output:
    """Where a command's result goes: the terminal (`console`), the file --out names, drawn in
    the image `style` the image options give, and whether --json prints it as JSON."""

    console: Console
    out: Path | None
    style: ImageStyle
    as_json: bool = False


OUTPUT_OPTIONS = ("out", "show", "as_json", *IMAGE_OPTIONS)


def read_output(ctx: typer.Context) -> Output:
    """The command's `Output` from the options of `OUTPUT_OPTIONS` it takes, by name, as
    `options.grouped` keeps them on the context: an image option it cannot apply is refused."""
    given = ctx.meta[GIVEN]
    out = given.get("out")
    images = ImageOptions(**{name: given[name] for name in IMAGE_OPTIONS if name in given})
    console = terminal(out, given.get("show", False))
    return Output(console, out, image_style(ctx, out, images), given.get("as_json", False))


def terminal(out: Path | None = None, show: bool = False) -> Console:
    """The terminal; silent when the command writes --out instead, unless --show asks for both
    (JSON, notes and the `wrote` line are printed outside it)."""
    from rich.console import Console

    if show and out is None:
        raise BadInput(
            "{show} draws in the terminal as well as the file: pass {out}", param=("show", "out")
        )
    return Console(highlight=False, width=console_width(), quiet=out is not None and not show)


def given_on_command_line(ctx: typer.Context, name: str) -> bool:
    # compared by name: typer may carry its own copy of click's ParameterSource
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


MAX_COLUMNS = 4096  # wider than any terminal; past it COLUMNS is a mistake, not a width


def console_width() -> int | None:
    """The width to draw at when COLUMNS is set but unusable (0, negative, absurd): 80.

    None leaves it to rich (COLUMNS when sane, else the terminal's size, else 80). With
    COLUMNS=0 rich would draw every view at width 0: nothing at all, and exit 0.
    """
    raw = os.environ.get("COLUMNS", "").strip()
    if not raw:
        return None
    try:
        columns = int(raw)
    except ValueError:
        return 80
    return None if 1 <= columns <= MAX_COLUMNS else 80


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


def corpus(texts: list[str] | None, file: Path | None) -> Iterable[str]:
    """The sentences: arguments and --file lines; else stdin lines; else the samples.

    A file (or stdin) is read as it is used, a line at a time, so a corpus of any
    length takes the memory of the lines in use, never of the whole file.
    """
    sentences = [utf8(t, "a sentence") for t in texts or [] if t.strip()]
    if texts and not sentences:
        raise BadInput("the sentences are empty: pass some text, or use --file")
    if file is not None:
        return itertools.chain(sentences, lines(file))
    if not texts:
        if stdin_is_data():
            return lines(Path("-"))
        from attnviz.api import sample_sentences

        return sample_sentences()
    return sentences


def lines(file: Path) -> Iterator[str]:
    """The non-blank lines of a UTF-8 file ('-' is stdin), stripped, read as they are used.

    The file is opened here, so a missing or unreadable file is refused at once. A line
    longer than any model takes (MAX_TEXT_BYTES) is refused without reading the rest.
    """
    name = "standard input" if str(file) == "-" else str(file)
    try:
        if str(file) == "-":
            handle: BinaryIO = getattr(sys.stdin, "buffer", None) or io.BytesIO(
                sys.stdin.read().encode("utf-8", "surrogateescape")
            )
        else:
            handle = file.open("rb")
    except FileNotFoundError:
        raise BadInput(f"cannot read {name}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"cannot read {name}: it is a folder; give a text file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {name}: {exc.strerror or exc}") from None
    return _lines(handle, name, close=str(file) != "-")


def _lines(handle: BinaryIO, name: str, *, close: bool) -> Iterator[str]:
    found = False
    number = 0
    try:
        while True:
            try:
                raw = handle.readline(MAX_TEXT_BYTES + 1)
            except IsADirectoryError:
                raise BadInput(f"cannot read {name}: it is a folder; give a text file") from None
            except OSError as exc:
                raise BadInput(f"cannot read {name}: {exc.strerror or exc}") from None
            if not raw:
                break
            number += 1
            if len(raw) > MAX_TEXT_BYTES:
                raise too_big(f"line {number} of {name}")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise not_utf8(name) from None
            for line in text.splitlines():  # \r, \v, \f, U+2028 and the like end lines too
                if line.strip():
                    found = True
                    yield line.strip()
    finally:
        if close:
            handle.close()
    if not found:
        raise BadInput(f"{name} has no sentences: write one sentence a line")

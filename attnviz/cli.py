"""The `attnviz` command line: thin Typer commands over `attnviz.commands`.

Only typer and the standard library are imported at start-up, so `attnviz --help`
is instant; each command imports what it needs when it runs. Errors are one line
on stderr and an exit code (2 for bad arguments, 1 for failures while running);
`--debug` shows the traceback instead.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from attnviz import __version__
from attnviz.errors import AttnvizError, BadInput

if TYPE_CHECKING:
    from rich.console import Console

    from attnviz.commands import ImageOptions, Source


class _OneLineUsageErrors(TyperGroup):
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
            typer.echo(f"Error: {_one_line(message)}{where}", err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_OneLineUsageErrors,
    name="attnviz",
    help=(
        "Look inside transformer attention: heatmaps of a real BERT's attention weights, "
        "computed by a from-scratch multi-head attention, in the terminal or as images."
    ),
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Units(str, Enum):
    words = "words"
    tokens = "tokens"


class Theme(str, Enum):
    light = "light"
    dark = "dark"


class Mask(str, Enum):
    none = "none"
    causal = "causal"


class Dtype(str, Enum):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class SortColumn(str, Enum):
    layer = "layer"
    entropy = "entropy"
    cls = "cls"
    sep = "sep"
    punct = "punct"
    self_ = "self"
    prev = "prev"
    next_ = "next"


class View(str, Enum):
    show = "show"
    heads = "heads"


_debug = {"on": False}

TextArg = Annotated[
    str | None,
    typer.Argument(
        help="The sentence. Omitted: read from a pipe or file on stdin, else the first "
        "sample sentence.",
        show_default=False,
    ),
]
LayerOpt = Annotated[
    int, typer.Option("--layer", "-l", help="Layer, 0-based; negative counts from the end.")
]
HeadOpt = Annotated[
    int | None,
    typer.Option("--head", help="Head, 0-based; negative counts from the end. Default: mean."),
]
UnitsOpt = Annotated[
    Units, typer.Option("--units", "-u", help="Whole words (pieces merged) or raw word pieces.")
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Local folder or Hugging Face Hub id. Default: $ATTNVIZ_MODEL, else the embedded "
        "all-MiniLM-L6-v2.",
        show_default=False,
    ),
]
TruncateOpt = Annotated[
    bool, typer.Option("--truncate", help="Keep the first positions of a text that is too long.")
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="Also write an image: .png, .svg or .pdf."),
]
DpiOpt = Annotated[int, typer.Option("--dpi", help="Image resolution in dots per inch (10..1200).")]
CmapOpt = Annotated[str, typer.Option("--cmap", help="Image colormap: any matplotlib name.")]
ThemeOpt = Annotated[Theme, typer.Option("--theme", help="Image background.")]
TransparentOpt = Annotated[
    bool, typer.Option("--transparent", help="Image with a transparent background.")
]
AnnotateOpt = Annotated[
    bool, typer.Option("--annotate", help="Write the values in the image's cells when they fit.")
]
PairOpt = Annotated[
    str | None,
    typer.Option(
        "--pair",
        help="A second sentence B: the model reads [CLS] A [SEP] B [SEP] with token types; "
        "labels mark B's first word with B:.",
        show_default=False,
    ),
]
MaskOpt = Annotated[
    Mask,
    typer.Option(
        "--mask",
        help="What-if: 'causal' lets each token see only itself and earlier tokens "
        "(the model is modified; titles say so). 'none' is the real model.",
    ),
]
HeadsOpt = Annotated[
    str | None,
    typer.Option(
        "--heads",
        help="Only these heads, comma-separated (e.g. 0,3,5; negative counts from the end).",
        show_default=False,
    ),
]
DtypeOpt = Annotated[
    Dtype,
    typer.Option(
        "--dtype",
        help="What the encoder computes in. Half-precision weights are computed in float32 "
        "unless this asks otherwise.",
    ),
]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Compute afresh; don't read or write the attention cache (also ATTNVIZ_NO_CACHE=1).",
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"attnviz {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Look inside transformer attention."""
    _debug["on"] = debug


@contextlib.contextmanager
def _errors(debug: bool) -> Iterator[None]:
    """Turn failures into one line on stderr and an exit code (unless debugging)."""
    debug = debug or _debug["on"]
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except AttnvizError as exc:
        if debug:
            raise
        typer.echo(f"Error: {_one_line(str(exc))}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        raise typer.Exit(130) from None
    except BrokenPipeError:
        raise typer.Exit(_silence_stdout()) from None
    except OSError as exc:
        if debug:
            raise
        typer.echo(_os_error_line(exc), err=True)
        raise typer.Exit(1) from None
    except Exception as exc:
        if debug:
            raise
        typer.echo(
            f"Error: unexpected {type(exc).__name__}: {_one_line(str(exc))[:200]} "
            "(rerun with --debug for the traceback, and please report it)",
            err=True,
        )
        raise typer.Exit(1) from None


def _silence_stdout() -> int:
    """The reader went away (`attnviz show --json | head`): stop quietly, code 141."""
    with contextlib.suppress(Exception):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141


def _os_error_line(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"Error: {exc.strerror or exc}{where}: check free space and permissions"


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _read_text(text: str | None) -> str:
    """The argument; else stdin when it is a pipe or a file; else the first sample sentence."""
    if text is not None:
        if not text.strip():
            raise BadInput("the text is empty: pass a sentence in quotes, or pipe one in")
        return _utf8(text, "the text")
    if _stdin_is_data():
        try:
            data = sys.stdin.read()
        except UnicodeDecodeError:
            raise _not_utf8("standard input") from None
        if not data.strip():
            raise BadInput("standard input is empty: pipe in some text, or pass it as an argument")
        return _utf8(data.strip(), "standard input")
    from attnviz.samples import default_sentence

    return default_sentence()


def _utf8(text: str, where: str) -> str:
    """`text` if it is valid UTF-8 (undecodable bytes arrive as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _not_utf8(where) from None
    return text


def _not_utf8(where: str) -> BadInput:
    return BadInput(f"{where} is not valid UTF-8: convert it first, e.g. iconv -f latin1 -t utf-8")


IMAGE_OPTIONS = ("dpi", "cmap", "theme", "transparent", "annotate")


def _check_image_options(ctx: typer.Context, out: Path | None) -> None:
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
            else f"{out.suffix} holds raw data; drop the option or write an image instead"
        )
        raise BadInput(f"{', '.join(given)} only {verb} to images: {fix}")


def _stdin_is_data() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False  # no real stdin (e.g. a test runner): treat as a terminal
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def _source(
    text: str | None,
    model: str | None,
    truncate: bool,
    pair: str | None = None,
    mask: Mask = Mask.none,
    no_cache: bool = False,
    dtype: Dtype = Dtype.float32,
) -> Source:
    from attnviz.cache import cache_enabled
    from attnviz.commands import Source

    if pair is not None:
        if not pair.strip():
            raise BadInput("--pair is empty: pass the second sentence in quotes, or drop --pair")
        pair = _utf8(pair, "--pair")
    cache = cache_enabled(no_cache)
    return Source(_read_text(text), model, truncate, pair, mask is Mask.causal, cache, dtype.value)


def _head_list(heads: str | None) -> list[int] | None:
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


def _images(
    ctx: typer.Context,
    out: Path | None,
    dpi: int,
    cmap: str,
    theme: Theme,
    transparent: bool,
    annotate: bool,
) -> ImageOptions:
    """The image options, refused when there is no image for them to apply to."""
    from attnviz.commands import ImageOptions

    _check_image_options(ctx, out)
    return ImageOptions(dpi, cmap, theme.value, transparent, annotate)


@app.command()
def show(
    ctx: typer.Context,
    text: TextArg = None,
    layer: LayerOpt = -1,
    head: HeadOpt = None,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: OutOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the matrix as JSON instead of a heatmap.")
    ] = False,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """One heatmap: who attends to whom in one layer (one head, or the mean of all heads).

    Rows are queries (the token that attends), columns are keys; each row sums to 1.

    [bold]Example:[/bold] attnviz show "Vi João e Maria ontem. Eles estavam juntos." --layer 2
    """
    with _errors(debug):
        from attnviz import commands

        commands.show(
            _console(),
            _source(text, model, truncate, pair, mask, no_cache, dtype),
            layer=layer,
            head=head,
            words=units is Units.words,
            out=out,
            as_json=as_json,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
        )


@app.command()
def heads(
    ctx: typer.Context,
    text: TextArg = None,
    layer: LayerOpt = -1,
    heads: HeadsOpt = None,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: OutOpt = None,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Every head of one layer, side by side as small heatmaps on one colour scale.

    [bold]Example:[/bold] attnviz heads --layer 3
    """
    with _errors(debug):
        from attnviz import commands

        commands.heads(
            _console(),
            _source(text, model, truncate, pair, mask, no_cache, dtype),
            layer=layer,
            words=units is Units.words,
            out=out,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
            subset=_head_list(heads),
        )


@app.command("model")
def model_view(
    ctx: typer.Context,
    text: TextArg = None,
    heads: HeadsOpt = None,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: OutOpt = None,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The whole model at a glance: every layer (rows) and head (columns) as small heatmaps.

    [bold]Example:[/bold] attnviz model "O trem estava cheio." --heads 0,1,2 --out model.png
    """
    with _errors(debug):
        from attnviz import commands

        commands.model_view(
            _console(),
            _source(text, model, truncate, pair, mask, no_cache, dtype),
            words=units is Units.words,
            out=out,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
            subset=_head_list(heads),
        )


class Lang(str, Enum):
    en = "en"
    pt = "pt"


@app.command()
def explain(
    text: TextArg = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            "-t",
            help="The query: a word of the text, any case (ele#2 for its second occurrence).",
            show_default=False,
        ),
    ] = None,
    index: Annotated[
        int | None,
        typer.Option(
            "--index",
            "-i",
            help="The query as a piece index, as 'attnviz tokens' numbers them.",
            show_default=False,
        ),
    ] = None,
    layer: LayerOpt = -1,
    head: Annotated[int, typer.Option("--head", help="Head, 0-based; negative from the end.")] = 0,
    lang: Annotated[
        Lang | None,
        typer.Option(
            "--lang",
            help="Language of the explanation. Default: pt when $LANG starts with pt, else en.",
            show_default=False,
        ),
    ] = None,
    model: ModelOpt = None,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """How one token's attention is computed, step by step, on the real weights.

    Embeddings, Q/K/V projections, the split into heads, scores q·k, the 1/√d_k scale,
    the mask, softmax, the weighted sum of values (with each key's contribution norm,
    Kobayashi et al. 2020), the join of heads and the output projection.

    [bold]Example:[/bold] attnviz explain "João pensou: O trem estava cheio, mas ele
    conseguiu uma cadeira livre." --token ele --layer 5 --head 0 --lang pt
    """
    with _errors(debug):
        from attnviz import commands
        from attnviz.i18n import default_lang

        if (token is None) == (index is None):
            raise BadInput(
                "say which token to explain: pass --token WORD or --index N (not both); "
                "'attnviz tokens TEXT' lists them"
            )
        commands.explain(
            _console(),
            _source(text, model, truncate, pair, mask),
            token=token,
            index=index,
            layer=layer,
            head=head,
            lang=lang.value if lang is not None else default_lang(),
        )


@app.command()
def rollout(
    ctx: typer.Context,
    text: TextArg = None,
    upto: Annotated[
        int,
        typer.Option(
            "--upto", help="Chain layers 0..UPTO (inclusive); negative counts from the end."
        ),
    ] = -1,
    top: Annotated[int, typer.Option("--top", help="Inputs listed for each token.", min=1)] = 3,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: OutOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print {"tokens", "rollout"} as JSON instead of a heatmap.'),
    ] = False,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Attention rollout (Abnar & Zuidema 2020): attention chained through the layers.

    Each layer's head mean is mixed half-and-half with the identity (the residual
    connection), rows renormalised, and the layers multiplied: row i says how much
    token i, after layer UPTO, draws from each input token.

    [bold]Example:[/bold] attnviz rollout "O trem estava cheio, mas ele conseguiu uma cadeira."
    """
    with _errors(debug):
        from attnviz import commands

        commands.rollout(
            _console(),
            _source(text, model, truncate, pair, mask, no_cache, dtype),
            upto=upto,
            words=units is Units.words,
            top=top,
            out=out,
            as_json=as_json,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
        )


@app.command()
def stats(
    ctx: typer.Context,
    texts: Annotated[
        list[str] | None,
        typer.Argument(
            help="Sentences. Omitted: --file, else lines from a pipe, else the sample sentences.",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="A UTF-8 text file, one sentence a line ('-' for stdin)."
        ),
    ] = None,
    sort: Annotated[
        SortColumn, typer.Option("--sort", help="Order heads by this column.")
    ] = SortColumn.layer,
    top: Annotated[
        int | None, typer.Option("--top", help="Show only the first N heads.", min=1)
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of per-head records.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Also write one figure, a panel per statistic: .png/.svg/.pdf."
        ),
    ] = None,
    model: ModelOpt = None,
    truncate: TruncateOpt = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Sentences per padded batch.", min=1)
    ] = 32,
    device: Annotated[
        Device,
        typer.Option("--device", help="Where batches run; auto takes CUDA when present."),
    ] = Device.auto,
    threads: Annotated[
        int | None,
        typer.Option("--threads", help="CPU threads for torch. Default: torch's own.", min=1),
    ] = None,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019): what each head looks at.

    For every layer and head: mean attention entropy (nats) and the mean weight on [CLS],
    [SEP], punctuation, the token itself, the previous and the next token, over every
    query position of every sentence; each head is labelled by its dominant pattern
    (a share above 0.5, e.g. "previous-token"; else "broad" or "mixed").

    [bold]Example:[/bold] attnviz stats --file corpus.txt --sort prev --top 10
    """
    with _errors(debug):
        from attnviz import commands

        if annotate:
            raise BadInput("--annotate does not apply to the statistics figure: drop it")
        commands.stats(
            _console(),
            _corpus(texts, file),
            model=model,
            truncate=truncate,
            sort=sort.value,
            top=top,
            as_json=as_json,
            out=out,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
            batching=commands.BatchOptions(batch_size, device.value, threads, dtype.value),
        )


def _corpus(texts: list[str] | None, file: Path | None) -> list[str]:
    """The sentences: arguments and --file lines; else stdin lines; else the samples."""
    sentences = [_utf8(t, "a sentence") for t in texts or [] if t.strip()]
    if texts and not sentences:
        raise BadInput("the sentences are empty: pass some text, or use --file")
    if file is not None:
        sentences += _lines(file)
    elif not texts:
        if _stdin_is_data():
            sentences = _lines(Path("-"))
        else:
            from attnviz.samples import sample_sentences

            sentences = sample_sentences()
    return sentences


def _lines(file: Path) -> list[str]:
    """The non-blank lines of a UTF-8 file ('-' is stdin)."""
    name = "standard input" if str(file) == "-" else str(file)
    try:
        data = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _not_utf8(name) from None
    except FileNotFoundError:
        raise BadInput(f"cannot read {name}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"cannot read {name}: it is a folder; give a text file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {name}: {exc.strerror or exc}") from None
    lines = [line.strip() for line in data.splitlines() if line.strip()]
    if not lines:
        raise BadInput(f"{name} has no sentences: write one sentence a line")
    return [_utf8(line, name) for line in lines]


@app.command()
def tokens(
    text: TextArg = None,
    model: ModelOpt = None,
    pair: PairOpt = None,
    truncate: TruncateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The word pieces of the text: index, piece, vocabulary id, word, character span.

    [bold]Example:[/bold] attnviz tokens "João pensou: O trem estava cheio."
    """
    with _errors(debug):
        from attnviz import commands

        commands.tokens(_console(), _source(text, model, truncate, pair))


@app.command()
def info(model: ModelOpt = None, debug: DebugOpt = False) -> None:
    """The model: family, layers, heads, sizes, parameters, where it was loaded from.

    [bold]Example:[/bold] attnviz info --model ./my-finetuned-bert
    """
    with _errors(debug):
        from attnviz import commands

        commands.info(_console(), model)


@app.command()
def export(
    ctx: typer.Context,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output: .png/.svg/.pdf (an image of --view) or .npz/.json (data).",
            show_default=False,
        ),
    ],
    text: TextArg = None,
    view: Annotated[View, typer.Option("--view", help="The view an image draws.")] = View.show,
    layer: LayerOpt = -1,
    head: HeadOpt = None,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    dpi: DpiOpt = 200,
    cmap: CmapOpt = "viridis",
    theme: ThemeOpt = Theme.light,
    transparent: TransparentOpt = False,
    annotate: AnnotateOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Save a view as an image, or every layer's raw attention as data.

    .npz holds attentions float32 (layers, heads, T, T) over the model's own pieces, tokens and
    input_ids; .json holds the same as lists.

    [bold]Example:[/bold] attnviz export "O banco negou o empréstimo." --out banco.npz
    """
    with _errors(debug):
        from attnviz import commands

        commands.export(
            _source(text, model, truncate, pair, mask, no_cache, dtype),
            out=out,
            view=view.value,
            layer=layer,
            head=head,
            words=units is Units.words,
            images=_images(ctx, out, dpi, cmap, theme, transparent, annotate),
        )


cache_app = typer.Typer(
    name="cache",
    help="The attention cache: computed attentions kept as .npz so a view seen before "
    "draws without torch. Folder: $ATTNVIZ_CACHE_DIR, else $XDG_CACHE_HOME/attnviz, else "
    "~/.cache/attnviz; size: $ATTNVIZ_CACHE_MB (default 512).",
    no_args_is_help=True,
)
app.add_typer(cache_app)


@cache_app.command("info")
def cache_info(debug: DebugOpt = False) -> None:
    """Where the cache is, how many entries and megabytes it holds, and its limit.

    [bold]Example:[/bold] attnviz cache info
    """
    with _errors(debug):
        from attnviz import commands

        commands.cache_info(_console())


@cache_app.command("clear")
def cache_clear(debug: DebugOpt = False) -> None:
    """Delete every cached attention (only the cache's own files).

    [bold]Example:[/bold] attnviz cache clear
    """
    with _errors(debug):
        from attnviz import commands

        commands.cache_clear(_console())


def main() -> None:
    """Console-script entry point.

    Commands report their own errors; this catches what happens outside them,
    such as `attnviz --help > /dev/full`.
    """
    try:
        app()
    except BrokenPipeError:
        sys.exit(_silence_stdout())
    except OSError as exc:
        print(_os_error_line(exc), file=sys.stderr)
        sys.exit(1)

"""The `attnviz` commands and their options, as Typer declares them.

Only typer and the standard library are imported at start-up, so `attnviz --help` is
instant. Each command lists its options (the shared ones and their groups in `options`, a
command's own in `command_options`), reads its request from them by name
(`input.read_request`), and calls the `run` of its own module (`attnviz.cli.show.run`, ...),
imported when it runs, which calls the public API and prints. Failures become one line and
an exit code in `errors`; `lazy` and `help` keep `--help` light.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnviz import __version__
from attnviz.cli import command_options as own
from attnviz.cli import options as opt
from attnviz.cli.errors import (
    debug_all,
    failures,
    os_error_line,
    replace_unencodable,
    silence_stdout,
)
from attnviz.cli.help import import_rich_help
from attnviz.cli.input import (
    console_width,
    corpus,
    exclude_list,
    head_list,
    image_style,
    language,
    read_request,
)
from attnviz.cli.lazy import lazy_group
from attnviz.cli.options import grouped
from attnviz.errors import BadInput
from attnviz.perf import import_quietly

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


# The commands are declared on `catalogue` and built only when one runs (see `lazy`).
catalogue = typer.Typer(pretty_exceptions_enable=False)


def command(
    name: str | None = None, on: typer.Typer = catalogue
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare a command on the catalogue (or `on` a group of it), its option groups spelled out
    (`options.grouped`), its body run by `_running` with the command's --debug."""

    def declare(function: Callable[..., None]) -> Callable[..., None]:
        body = grouped(function)

        @functools.wraps(body)
        def running(**values: Any) -> None:
            with _running(values["debug"]):
                body(**values)

        return on.command(name)(running)

    return declare


app = typer.Typer(
    cls=lazy_group(catalogue),
    name="attnviz",
    help=(
        "Look inside transformer attention: heatmaps of the attention weights of a real "
        "encoder (BERT family) or decoder (GPT-2, Llama, Mistral, Qwen2), computed by a "
        "from-scratch multi-head attention, in the terminal or as images."
    ),
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
    debug: opt.DebugOpt = False,
) -> None:
    """Look inside transformer attention."""
    debug_all["on"] = debug


@contextlib.contextmanager
def _running(debug: bool) -> Iterator[None]:
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


def _console(out: Path | None = None, show: bool = False) -> Console:
    """The terminal; silent when the command writes --out instead, unless --show asks for both
    (JSON, notes and the `wrote` line are printed outside it)."""
    from rich.console import Console

    if show and out is None:
        raise BadInput(
            "{show} draws in the terminal as well as the file: pass {out}", param=("show", "out")
        )
    return Console(highlight=False, width=console_width(), quiet=out is not None and not show)


@command()
def show(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    layer: opt.LayerOpt = -1,
    head: opt.HeadOpt = None,
    units: opt.UnitsOpt = opt.Units.words,
    model: opt.ModelOpt = None,
    out: opt.OutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.ShowJsonOpt = False,
    query: own.ShowQueryOpt = None,
    exclude: opt.ExcludeOpt = None,
    measure: opt.MeasureOpt = opt.Measure.weight,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    pooling: opt.PoolOptions = opt.POOLING,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """One heatmap: who attends to whom in one layer (one head, or the mean of all heads).

    Rows are queries (the token that attends), columns are keys; each row sums to 1.
    --query WORD prints that word's row as a sorted list instead.

    [bold]Example:[/bold] attnviz show "Vi João e Maria ontem. Eles estavam juntos." --layer 2
    """
    from attnviz.cli.show import run

    run(
        _console(out, show),
        read_request(ctx),
        layer=layer,
        head=head,
        units=units.value,
        out=out,
        as_json=as_json,
        style=image_style(ctx, out, images),
        query=query,
        exclude=exclude_list(exclude),
        pool=pooling.pool,
        pool_by=pooling.pool_by.value,
    )


@command()
def heads(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    layer: opt.LayerOpt = -1,
    heads: opt.HeadsOpt = None,
    units: opt.UnitsOpt = opt.Units.words,
    exclude: opt.ExcludeOpt = None,
    measure: opt.MeasureOpt = opt.Measure.weight,
    model: opt.ModelOpt = None,
    out: opt.OutOpt = None,
    show: opt.ShowOpt = False,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    pooling: opt.PoolOptions = opt.POOLING,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Every head of one layer, side by side as small heatmaps on one colour scale.

    [bold]Example:[/bold] attnviz heads --layer 3
    """
    from attnviz.cli.heads import run

    run(
        _console(out, show),
        read_request(ctx),
        layer=layer,
        units=units.value,
        out=out,
        style=image_style(ctx, out, images),
        subset=head_list(heads),
        exclude=exclude_list(exclude),
        pool=pooling.pool,
        pool_by=pooling.pool_by.value,
    )


@command("model")
def model_view(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    heads: opt.HeadsOpt = None,
    units: opt.UnitsOpt = opt.Units.words,
    exclude: opt.ExcludeOpt = None,
    measure: opt.MeasureOpt = opt.Measure.weight,
    model: opt.ModelOpt = None,
    out: opt.OutOpt = None,
    show: opt.ShowOpt = False,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    pooling: opt.PoolOptions = opt.POOLING,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """The whole model at a glance: every layer (rows) and head (columns) as small heatmaps.

    A long input (or --pool N) is drawn in blocks of pieces, computed a block at a time.

    [bold]Example:[/bold] attnviz model "O trem estava cheio." --heads 0,1,2 --out model.png
    """
    from attnviz.cli.model_view import run

    run(
        _console(out, show),
        read_request(ctx),
        units=units.value,
        out=out,
        style=image_style(ctx, out, images),
        subset=head_list(heads),
        exclude=exclude_list(exclude),
        pool=pooling.pool,
        pool_by=pooling.pool_by.value,
    )


@command()
def distance(
    ctx: typer.Context,
    text: opt.TextArg = None,
    layer: own.DistanceLayerOpt = None,
    model: opt.ModelOpt = None,
    out: opt.OutOpt = None,
    show: opt.ShowOpt = False,
    truncate: opt.TruncateOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    cmap: opt.CmapOpt = "viridis",
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Where each head looks, by distance: the share of its weight 0, 1, 2, 3–4, 5–8, ...
    pieces back, its sink share and its kind (self, previous, local, global, sink).

    Computed a block of queries at a time: for inputs up to 16,384 pieces.

    [bold]Example:[/bold] attnviz distance < long.txt --out distance.png
    """
    from attnviz.cli.distance import run

    run(_console(out, show), read_request(ctx), layers=layer, out=out, cmap=cmap)


@command()
def explain(
    ctx: typer.Context,
    text: opt.TextArg = None,
    token: own.ExplainTokenOpt = None,
    index: own.ExplainIndexOpt = None,
    layer: opt.LayerOpt = -1,
    head: own.ExplainHeadOpt = 0,
    lang: own.ExplainLangOpt = None,
    model: opt.ModelOpt = None,
    pair: opt.PairOpt = None,
    mask: opt.MaskOpt = opt.Mask.none,
    truncate: opt.TruncateOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    quiet: opt.QuietOpt = False,
    debug: opt.DebugOpt = False,
) -> None:
    """How one token's attention is computed, step by step, on the real weights.

    Embeddings, Q/K/V projections, the split into heads, scores q·k, the 1/√d_k scale,
    the mask, softmax, the weighted sum of values (with each key's contribution norm,
    Kobayashi et al. 2020), the join of heads and the output projection.

    [bold]Example:[/bold] attnviz explain "João pensou: O trem estava cheio, mas ele
    conseguiu uma cadeira livre." --token ele --layer 5 --head 0 --lang pt
    """
    if (token is None) == (index is None):
        raise BadInput(
            "say which token to explain: pass --token WORD or --index N (not both); "
            "'attnviz tokens TEXT' lists them"
        )
    from attnviz.cli.explain import run

    run(_console(), read_request(ctx), token=token, index=index, layer=layer, head=head)


@command()
def rollout(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    upto: own.RolloutUptoOpt = -1,
    top: own.RolloutTopOpt = 3,
    units: opt.UnitsOpt = opt.Units.words,
    exclude: opt.ExcludeOpt = None,
    measure: opt.MeasureOpt = opt.Measure.weight,
    method: own.RolloutMethodOpt = opt.Method.rollout,
    model: opt.ModelOpt = None,
    out: opt.ImageOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.RolloutJsonOpt = False,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Attention rollout (Abnar & Zuidema 2020): attention chained through the layers.

    Each layer's head mean is mixed half-and-half with the identity (the residual
    connection), rows renormalised, and the layers multiplied: row i says how much
    token i, after layer UPTO, draws from each input token.

    [bold]Example:[/bold] attnviz rollout "O trem estava cheio, mas ele conseguiu uma cadeira."
    """
    from attnviz.cli.rollout import run

    run(
        _console(out, show),
        read_request(ctx),
        upto=upto,
        units=units.value,
        top=top,
        out=out,
        as_json=as_json,
        style=image_style(ctx, out, images),
        exclude=exclude_list(exclude),
        method=method.value,
    )


@command()
def find(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    source: own.FindSourceOpt = ...,  # type: ignore[assignment]
    to: own.FindToOpt = ...,  # type: ignore[assignment]
    top: own.FindTopOpt = 10,
    units: opt.UnitsOpt = opt.Units.words,
    exclude: opt.ExcludeOpt = None,
    model: opt.ModelOpt = None,
    out: own.FindOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.FindJsonOpt = False,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Which heads link two words: every layer and head ranked by the weight from one to the other.

    For each head: the weight, the rank of the target among the query's keys, the query's
    top key when it is another word, and how many other words attend to the target more
    (many: a broad column, not a link between the two).

    [bold]Example:[/bold] attnviz find "John thought: the train was full, but he found a free
    seat." --from he --to John
    """
    from attnviz.cli.find import run

    run(
        _console(out, show),
        read_request(ctx),
        source=source,
        target=to,
        top=top,
        units=units.value,
        out=out,
        as_json=as_json,
        style=image_style(ctx, out, images),
        exclude=exclude_list(exclude),
    )


@command("compare-measures")
def compare_measures(
    ctx: typer.Context,
    text: opt.TextArg = None,
    query: own.CompareQueryOpt = "",
    layer: opt.LayerOpt = -1,
    top: own.CompareTopOpt = 5,
    units: opt.UnitsOpt = opt.Units.words,
    model: opt.ModelOpt = None,
    out: opt.ImageOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.CompareJsonOpt = False,
    pair: opt.PairOpt = None,
    mask: opt.MaskOpt = opt.Mask.none,
    truncate: opt.TruncateOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    no_cache: opt.NoCacheOpt = False,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """One query, every measure: how the weight, the norm, norm-res-ln, ALTI and value
    zeroing rank its keys, side by side, and where they disagree.

    [bold]Example:[/bold] attnviz compare-measures --query he --layer 3
    """
    if not query.strip():
        raise BadInput("say which query to compare: pass --query WORD")
    from attnviz.cli.compare import run

    run(
        _console(out, show),
        read_request(ctx),
        query=query,
        layer=layer,
        top=top,
        units=units.value,
        out=out,
        as_json=as_json,
        style=image_style(ctx, out, images),
    )


@command()
def stats(
    ctx: typer.Context,
    texts: own.StatsTextsArg = None,
    file: own.StatsFileOpt = None,
    sort: own.StatsSortOpt = opt.SortColumn.layer,
    top: own.StatsTopOpt = None,
    as_json: own.StatsJsonOpt = False,
    out: own.StatsOutOpt = None,
    show: opt.ShowOpt = False,
    exclude: opt.ExcludeOpt = None,
    model: opt.ModelOpt = None,
    truncate: opt.TruncateOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    batch_size: own.StatsBatchSizeOpt = 32,
    device: own.StatsDeviceOpt = opt.Device.auto,
    threads: own.StatsThreadsOpt = None,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    own_scales: own.StatsOwnScalesOpt = False,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019): what each head looks at.

    For every layer and head: mean attention entropy (nats) and the mean weight on [CLS],
    [SEP], punctuation, the token itself, the previous and the next token, over every
    query position of every sentence; each head is labelled by its dominant pattern
    (a share above 0.5, e.g. "previous-token"; else "broad" or "mixed"). A decoder has
    no [CLS], [SEP] or next token in view: its columns are the first token (the
    "attention sink", its BOS when the tokenizer adds one), punctuation, itself and the
    previous token, over every query but the first, which sees only itself.

    [bold]Example:[/bold] attnviz stats --file corpus.txt --sort prev --top 10
    """
    if images.annotate:
        raise BadInput("--annotate does not apply to the statistics figure: drop it")
    from attnviz.cli.stats import BatchOptions, run

    run(
        _console(out, show),
        corpus(texts, file),
        model=model,
        truncate=truncate,
        sort=sort.value,
        top=top,
        as_json=as_json,
        out=out,
        style=image_style(ctx, out, images),
        batching=BatchOptions(batch_size, device.value, threads, dtype.value),
        quiet=ending.quiet,
        shared_scale=not own_scales,
        max_tokens=max_tokens,
        bos=not no_bos,
        lang=language(ending.lang),
        engine=engine.value,
        exclude=exclude_list(exclude),
    )


@command()
def tokens(
    ctx: typer.Context,
    text: opt.TextArg = None,
    model: opt.ModelOpt = None,
    pair: opt.PairOpt = None,
    truncate: opt.TruncateOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """The word pieces of the text: index, piece, vocabulary id, word, character span.

    [bold]Example:[/bold] attnviz tokens "João pensou: O trem estava cheio."
    """
    from attnviz.cli.tokens import run

    run(_console(), read_request(ctx))


@command()
def info(
    model: opt.ModelOpt = None, engine: opt.EngineOpt = opt.Engine.auto, debug: opt.DebugOpt = False
) -> None:
    """The model: family, layers, heads, sizes, parameters, where it was loaded from.

    [bold]Example:[/bold] attnviz info --model ./my-finetuned-bert
    """
    from attnviz.cli.info import run

    run(_console(), model, engine=engine.value)


@command()
def generate(
    ctx: typer.Context,
    text: opt.TextArg = None,
    max_new: own.GenerateMaxNewOpt = 20,
    sample: own.GenerateSampleOpt = False,
    temperature: own.GenerateTemperatureOpt = 1.0,
    top_k: own.GenerateTopKOpt = None,
    seed: own.GenerateSeedOpt = None,
    layer: opt.LayerOpt = -1,
    head: opt.HeadOpt = None,
    lens: own.GenerateLensOpt = False,
    model: opt.ModelOpt = None,
    out: own.GenerateOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.GenerateJsonOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    engine: opt.EngineOpt = opt.Engine.auto,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    images: opt.ImageOptions = opt.IMAGES,
    quiet: opt.QuietOpt = False,
    debug: opt.DebugOpt = False,
) -> None:
    """A decoder writes after TEXT; then what each new token attended to.

    Prints the continuation as it is written, then one row per new token over the prompt
    and the tokens written before it (one head with --head, else the mean of the heads).
    Needs a decoder (GPT-2, Llama, Mistral, Qwen2) with its LM head, given by --model.

    [bold]Example:[/bold] attnviz generate "Once upon a time" --max-new 20 --model ./smollm2
    """
    from attnviz.cli.generate import run

    run(
        _console(out, show),
        read_request(ctx),
        max_new=max_new,
        sample=sample,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        layer=layer,
        head=head,
        lens=lens,
        out=out,
        as_json=as_json,
        style=image_style(ctx, out, images),
    )


@command()
def export(
    ctx: typer.Context,
    out: own.ExportOutOpt,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    view: own.ExportViewOpt = opt.View.show,
    layer: opt.LayerOpt = -1,
    head: opt.HeadOpt = None,
    units: opt.UnitsOpt = opt.Units.words,
    measure: opt.MeasureOpt = opt.Measure.weight,
    model: opt.ModelOpt = None,
    reading: opt.ReadingOptions = opt.READING,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Save a view as an image, or every layer's raw attention as data.

    .npz holds attentions float32 (layers, heads, T, T) over the model's own pieces, tokens and
    input_ids; .json holds the same as lists.

    [bold]Example:[/bold] attnviz export "O banco negou o empréstimo." --out banco.npz
    """
    from attnviz.cli.export import run

    run(
        read_request(ctx),
        out=out,
        view=view.value,
        layer=layer,
        head=head,
        units=units.value,
        style=image_style(ctx, out, images),
    )


@command()
def ablate(
    ctx: typer.Context,
    prompt: own.AblatePromptArg,
    target: own.AblateTargetOpt,
    foil: own.AblateFoilOpt,
    method: own.AblateMethodOpt = own.AblateMethod.zero,
    patch: own.AblatePatchOpt = None,
    layer: own.AblateLayerOpt = None,
    model: opt.ModelOpt = None,
    out: own.AblateOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.AblateJsonOpt = False,
    max_tokens: opt.MaxTokensOpt = None,
    no_bos: opt.NoBosOpt = False,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    images: opt.ImageOptions = opt.IMAGES,
    quiet: opt.QuietOpt = False,
    debug: opt.DebugOpt = False,
) -> None:
    """A head's effect on a decoder's next token: logit(target) − logit(foil), each head removed.

    Every head (or --layer's) in turn, ranked by the change; --patch runs a corrupted prompt
    with each head's clean output patched in. Needs a decoder with its LM head (--model).

    [bold]Example:[/bold] attnviz ablate "Mary met John, and he gave the bag to" --target Mary
    --foil John --model gemma-3-270m
    """
    from attnviz.cli.ablate import run

    run(_console(out, show), prompt, target=target, foil=foil, method=method.value, patch=patch,
        layer=layer, model=model, out=out, as_json=as_json, max_tokens=max_tokens, bos=not no_bos,
        dtype=dtype.value, quiet=quiet, style=image_style(ctx, out, images))  # fmt: skip


cache_app = typer.Typer(
    name="cache",
    help="The attention cache: computed attentions kept as .npz so a view seen before "
    "draws without torch. Folder: $ATTNVIZ_CACHE_DIR, else $XDG_CACHE_HOME/attnviz, else "
    "~/.cache/attnviz; size: $ATTNVIZ_CACHE_MB (default 512).",
    no_args_is_help=True,
)
catalogue.add_typer(cache_app)


@command("info", on=cache_app)
def cache_info(debug: opt.DebugOpt = False) -> None:
    """Where the cache is, how many entries and megabytes it holds, and its limit.

    [bold]Example:[/bold] attnviz cache info
    """
    from attnviz.cli.cache import info

    info(_console())


@command("clear", on=cache_app)
def cache_clear(debug: opt.DebugOpt = False) -> None:
    """Delete every cached attention (only the cache's own files).

    [bold]Example:[/bold] attnviz cache clear
    """
    from attnviz.cli.cache import clear

    clear(_console())


def main() -> None:
    """Console-script entry point.

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

"""The `attnviz` commands and their options, as Typer declares them.

Only typer and the standard library are imported at start-up, so `attnviz --help`
is instant; each command imports what it needs when it runs. Each command reads
its request (`input.read_request`, every option passed by name, never by reflection),
turns its other options into plain values and calls the function of the same name in
`commands`, which calls the public API and prints. The shared options live in
`options`; failures become one line and an exit code in `errors`; `help` keeps
`--help` light.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
from attnviz.cli.options import (
    IMAGES,
    READING,
    CmapOpt,
    DebugOpt,
    Device,
    Dtype,
    DtypeOpt,
    Engine,
    EngineOpt,
    ExcludeOpt,
    HeadOpt,
    HeadsOpt,
    ImageOptions,
    ImageOutOpt,
    Lang,
    LangOpt,
    LayerOpt,
    LoadOpt,
    Mask,
    MaskOpt,
    MaxTokensOpt,
    Measure,
    MeasureOpt,
    Method,
    ModelOpt,
    NoBosOpt,
    NoCacheOpt,
    OutOpt,
    PairOpt,
    PoolBy,
    PoolByOpt,
    PoolOpt,
    QuietOpt,
    ReadingOptions,
    SortColumn,
    TextArg,
    TruncateOpt,
    Units,
    UnitsOpt,
    View,
    grouped,
)
from attnviz.errors import BadInput
from attnviz.limits import BATCH_SIZE, THREADS, TOP
from attnviz.perf import import_quietly

if TYPE_CHECKING:
    from rich.console import Console


# The commands are declared on `catalogue` and built only when one runs (see `lazy`).
catalogue = typer.Typer(pretty_exceptions_enable=False)
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
    debug: DebugOpt = False,
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


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, width=console_width())


@catalogue.command()
@grouped
def show(
    ctx: typer.Context,
    text: TextArg = None,
    load: LoadOpt = None,
    layer: LayerOpt = -1,
    head: HeadOpt = None,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: OutOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the matrix as JSON instead of a heatmap.")
    ] = False,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            help="Only this query's row, keys sorted by weight with bars (and a bar chart "
            "with --out): a word of the text, any case or accents (ele#2 for the second).",
            show_default=False,
        ),
    ] = None,
    exclude: ExcludeOpt = None,
    measure: MeasureOpt = Measure.weight,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    pool: PoolOpt = None,
    pool_by: PoolByOpt = PoolBy.mean,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """One heatmap: who attends to whom in one layer (one head, or the mean of all heads).

    Rows are queries (the token that attends), columns are keys; each row sums to 1.
    --query WORD prints that word's row as a sorted list instead.

    [bold]Example:[/bold] attnviz show "Vi João e Maria ontem. Eles estavam juntos." --layer 2
    """
    with _running(debug):
        from attnviz.cli.show import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            layer=layer,
            head=head,
            units=units.value,
            out=out,
            as_json=as_json,
            style=image_style(ctx, out, images),
            query=query,
            exclude=exclude_list(exclude),
            pool=pool,
            pool_by=pool_by.value,
        )


@catalogue.command()
@grouped
def heads(
    ctx: typer.Context,
    text: TextArg = None,
    load: LoadOpt = None,
    layer: LayerOpt = -1,
    heads: HeadsOpt = None,
    units: UnitsOpt = Units.words,
    exclude: ExcludeOpt = None,
    measure: MeasureOpt = Measure.weight,
    model: ModelOpt = None,
    out: OutOpt = None,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    pool: PoolOpt = None,
    pool_by: PoolByOpt = PoolBy.mean,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Every head of one layer, side by side as small heatmaps on one colour scale.

    [bold]Example:[/bold] attnviz heads --layer 3
    """
    with _running(debug):
        from attnviz.cli.heads import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            layer=layer,
            units=units.value,
            out=out,
            style=image_style(ctx, out, images),
            subset=head_list(heads),
            exclude=exclude_list(exclude),
            pool=pool,
            pool_by=pool_by.value,
        )


@catalogue.command("model")
@grouped
def model_view(
    ctx: typer.Context,
    text: TextArg = None,
    load: LoadOpt = None,
    heads: HeadsOpt = None,
    units: UnitsOpt = Units.words,
    exclude: ExcludeOpt = None,
    measure: MeasureOpt = Measure.weight,
    model: ModelOpt = None,
    out: OutOpt = None,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    pool: PoolOpt = None,
    pool_by: PoolByOpt = PoolBy.mean,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The whole model at a glance: every layer (rows) and head (columns) as small heatmaps.

    A long input (or --pool N) is drawn in blocks of pieces, computed a block at a time.

    [bold]Example:[/bold] attnviz model "O trem estava cheio." --heads 0,1,2 --out model.png
    """
    with _running(debug):
        from attnviz.cli.model_view import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            units=units.value,
            out=out,
            style=image_style(ctx, out, images),
            subset=head_list(heads),
            exclude=exclude_list(exclude),
            pool=pool,
            pool_by=pool_by.value,
        )


@catalogue.command()
@grouped
def distance(
    ctx: typer.Context,
    text: TextArg = None,
    layer: Annotated[
        list[int] | None,
        typer.Option("--layer", help="Only these layers (repeat the option); default: all."),
    ] = None,
    model: ModelOpt = None,
    out: OutOpt = None,
    truncate: TruncateOpt = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    cmap: CmapOpt = "viridis",
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Where each head looks, by distance: the share of its weight 0, 1, 2, 3–4, 5–8, ...
    pieces back, its sink share and its kind (self, previous, local, global, sink).

    Computed a block of queries at a time: for inputs up to 16,384 pieces.

    [bold]Example:[/bold] attnviz distance < long.txt --out distance.png
    """
    with _running(debug):
        from attnviz.cli.distance import run

        request = read_request(ctx)
        run(_console(), request, layers=layer, out=out, cmap=cmap)


@catalogue.command()
@grouped
def explain(
    ctx: typer.Context,
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
            help="Language of the explanation. Default: pt when $LC_ALL, $LC_MESSAGES or "
            "$LANG starts with pt, else en.",
            show_default=False,
        ),
    ] = None,
    model: ModelOpt = None,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """How one token's attention is computed, step by step, on the real weights.

    Embeddings, Q/K/V projections, the split into heads, scores q·k, the 1/√d_k scale,
    the mask, softmax, the weighted sum of values (with each key's contribution norm,
    Kobayashi et al. 2020), the join of heads and the output projection.

    [bold]Example:[/bold] attnviz explain "João pensou: O trem estava cheio, mas ele
    conseguiu uma cadeira livre." --token ele --layer 5 --head 0 --lang pt
    """
    with _running(debug):
        if (token is None) == (index is None):
            raise BadInput(
                "say which token to explain: pass --token WORD or --index N (not both); "
                "'attnviz tokens TEXT' lists them"
            )
        from attnviz.cli.explain import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            token=token,
            index=index,
            layer=layer,
            head=head,
            lang=request.lang,
        )


@catalogue.command()
@grouped
def rollout(
    ctx: typer.Context,
    text: TextArg = None,
    load: LoadOpt = None,
    upto: Annotated[
        int,
        typer.Option(
            "--upto", help="Chain layers 0..UPTO (inclusive); negative counts from the end."
        ),
    ] = -1,
    top: Annotated[
        int, typer.Option("--top", help="Inputs listed for each token.", min=TOP[0], max=TOP[1])
    ] = 3,
    units: UnitsOpt = Units.words,
    exclude: ExcludeOpt = None,
    measure: MeasureOpt = Measure.weight,
    method: Annotated[
        Method,
        typer.Option(
            "--method",
            help="rollout (products of the layers) or flow (attention flow: maximum flow "
            "through the layers, exact; at most 64 pieces).",
        ),
    ] = Method.rollout,
    model: ModelOpt = None,
    out: ImageOutOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print {"tokens", "rollout"} as JSON instead of a heatmap.'),
    ] = False,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Attention rollout (Abnar & Zuidema 2020): attention chained through the layers.

    Each layer's head mean is mixed half-and-half with the identity (the residual
    connection), rows renormalised, and the layers multiplied: row i says how much
    token i, after layer UPTO, draws from each input token.

    [bold]Example:[/bold] attnviz rollout "O trem estava cheio, mas ele conseguiu uma cadeira."
    """
    with _running(debug):
        from attnviz.cli.rollout import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            upto=upto,
            units=units.value,
            top=top,
            out=out,
            as_json=as_json,
            style=image_style(ctx, out, images),
            exclude=exclude_list(exclude),
            method=method.value,
        )


@catalogue.command()
@grouped
def find(
    ctx: typer.Context,
    text: TextArg = None,
    load: LoadOpt = None,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="The query word: the one that attends (any case or accents; ele#2 for the "
            "second).",
            show_default=False,
        ),
    ] = ...,  # type: ignore[assignment]
    to: Annotated[
        str,
        typer.Option("--to", help="The key word it should attend to.", show_default=False),
    ] = ...,  # type: ignore[assignment]
    top: Annotated[int, typer.Option("--top", help="Heads listed, strongest first.", min=1)] = 10,
    units: UnitsOpt = Units.words,
    exclude: ExcludeOpt = None,
    model: ModelOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Also write a layers × heads heatmap of the weight: .png/.svg/.pdf."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the ranked heads as JSON instead of a table.")
    ] = False,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Which heads link two words: every layer and head ranked by the weight from one to the other.

    For each head: the weight, the rank of the target among the query's keys, the query's
    top key when it is another word, and how many other words attend to the target more
    (many: a broad column, not a link between the two).

    [bold]Example:[/bold] attnviz find "John thought: the train was full, but he found a free
    seat." --from he --to John
    """
    with _running(debug):
        from attnviz.cli.find import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            source=source,
            target=to,
            top=top,
            units=units.value,
            out=out,
            as_json=as_json,
            style=image_style(ctx, out, images),
            exclude=exclude_list(exclude),
        )


@catalogue.command("compare-measures")
@grouped
def compare_measures(
    ctx: typer.Context,
    text: TextArg = None,
    query: Annotated[
        str,
        typer.Option(
            "--query",
            help="The query word: any case or accents (ele#2 for the second).",
            show_default=False,
        ),
    ] = "",
    layer: LayerOpt = -1,
    top: Annotated[int, typer.Option("--top", help="Keys listed per measure.", min=1)] = 5,
    units: UnitsOpt = Units.words,
    model: ModelOpt = None,
    out: ImageOutOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every measure's row, shares and ranking.")
    ] = False,
    pair: PairOpt = None,
    mask: MaskOpt = Mask.none,
    truncate: TruncateOpt = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    no_cache: NoCacheOpt = False,
    dtype: DtypeOpt = Dtype.float32,
    images: ImageOptions = IMAGES,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """One query, every measure: how the weight, the norm, norm-res-ln, ALTI and value
    zeroing rank its keys, side by side, and where they disagree.

    [bold]Example:[/bold] attnviz compare-measures --query he --layer 3
    """
    with _running(debug):
        if not query.strip():
            raise BadInput("say which query to compare: pass --query WORD")
        from attnviz.cli.compare import run

        request = read_request(ctx)
        run(
            _console(),
            request,
            query=query,
            layer=layer,
            top=top,
            units=units.value,
            out=out,
            as_json=as_json,
            style=image_style(ctx, out, images),
        )


@catalogue.command()
@grouped
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
        SortColumn,
        typer.Option(
            "--sort",
            help="Order heads by this column: entropy lowest first (the most focused heads), "
            "a share highest first, layer in layer and head order. 'first' is a decoder's "
            "(the first token), 'cls', 'sep' and 'next' an encoder's.",
        ),
    ] = SortColumn.layer,
    top: Annotated[
        int | None,
        typer.Option("--top", help="Show only the first N heads.", min=TOP[0], max=TOP[1]),
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
    exclude: ExcludeOpt = None,
    model: ModelOpt = None,
    truncate: TruncateOpt = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            help="Sentences per padded batch.",
            min=BATCH_SIZE[0],
            max=BATCH_SIZE[1],
        ),
    ] = 32,
    device: Annotated[
        Device,
        typer.Option("--device", help="Where batches run; auto takes CUDA when present."),
    ] = Device.auto,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            help="CPU threads for torch. Default: torch's own.",
            min=THREADS[0],
            max=THREADS[1],
        ),
    ] = None,
    dtype: DtypeOpt = Dtype.float32,
    own_scales: Annotated[
        bool,
        typer.Option(
            "--own-scales",
            help="Give each panel of the figure its own colour scale. Default: the six share "
            "panels share one (0 to the largest share), entropy has its own.",
        ),
    ] = False,
    images: ImageOptions = IMAGES,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
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
    with _running(debug):
        if images.annotate:
            raise BadInput("--annotate does not apply to the statistics figure: drop it")
        from attnviz.cli.stats import BatchOptions, run

        run(
            _console(),
            corpus(texts, file),
            model=model,
            truncate=truncate,
            sort=sort.value,
            top=top,
            as_json=as_json,
            out=out,
            style=image_style(ctx, out, images),
            batching=BatchOptions(batch_size, device.value, threads, dtype.value),
            quiet=quiet,
            shared_scale=not own_scales,
            max_tokens=max_tokens,
            bos=not no_bos,
            lang=language(lang),
            engine=engine.value,
            exclude=exclude_list(exclude),
        )


@catalogue.command()
@grouped
def tokens(
    ctx: typer.Context,
    text: TextArg = None,
    model: ModelOpt = None,
    pair: PairOpt = None,
    truncate: TruncateOpt = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """The word pieces of the text: index, piece, vocabulary id, word, character span.

    [bold]Example:[/bold] attnviz tokens "João pensou: O trem estava cheio."
    """
    with _running(debug):
        from attnviz.cli.tokens import run

        request = read_request(ctx)
        run(_console(), request)


@catalogue.command()
@grouped
def info(model: ModelOpt = None, engine: EngineOpt = Engine.auto, debug: DebugOpt = False) -> None:
    """The model: family, layers, heads, sizes, parameters, where it was loaded from.

    [bold]Example:[/bold] attnviz info --model ./my-finetuned-bert
    """
    with _running(debug):
        from attnviz.cli.info import run

        run(_console(), model, engine=engine.value)


@catalogue.command()
@grouped
def generate(
    ctx: typer.Context,
    text: TextArg = None,
    max_new: Annotated[
        int,
        typer.Option(
            "--max-new", help="The most tokens to write (1..512); an end token stops sooner."
        ),
    ] = 20,
    sample: Annotated[
        bool, typer.Option("--sample", help="Draw each token (default: take the likeliest).")
    ] = False,
    temperature: Annotated[
        float,
        typer.Option("--temperature", help="With --sample: logits divided by this (0.01..100)."),
    ] = 1.0,
    top_k: Annotated[
        int | None,
        typer.Option(
            "--top-k", help="With --sample: draw among the K likeliest only.", show_default=False
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="With --sample: the same seed draws the same tokens.", show_default=False
        ),
    ] = None,
    layer: LayerOpt = -1,
    head: HeadOpt = None,
    lens: Annotated[
        bool,
        typer.Option(
            "--lens",
            help="Also the logit lens: each layer's top next-token guess at each position "
            "(with --out, its image).",
        ),
    ] = False,
    model: ModelOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Also write: .png/.svg/.pdf (each new token's attention, or the lens), .html "
            "(a page with a step slider) or .npz/.json (tokens, steps, per-step attention).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the tokens, steps and per-step attention as JSON."),
    ] = False,
    max_tokens: MaxTokensOpt = None,
    no_bos: NoBosOpt = False,
    engine: EngineOpt = Engine.auto,
    dtype: DtypeOpt = Dtype.float32,
    images: ImageOptions = IMAGES,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A decoder writes after TEXT; then what each new token attended to.

    Prints the continuation as it is written, then one row per new token over the prompt
    and the tokens written before it (one head with --head, else the mean of the heads).
    Needs a decoder (GPT-2, Llama, Mistral, Qwen2) with its LM head, given by --model.

    [bold]Example:[/bold] attnviz generate "Once upon a time" --max-new 20 --model ./smollm2
    """
    with _running(debug):
        from attnviz.cli.generate import run

        request = read_request(ctx)
        run(
            _console(),
            request,
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


@catalogue.command()
@grouped
def export(
    ctx: typer.Context,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Output: .png/.svg/.pdf (an image of --view), .html (an interactive page) or "
            ".npz/.json (data).",
            show_default=False,
        ),
    ],
    text: TextArg = None,
    load: LoadOpt = None,
    view: Annotated[
        View, typer.Option("--view", help="The view an image or page opens on.")
    ] = View.show,
    layer: LayerOpt = -1,
    head: HeadOpt = None,
    units: UnitsOpt = Units.words,
    measure: MeasureOpt = Measure.weight,
    model: ModelOpt = None,
    reading: ReadingOptions = READING,
    images: ImageOptions = IMAGES,
    lang: LangOpt = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Save a view as an image, or every layer's raw attention as data.

    .npz holds attentions float32 (layers, heads, T, T) over the model's own pieces, tokens and
    input_ids; .json holds the same as lists.

    [bold]Example:[/bold] attnviz export "O banco negou o empréstimo." --out banco.npz
    """
    with _running(debug):
        from attnviz.cli.export import run

        request = read_request(ctx)
        run(
            request,
            out=out,
            view=view.value,
            layer=layer,
            head=head,
            units=units.value,
            style=image_style(ctx, out, images),
        )


cache_app = typer.Typer(
    name="cache",
    help="The attention cache: computed attentions kept as .npz so a view seen before "
    "draws without torch. Folder: $ATTNVIZ_CACHE_DIR, else $XDG_CACHE_HOME/attnviz, else "
    "~/.cache/attnviz; size: $ATTNVIZ_CACHE_MB (default 512).",
    no_args_is_help=True,
)
catalogue.add_typer(cache_app)


@cache_app.command("info")
@grouped
def cache_info(debug: DebugOpt = False) -> None:
    """Where the cache is, how many entries and megabytes it holds, and its limit.

    [bold]Example:[/bold] attnviz cache info
    """
    with _running(debug):
        from attnviz.cli.cache import info

        info(_console())


@cache_app.command("clear")
@grouped
def cache_clear(debug: DebugOpt = False) -> None:
    """Delete every cached attention (only the cache's own files).

    [bold]Example:[/bold] attnviz cache clear
    """
    with _running(debug):
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

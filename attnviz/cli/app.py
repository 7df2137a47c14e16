"""The `attnviz` commands and their options, as Typer declares them (`running` runs them).

Only typer is imported at start-up, so `attnviz --help` is instant. Each command lists its
options (the shared ones and their groups in `options`, its own in `command_options`) and calls
the `run` of its module (`attnviz.cli.show.run`, ...), imported when it runs, with where its
result goes (`input.read_output`) and its request (`input.read_request`), both read from its
options by name, and its own options.
"""

from __future__ import annotations

import typer

from attnviz.cli import command_options as own
from attnviz.cli import options as opt
from attnviz.cli.input import corpus, exclude_list, head_list, read_output, read_request, terminal
from attnviz.cli.running import application, catalogue, command, entry
from attnviz.errors import BadInput

app = application()  # the group of the commands declared below on `catalogue`


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
    drawn: opt.DrawnOptions = opt.DRAWN,
) -> None:
    """One heatmap: who attends to whom in one layer (one head, or the mean of all heads).

    Rows are queries (the token that attends), columns are keys; each row sums to 1.
    --query WORD prints that word's row as a sorted list instead.

    [bold]Example:[/bold] attnviz show "Vi João e Maria ontem. Eles estavam juntos." --layer 2
    """
    from attnviz.cli.show import run

    run(read_output(ctx), read_request(ctx), layer=layer, head=head, units=units.value,
        query=query, exclude=exclude_list(exclude), pooling=drawn.pooling)  # fmt: skip


@command()
def heads(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    layer: opt.LayerOpt = -1,
    grid: opt.GridOptions = opt.GRID,
    as_json: own.PooledJsonOpt = False,
    drawn: opt.DrawnOptions = opt.DRAWN,
) -> None:
    """Every head of one layer, side by side as small heatmaps on one colour scale.

    [bold]Example:[/bold] attnviz heads --layer 3
    """
    from attnviz.cli.heads import run

    run(read_output(ctx), read_request(ctx), layer=layer, units=grid.units.value,
        subset=head_list(grid.heads), exclude=exclude_list(grid.exclude),
        pooling=drawn.pooling)  # fmt: skip


@command("model")
def model_view(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    grid: opt.GridOptions = opt.GRID,
    as_json: own.PooledJsonOpt = False,
    drawn: opt.DrawnOptions = opt.DRAWN,
) -> None:
    """The whole model at a glance: every layer (rows) and head (columns) as small heatmaps.

    A long input (or --pool N) is drawn in blocks of pieces, computed a block at a time.

    [bold]Example:[/bold] attnviz model "O trem estava cheio." --heads 0,1,2 --out model.png
    """
    from attnviz.cli.model_view import run

    run(read_output(ctx), read_request(ctx), units=grid.units.value,
        subset=head_list(grid.heads), exclude=exclude_list(grid.exclude),
        pooling=drawn.pooling)  # fmt: skip


@command()
def distance(
    ctx: typer.Context,
    text: opt.TextArg = None,
    layer: own.DistanceLayerOpt = None,
    model: opt.ModelOpt = None,
    out: opt.OutOpt = None,
    show: opt.ShowOpt = False,
    bounds: opt.BoundOptions = opt.BOUNDS,
    cmap: opt.CmapOpt = "viridis",
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Where each head looks, by distance: the share of its weight 0, 1, 2, 3–4, 5–8, ...
    pieces back, its sink share and its kind (self, previous, local, global, sink).

    Computed a block of queries at a time: for inputs up to 16,384 pieces.

    [bold]Example:[/bold] attnviz distance < long.txt --out distance.png
    """
    from attnviz.cli.distance import run

    run(read_output(ctx), read_request(ctx), layers=layer)


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
    bounds: opt.BoundOptions = opt.BOUNDS,
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

    run(terminal(), read_request(ctx), token=token, index=index, layer=layer, head=head)


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

    run(read_output(ctx), read_request(ctx), upto=upto, units=units.value, top=top,
        exclude=exclude_list(exclude), method=method.value)  # fmt: skip


@command()
def find(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    source: own.FindSourceOpt = None,  # type: ignore[assignment]
    to: own.FindToOpt = None,  # type: ignore[assignment]
    file: own.FindFileOpt = None,
    top: own.FindTopOpt = 10,
    units: opt.UnitsOpt = opt.Units.words,
    exclude: opt.ExcludeOpt = None,
    model: opt.ModelOpt = None,
    out: own.FindOutOpt = None,
    show: opt.ShowOpt = False,
    as_json: own.FindJsonOpt = False,
    shard: own.ShardOpt = None,
    partial: own.PartialOpt = None,
    dask: own.DaskOpt = None,
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

    One sentence names no role: --file FILE scores every head over labelled examples
    (accuracy with a 95% interval, beside the nearest, first and random baselines);
    --shard I/N --partial FILE scores one slice of them (then attnviz merge), --dask ADDRESS
    a slice on each worker of a Dask cluster.
    """
    from attnviz.cli.find import run, run_file
    from attnviz.cli.stats import Slicing

    output = read_output(ctx)
    slicing = Slicing(shard, partial, dask)
    if file is not None:
        words = {"TEXT": text, "--load": load, "--from": source, "--to": to}
        run_file(output, file, given=words, top=top, units=units.value,
                 exclude=exclude_list(exclude), model=model, reading=reading, ending=ending,
                 slicing=slicing)  # fmt: skip
        return
    if slicing != Slicing():
        raise BadInput("{shard}, {partial} and {dask} are for --file: one sentence is one run",
                       param=("shard", "partial", "dask"))  # fmt: skip
    run(output.console, read_request(ctx), source=source, target=to, top=top, units=units.value,
        out=output.out, as_json=output.as_json, style=output.style,
        exclude=exclude_list(exclude))  # fmt: skip


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
    bounds: opt.BoundOptions = opt.BOUNDS,
    no_cache: opt.NoCacheOpt = False,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """One query, every measure: how the weight, the norm, norm-res-ln, ALTI and value
    zeroing rank its keys, side by side, and where they disagree.

    [bold]Example:[/bold] attnviz compare-measures --query he --layer 3
    """
    from attnviz.cli.compare import run

    run(read_output(ctx), read_request(ctx), query=query, layer=layer, top=top, units=units.value)


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
    bounds: opt.BoundOptions = opt.BOUNDS,
    batch_size: own.StatsBatchSizeOpt = 32,
    device: own.StatsDeviceOpt = opt.Device.auto,
    threads: own.StatsThreadsOpt = None,
    dtype: opt.DtypeOpt = opt.Dtype.float32,
    own_scales: own.StatsOwnScalesOpt = False,
    shard: own.ShardOpt = None,
    partial: own.PartialOpt = None,
    dask: own.DaskOpt = None,
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

    On many processes: --shard I/N --partial FILE computes slice I of N (blocks of 8 ×
    --batch-size sentences in input order, block k in slice k mod N + 1) and attnviz merge
    adds the files up; --dask ADDRESS runs a slice on each worker of a Dask cluster.
    """
    from attnviz.cli.stats import BatchOptions, Slicing, run

    run(read_output(ctx), read_request(ctx), corpus(texts, file), sort=sort.value, top=top,
        batching=BatchOptions(batch_size, device.value, threads), shared_scale=not own_scales,
        exclude=exclude_list(exclude), slicing=Slicing(shard, partial, dask))  # fmt: skip


@command()
def merge(
    ctx: typer.Context,
    parts: own.MergePartsArg,
    as_json: own.MergeJsonOpt = False,
    out: own.MergeOutOpt = None,
    show: opt.ShowOpt = False,
    sort: own.StatsSortOpt = opt.SortColumn.layer,
    top: own.StatsTopOpt = None,
    own_scales: own.StatsOwnScalesOpt = False,
    images: opt.ImageOptions = opt.IMAGES,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Add up the partial files of every slice (stats or find --file with --shard and
    --partial) and print exactly what one run over the whole input prints.

    Partials of another model, other options, another input or another cut are refused, as
    is a slice given twice or missing. --sort and --top order the statistics as stats does;
    a find --file partial keeps its own --top.

    [bold]Example:[/bold] attnviz merge part-1.json part-2.json --sort prev --top 10
    """
    from attnviz.cli.merge import run

    run(read_output(ctx), parts, sort=sort.value, top=top, shared_scale=not own_scales,
        quiet=ending.quiet)  # fmt: skip


@command()
def tokens(
    ctx: typer.Context,
    text: opt.TextArg = None,
    model: opt.ModelOpt = None,
    pair: opt.PairOpt = None,
    bounds: opt.BoundOptions = opt.BOUNDS,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """The word pieces of the text: index, piece, vocabulary id, word, character span.

    [bold]Example:[/bold] attnviz tokens "João pensou: O trem estava cheio."
    """
    from attnviz.cli.tokens import run

    run(terminal(), read_request(ctx))


@command()
def info(
    model: opt.ModelOpt = None, engine: opt.EngineOpt = opt.Engine.auto, debug: opt.DebugOpt = False
) -> None:
    """The model: family, layers, heads, sizes, parameters, where it was loaded from.

    [bold]Example:[/bold] attnviz info --model ./my-finetuned-bert
    """
    from attnviz.cli.info import run

    run(terminal(), model, engine=engine.value)


@command()
def models(
    folder: own.ModelsFolderArg = None,
    as_json: own.ModelsJsonOpt = False,
    debug: opt.DebugOpt = False,
) -> None:
    """The models at hand, found offline: the embedded default, installed extras
    (gemma-3-270m), GGUF files and model folders in FOLDER (or $ATTNVIZ_MODELS) and the
    local Hugging Face cache, each with the --model value to pass.

    [bold]Example:[/bold] attnviz models ~/models
    """
    from attnviz.cli.models import run

    run(terminal(), folder, as_json)


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

    run(read_output(ctx), read_request(ctx), max_new=max_new, sample=sample,
        temperature=temperature, top_k=top_k, seed=seed, layer=layer, head=head,
        lens=lens)  # fmt: skip


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

    run(read_output(ctx), read_request(ctx), view=view.value, layer=layer, head=head,
        units=units.value)  # fmt: skip


@command()
def explore(
    ctx: typer.Context,
    text: opt.TextArg = None,
    load: opt.LoadOpt = None,
    layer: opt.LayerOpt = 0,
    head: own.ExploreHeadOpt = 0,
    units: opt.UnitsOpt = opt.Units.words,
    model: opt.ModelOpt = None,
    exclude: opt.ExcludeOpt = None,
    measure: opt.MeasureOpt = opt.Measure.weight,
    reading: opt.ReadingOptions = opt.READING,
    ending: opt.EndOptions = opt.ENDING,
) -> None:
    """Explore the attention full-screen in the terminal: every head, layer and query.

    ←/→ heads, ↑/↓ layers, Tab queries (their keys beside), s saves a PNG, ? every key, q quits.

    [bold]Example:[/bold] attnviz explore "John thought: the train was full, but he found a seat."
    """
    from attnviz.cli.explore import run

    run(read_request(ctx), layer=layer, head=head, units=units.value,
        exclude=exclude_list(exclude))  # fmt: skip


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

    output = read_output(ctx)
    run(output.console, prompt, target=target, foil=foil, method=method.value, patch=patch,
        layer=layer, model=model, out=output.out, as_json=output.as_json, max_tokens=max_tokens,
        bos=not no_bos, dtype=dtype.value, quiet=quiet, style=output.style)  # fmt: skip


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

    info(terminal())


@command("clear", on=cache_app)
def cache_clear(debug: opt.DebugOpt = False) -> None:
    """Delete every cached attention (only the cache's own files).

    [bold]Example:[/bold] attnviz cache clear
    """
    from attnviz.cli.cache import clear

    clear(terminal())


def main() -> None:
    """Console-script entry point (see `running.entry`)."""
    entry(app)

"""The options one command has alone (the shared ones are in `options`), as Annotated types."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from attnviz.cli.options import Device, Lang, Method, SortColumn, View
from attnviz.limits import BATCH_SIZE, THREADS, TOP

ShowJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the matrix as JSON instead of a heatmap.")
]

ShowQueryOpt = Annotated[
    str | None,
    typer.Option(
        "--query",
        help="Only this query's row, keys sorted by weight with bars (and a bar chart "
        "with --out): a word of the text, any case or accents (ele#2 for the second).",
        show_default=False,
    ),
]

DistanceLayerOpt = Annotated[
    list[int] | None,
    typer.Option("--layer", help="Only these layers (repeat the option); default: all."),
]

ExplainTokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        "-t",
        help="The query: a word of the text, any case (ele#2 for its second occurrence).",
        show_default=False,
    ),
]

ExplainIndexOpt = Annotated[
    int | None,
    typer.Option(
        "--index",
        "-i",
        help="The query as a piece index, as 'attnviz tokens' numbers them.",
        show_default=False,
    ),
]

ExplainHeadOpt = Annotated[
    int, typer.Option("--head", help="Head, 0-based; negative from the end.")
]

ExplainLangOpt = Annotated[
    Lang | None,
    typer.Option(
        "--lang",
        help="Language of the explanation. Default: pt when $LC_ALL, $LC_MESSAGES or "
        "$LANG starts with pt, else en.",
        show_default=False,
    ),
]

RolloutUptoOpt = Annotated[
    int,
    typer.Option("--upto", help="Chain layers 0..UPTO (inclusive); negative counts from the end."),
]

RolloutTopOpt = Annotated[
    int, typer.Option("--top", help="Inputs listed for each token.", min=TOP[0], max=TOP[1])
]

RolloutMethodOpt = Annotated[
    Method,
    typer.Option(
        "--method",
        help="rollout (products of the layers) or flow (attention flow: maximum flow "
        "through the layers, exact; at most 64 pieces).",
    ),
]

RolloutJsonOpt = Annotated[
    bool,
    typer.Option("--json", help='Print {"tokens", "rollout"} as JSON instead of a heatmap.'),
]

FindSourceOpt = Annotated[
    str,
    typer.Option(
        "--from",
        help="The query word: the one that attends (any case or accents; ele#2 for the second).",
        show_default=False,
    ),
]

FindToOpt = Annotated[
    str,
    typer.Option("--to", help="The key word it should attend to.", show_default=False),
]

FindTopOpt = Annotated[int, typer.Option("--top", help="Heads listed, strongest first.", min=1)]

FindOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write a layers × heads heatmap of the weight instead of the table (both with "
        "--show): .png/.svg/.pdf.",
    ),
]

FindJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the ranked heads as JSON instead of a table.")
]

FindFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--file",
        help="Score every head over labelled examples instead: JSON Lines "
        '{"text", "from", "to", "candidates"} or TSV (see sample_sentences/).',
    ),
]

CompareQueryOpt = Annotated[
    str,
    typer.Option(
        "--query",
        help="The query word: any case or accents (ele#2 for the second).",
        show_default=False,
    ),
]

CompareTopOpt = Annotated[int, typer.Option("--top", help="Keys listed per measure.", min=1)]

CompareJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print every measure's row, shares and ranking.")
]

StatsTextsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Sentences. Omitted: --file, else lines from a pipe, else the sample sentences.",
        show_default=False,
    ),
]

StatsFileOpt = Annotated[
    Path | None,
    typer.Option("--file", "-f", help="A UTF-8 text file, one sentence a line ('-' for stdin)."),
]

StatsSortOpt = Annotated[
    SortColumn,
    typer.Option(
        "--sort",
        help="Order heads by this column: entropy lowest first (the most focused heads), "
        "a share highest first, layer in layer and head order. 'first' is a decoder's "
        "(the first token), 'cls', 'sep' and 'next' an encoder's.",
    ),
]

StatsTopOpt = Annotated[
    int | None,
    typer.Option("--top", help="Show only the first N heads.", min=TOP[0], max=TOP[1]),
]

StatsJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print a JSON list of per-head records.")
]

StatsOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write one figure, a panel per statistic, instead of the table (both with --show): "
        ".png/.svg/.pdf.",
    ),
]

StatsBatchSizeOpt = Annotated[
    int,
    typer.Option(
        "--batch-size",
        help="Sentences per padded batch.",
        min=BATCH_SIZE[0],
        max=BATCH_SIZE[1],
    ),
]

StatsDeviceOpt = Annotated[
    Device,
    typer.Option("--device", help="Where batches run; auto takes CUDA when present."),
]

StatsThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        help="CPU threads for torch. Default: torch's own.",
        min=THREADS[0],
        max=THREADS[1],
    ),
]

StatsOwnScalesOpt = Annotated[
    bool,
    typer.Option(
        "--own-scales",
        help="Give each panel of the figure its own colour scale. Default: the six share "
        "panels share one (0 to the largest share), entropy has its own.",
    ),
]

GenerateMaxNewOpt = Annotated[
    int,
    typer.Option("--max-new", help="The most tokens to write (1..512); an end token stops sooner."),
]

GenerateSampleOpt = Annotated[
    bool, typer.Option("--sample", help="Draw each token (default: take the likeliest).")
]

GenerateTemperatureOpt = Annotated[
    float,
    typer.Option("--temperature", help="With --sample: logits divided by this (0.01..100)."),
]

GenerateTopKOpt = Annotated[
    int | None,
    typer.Option(
        "--top-k", help="With --sample: draw among the K likeliest only.", show_default=False
    ),
]

GenerateSeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed", help="With --sample: the same seed draws the same tokens.", show_default=False
    ),
]

GenerateLensOpt = Annotated[
    bool,
    typer.Option(
        "--lens",
        help="Also the logit lens: each layer's top next-token guess at each position "
        "(with --out, its image).",
    ),
]

GenerateOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write, instead of printing (both with --show): .png/.svg/.pdf (each new token's "
        "attention, or the lens), .html (a page with a step slider) or .npz/.json (tokens, "
        "steps, per-step attention).",
        show_default=False,
    ),
]

GenerateJsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print the tokens, steps and per-step attention as JSON."),
]

ExportOutOpt = Annotated[
    Path,
    typer.Option(
        "--out",
        "-o",
        help="Output: .png/.svg/.pdf (an image of --view), .html (an interactive page) or "
        ".npz/.json (data).",
        show_default=False,
    ),
]

ExportViewOpt = Annotated[View, typer.Option("--view", help="The view an image or page opens on.")]

ModelsFolderArg = Annotated[
    Path | None,
    typer.Argument(
        help="A folder of GGUF files and model folders to list as well (default: $ATTNVIZ_MODELS).",
        show_default=False,
    ),
]

ModelsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the list as JSON.")]

PooledJsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the pooled maps as JSON (with --pool, or a text too long to draw whole): "
        "blocks, and for each head the share of each block of queries' attention per block "
        "of keys.",
    ),
]

ExploreHeadOpt = Annotated[int, typer.Option("--head", help="The head it opens on (a: the mean).")]


class AblateMethod(str, Enum):
    zero = "zero"
    mean = "mean"


AblatePromptArg = Annotated[
    str, typer.Argument(help="The prompt: the decoder's next token after it is measured.")
]
AblateTargetOpt = Annotated[
    str,
    typer.Option(
        "--target",
        help="The word the model should write next: one piece of its vocabulary, with the "
        "space a word after another gets (the piece used is printed).",
        show_default=False,
    ),
]
AblateFoilOpt = Annotated[
    str,
    typer.Option(
        "--foil",
        help="The word it is measured against: logit(target) − logit(foil). One piece too.",
        show_default=False,
    ),
]
AblateMethodOpt = Annotated[
    AblateMethod,
    typer.Option(
        "--method",
        help="How a head is removed: its output (its slice of the output projection's "
        "input) set to 0 at every position, or to its mean over the prompt's positions.",
    ),
]
AblatePatchOpt = Annotated[
    str | None,
    typer.Option(
        "--patch",
        help="A corrupted prompt of as many pieces: run it with each head's output taken "
        "from the prompt's run in turn, and print the share of the clean − corrupted "
        "difference each head restores.",
        show_default=False,
    ),
]
AblateLayerOpt = Annotated[
    int | None,
    typer.Option(
        "--layer",
        "-l",
        help="Only this layer's heads (negative counts from the end). Default: every layer.",
        show_default=False,
    ),
]
AblateOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write a layers × heads heatmap of the effects (.png/.svg/.pdf; colours RdBu_r "
        "unless --cmap names another) instead of printing (both with --show).",
        show_default=False,
    ),
]
AblateJsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print the logit differences and every head's effect as JSON."),
]

# Corpus work over many processes: `stats` and `find --file` (attnviz.sharding), `merge`.
ShardOpt = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="Run only slice I of N (e.g. 2/4; with --partial): blocks of 8 × --batch-size "
        "sentences (examples) in input order, block k in slice k mod N + 1.",
        show_default=False,
    ),
]

PartialOpt = Annotated[
    Path | None,
    typer.Option(
        "--partial",
        help="Write the exact partial sums and counts (JSON) instead of the result; "
        "attnviz merge adds the slices' files up.",
        show_default=False,
    ),
]

DaskOpt = Annotated[
    str | None,
    typer.Option(
        "--dask",
        help="Run a slice on each worker of this Dask scheduler (tcp://HOST:8786) and merge "
        "what comes back; needs pip install 'attnviz[dask]'.",
        show_default=False,
    ),
]

MergePartsArg = Annotated[
    list[Path],
    typer.Argument(
        help="The partial files of every slice (--partial of stats or find --file).",
        metavar="PART...",
        show_default=False,
    ),
]

MergeJsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON, as stats or find --file do.")
]

MergeOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write the figure instead of the table (both with --show): .png/.svg/.pdf.",
    ),
]

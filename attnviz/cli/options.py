"""The options the `attnviz` commands share: choices as Enums, options as Annotated types,
and groups of options that travel together as one parameter (`grouped`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer


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


class Engine(str, Enum):
    auto = "auto"
    attnviz = "attnviz"
    transformers = "transformers"


class Measure(str, Enum):
    weight = "weight"
    norm = "norm"
    norm_res_ln = "norm-res-ln"
    alti = "alti"
    value_zeroing = "value-zeroing"


class Method(str, Enum):
    rollout = "rollout"
    flow = "flow"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class SortColumn(str, Enum):
    layer = "layer"
    entropy = "entropy"
    cls = "cls"
    sep = "sep"
    first = "first"
    punct = "punct"
    self_ = "self"
    prev = "prev"
    next_ = "next"


class View(str, Enum):
    show = "show"
    heads = "heads"
    model = "model"


class Lang(str, Enum):
    en = "en"
    pt = "pt"


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
        help="A model folder, a .gguf file, an installed model (gemma-3-270m: a multilingual "
        "decoder) or a Hugging Face Hub id; `attnviz models` lists those at hand. Default: "
        "$ATTNVIZ_MODEL, else the embedded all-MiniLM-L6-v2 (English).",
        show_default=False,
    ),
]
TruncateOpt = Annotated[
    bool, typer.Option("--truncate", help="Keep the first positions of a text that is too long.")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        help="The longest input read, in pieces. Default: the model's own limit, and at most "
        "2048 for a decoder. It goes up to the model's limit as long as one layer's attention "
        "fits the 512 MB attnviz keeps (9 heads: 3861 pieces; ATTNVIZ_ATTENTION_MB raises it).",
        min=1,
        max=1 << 20,
        show_default=False,
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write an image (.png, .svg, .pdf) or an interactive page that works offline "
        "(.html) instead of drawing in the terminal (both with --show).",
    ),
]
LoadOpt = Annotated[
    Path | None,
    typer.Option(
        "--load",
        help="Draw the attention in this .npz file instead of computing it: attnviz's own "
        "export, or any .npz with 'attentions' [layers, heads, T, T] and 'tokens'. No TEXT, "
        "no model.",
        show_default=False,
    ),
]
ImageOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        "-o",
        help="Write an image instead of drawing in the terminal (both with --show): .png, .svg "
        "or .pdf.",
    ),
]
ShowOpt = Annotated[
    bool, typer.Option("--show", help="With --out, draw in the terminal as well as the file.")
]
DpiOpt = Annotated[int, typer.Option("--dpi", help="Image resolution in dots per inch (10..1200).")]
CmapOpt = Annotated[str, typer.Option("--cmap", help="Image colormap: any matplotlib name.")]
ThemeOpt = Annotated[
    Theme,
    typer.Option(
        "--theme",
        help="Image background; on a .html page, light or dark instead of the reader's setting.",
    ),
]
TransparentOpt = Annotated[
    bool, typer.Option("--transparent", help="Image with a transparent background.")
]
AnnotateOpt = Annotated[
    bool, typer.Option("--annotate", help="Write the values in the image's cells when they fit.")
]


class Stack(str, Enum):
    encoder = "encoder"
    decoder = "decoder"
    cross = "cross"


StackOpt = Annotated[
    Stack | None,
    typer.Option(
        "--stack",
        help="An encoder-decoder's (T5, BART, Marian) attention to show: cross (each target "
        "piece over the source; the default), decoder (the target over itself, causal) or "
        "encoder (the source over itself).",
        show_default=False,
    ),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        help="An encoder-decoder's target (the translation, the summary): its decoder reads "
        "the start token and then this text, as transformers shifts labels.",
        show_default=False,
    ),
]
GenerateOpt = Annotated[
    int | None,
    typer.Option(
        "--generate",
        help="An encoder-decoder writes its own target: greedy, at most N new tokens "
        "(1..256), marked as generated.",
        show_default=False,
    ),
]
PairOpt = Annotated[
    str | None,
    typer.Option(
        "--pair",
        help="A second sentence B (encoders): the model reads [CLS] A [SEP] B [SEP] with "
        "token types; labels mark B's first word with B:.",
        show_default=False,
    ),
]
MaskOpt = Annotated[
    Mask,
    typer.Option(
        "--mask",
        help="What-if for an encoder: 'causal' lets each token see only itself and earlier "
        "tokens (the model is modified; titles say so). 'none' is the real model. A "
        "decoder's own mask is causal already.",
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
        help="What the model computes in. Half-precision weights are computed in float32 "
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
MeasureOpt = Annotated[
    Measure,
    typer.Option(
        "--measure",
        help="What to draw: the attention weight, or how much each key contributes: norm "
        "(Kobayashi 2020, per head), norm-res-ln (Kobayashi 2021), alti (Ferrando 2022), "
        "value-zeroing (Mohebbi 2023); the last three per layer.",
    ),
]
ExcludeOpt = Annotated[
    str | None,
    typer.Option(
        "--exclude",
        "-x",
        help="Drop special tokens ([CLS], [SEP], <bos>), punctuation, or the first token "
        "(first, alias sink: a decoder's attention sink), or several (special,punct), as keys "
        "and queries, and renormalise each row over the keys left.",
        show_default=False,
    ),
]
EngineOpt = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="What computes the weights: attnviz's own from-scratch modules, transformers' "
        "eager model (for model types attnviz does not compute: DeBERTa-v2, MPNet, ModernBERT, "
        "OLMo, Falcon, ...), or auto: attnviz's where it computes the type, else transformers'.",
    ),
]
NoBosOpt = Annotated[
    bool,
    typer.Option(
        "--no-bos",
        help="Read a decoder's text exactly as typed, with no start token (<s>, <bos>, "
        "<|endoftext|>) in front, not even one its tokenizer adds. By default a decoder whose "
        "tokenizer adds none gets the model's own, as interpretability tools read decoders; "
        "without it the first word is the attention sink.",
    ),
]
LangOpt = Annotated[
    Lang | None,
    typer.Option(
        "--lang",
        help="Language of titles, axis names, legends, tables and pages: en or pt. Default: "
        "pt when $LC_ALL, $LC_MESSAGES or $LANG starts with pt, else en.",
        show_default=False,
    ),
]
PoolOpt = Annotated[
    int | None,
    typer.Option(
        "--pool",
        help="Draw blocks of N pieces (their mean or max weight, labelled 0–63, 64–127, ...), "
        "computed a block of queries at a time: for long inputs (up to 16,384 pieces). On by "
        "itself (64 blocks a side) when the whole attention is too large to keep.",
        min=1,
        max=1_000_000,
        show_default=False,
    ),
]


class PoolBy(str, Enum):
    mean = "mean"
    max = "max"


PoolByOpt = Annotated[
    PoolBy, typer.Option("--pool-by", help="How a block of pieces is pooled (with --pool).")
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No notes on stderr (errors still show).")
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")]


# Groups of options that travel together: a command's parameter typed as a group stands for
# the group's options, in the group's order, at that place of its --help (see `grouped`).


@dataclass(frozen=True)
class ImageOptions:
    """--dpi, --cmap, --theme, --transparent and --annotate: how an image is drawn."""

    dpi: DpiOpt = 200
    cmap: CmapOpt = "viridis"
    theme: ThemeOpt = Theme.light
    transparent: TransparentOpt = False
    annotate: AnnotateOpt = False


@dataclass(frozen=True)
class BoundOptions:
    """--truncate, --max-tokens, --no-bos and --engine: how much of the text is read, and what
    computes it."""

    truncate: TruncateOpt = False
    max_tokens: MaxTokensOpt = None
    no_bos: NoBosOpt = False
    engine: EngineOpt = Engine.auto


BOUNDS = BoundOptions()


@dataclass(frozen=True)
class ReadingOptions:
    """How the text is read and computed, from --pair to --dtype: options of the `Request`."""

    pair: PairOpt = None
    stack: StackOpt = None
    target: TargetOpt = None
    generate: GenerateOpt = None
    mask: MaskOpt = Mask.none
    bounds: BoundOptions = BOUNDS
    no_cache: NoCacheOpt = False
    dtype: DtypeOpt = Dtype.float32


@dataclass(frozen=True)
class PoolOptions:
    """--pool and --pool-by: a long input drawn in blocks of pieces."""

    pool: PoolOpt = None
    pool_by: PoolByOpt = PoolBy.mean


@dataclass(frozen=True)
class EndOptions:
    """--lang, --quiet and --debug: the options most commands end with."""

    lang: LangOpt = None
    quiet: QuietOpt = False
    debug: DebugOpt = False


IMAGES = ImageOptions()  # the defaults a signature shows; typer passes the options given
READING = ReadingOptions()
POOLING = PoolOptions()
ENDING = EndOptions()


@dataclass(frozen=True)
class DrawnOptions:
    """--pair to --debug, the options a heatmap view (show, heads, model) ends with: how its
    text is read, its image drawn, a long input pooled, and the end options."""

    reading: ReadingOptions = READING
    images: ImageOptions = IMAGES
    pooling: PoolOptions = POOLING
    ending: EndOptions = ENDING


@dataclass(frozen=True)
class GridOptions:
    """--heads to --show: which heads of a grid of heatmaps (heads, model), over what units
    and tokens, which measure, from which model, and where it is drawn."""

    heads: HeadsOpt = None
    units: UnitsOpt = Units.words
    exclude: ExcludeOpt = None
    measure: MeasureOpt = Measure.weight
    model: ModelOpt = None
    out: OutOpt = None
    show: ShowOpt = False


DRAWN = DrawnOptions()
GRID = GridOptions()
GROUPS = (
    ImageOptions, BoundOptions, ReadingOptions, PoolOptions, EndOptions, DrawnOptions, GridOptions
)  # fmt: skip
KEYWORD = inspect.Parameter.KEYWORD_ONLY
GIVEN = "attnviz.options"  # the context's `meta` key of every option's value (see `given`)


def spelled(hint: Any, parameter: inspect.Parameter) -> list[inspect.Parameter]:
    """The options a parameter stands for: itself, or a group's options in order (a group
    inside a group spelled out in its place)."""
    if hint not in GROUPS:
        return [parameter.replace(kind=KEYWORD, annotation=hint)]
    inner = get_type_hints(hint, include_extras=True)
    return [
        option
        for f in fields(hint)
        for option in spelled(inner[f.name], inspect.Parameter(f.name, KEYWORD, default=f.default))
    ]


def gathered(group: type, values: dict[str, Any]) -> Any:
    """The `group` value of its options in `values` (taken out of it), groups inside it too."""
    inner = get_type_hints(group, include_extras=True)
    return group(**{
        f.name: gathered(inner[f.name], values) if inner[f.name] in GROUPS else values.pop(f.name)
        for f in fields(group)
    })  # fmt: skip


def grouped(command: Callable[..., None]) -> Callable[..., None]:
    """`command` as typer reads it: each parameter typed as a group (`GROUPS`) spelled out as
    the group's options, in place; on a call they are one group value again.

    Every option's value, as typer converted it, is also kept on the click context (`given`),
    where `input.read_request` reads a command's request. The spelled-out signature is made
    when typer first asks for it (`Grouped`): a run builds one command, not all of them.
    """
    return functools.update_wrapper(Grouped(command), command)


class Grouped:
    """`grouped`'s callable: its type hints and signature read on first use (evaluating a
    command's annotations takes about a millisecond, and the app declares twenty)."""

    def __init__(self, command: Callable[..., None]) -> None:
        self.command = command

    @functools.cached_property
    def _hints(self) -> dict[str, Any]:
        return get_type_hints(self.command, include_extras=True)

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        hints = self._hints
        parameters = [
            option
            for parameter in inspect.signature(self.command).parameters.values()
            for option in spelled(hints.get(parameter.name, parameter.annotation), parameter)
        ]
        return inspect.Signature(parameters, return_annotation=None)

    def __call__(self, **values: Any) -> None:
        hints = self._hints
        context = next((name for name, hint in hints.items() if hint is typer.Context), None)
        if context is not None:
            values[context].meta[GIVEN] = dict(values)
        for name, hint in hints.items():
            if hint in GROUPS:
                values[name] = gathered(hint, values)
        self.command(**values)

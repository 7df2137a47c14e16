"""What each command does: call the public API with the parsed options, and print.

`app.py` declares the commands and their options and calls these keyword-only
functions. Each checks what it can before any work (the output path, the layer and
head against the model's config), so that torch is not imported for a bad argument,
then calls `attnviz`'s API, and prints what comes back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from attnviz import api
from attnviz.output import DATA_SUFFIXES, IMAGE_SUFFIXES, ImageStyle, check_output

if TYPE_CHECKING:
    from attnviz.analysis import Analysis, Prepared


@dataclass(frozen=True)
class Input:
    """What to analyse: the text (and its pair), the model, truncation, mask, cache, dtype."""

    text: str
    model: str | None = None
    truncate: bool = False
    pair: str | None = None
    mask: str = "none"  # "causal": a what-if mask
    cache: bool = True  # read and write the attention cache
    dtype: str = "float32"  # what the encoder computes in


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"


def _prepare(inp: Input) -> Prepared:
    prepared = api.prepare(
        inp.text, pair=inp.pair, model=inp.model, truncate=inp.truncate, cache=inp.cache
    )
    if prepared.dropped or prepared.pieces.cut:
        rest = f" and the last {prepared.pieces.cut:,} characters" if prepared.pieces.cut else ""
        print(
            f"note: --truncate dropped the last {prepared.dropped} pieces{rest} "
            f"(the model takes {len(prepared.pieces)})",
            file=sys.stderr,
        )
    return prepared


def _analyse(
    inp: Input,
    out: Path | None,
    style: ImageStyle,
    *,
    allowed: tuple[str, ...] = IMAGE_SUFFIXES,
    layer: int | None = None,
    head: int | None = None,
    heads: Sequence[int] | None = None,
) -> Analysis:
    """Check the output and the layer and head (cheaply, before torch), then compute."""
    if out is not None:
        check_output(out, allowed, style)
    prepared = _prepare(inp)
    prepared.check(layer=layer, head=head, heads=heads)
    return prepared.analyse(mask=inp.mask, dtype=inp.dtype, cache=inp.cache)


def _wrote(out: Path | None) -> None:
    if out is not None:
        from attnviz.cli.errors import printable

        print(f"wrote {printable(str(out))}", file=sys.stderr)


def _json(record: Any) -> None:
    print(json.dumps(record, ensure_ascii=False))


def show(
    console: Console,
    inp: Input,
    *,
    layer: int,
    head: int | None,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
) -> None:
    """One heatmap: a layer's head, or the mean over its heads."""
    analysis = _analyse(inp, out, style, layer=layer, head=head)
    view = analysis.view(layer, head, units)
    if out is not None:
        view.save(out, **dataclasses.asdict(style))
    if as_json:
        _json(view.to_dict())
    else:
        console.print(view)
    _wrote(out)


def heads(
    console: Console,
    inp: Input,
    *,
    layer: int,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
) -> None:
    """Every head of one layer (or the `subset` of heads), as a grid of small heatmaps."""
    analysis = _analyse(inp, out, style, layer=layer, heads=subset)
    view = analysis.heads(layer, subset, units)
    if out is not None:
        view.save(out, **dataclasses.asdict(style))
    console.print(view)
    _wrote(out)


def model_view(
    console: Console,
    inp: Input,
    *,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
) -> None:
    """Every layer and head (or the `subset` of heads in every layer) as one grid."""
    analysis = _analyse(inp, out, style, heads=subset)
    view = analysis.model_view(subset, units)
    if out is not None:
        view.save(out, **dataclasses.asdict(style))
    console.print(view)
    _wrote(out)


def explain(
    console: Console,
    inp: Input,
    *,
    token: str | None,
    index: int | None,
    layer: int,
    head: int,
    lang: str,
) -> None:
    """One query's attention, step by step, on the model's own numbers."""
    from attnviz.i18n import check_lang

    lang = check_lang(lang)
    explanation = _prepare(inp).explain(
        token=token, index=index, layer=layer, head=head, lang=lang, mask=inp.mask
    )
    console.print(explanation)


def rollout(
    console: Console,
    inp: Input,
    *,
    upto: int,
    units: str,
    top: int,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
) -> None:
    """Attention rollout through layer `upto`: how much each token draws from each input."""
    analysis = _analyse(inp, out, style, layer=upto)
    view = analysis.rollout(upto, units, top)
    if out is not None:
        view.save(out, **dataclasses.asdict(style))
    if as_json:
        _json(view.to_dict())
    else:
        console.print(view)
    _wrote(out)


def export(
    inp: Input,
    *,
    out: Path,
    view: str,
    layer: int,
    head: int | None,
    units: str,
    style: ImageStyle,
) -> None:
    """Write an image of a view, or the raw attention data (.npz / .json)."""
    allowed = IMAGE_SUFFIXES + DATA_SUFFIXES
    analysis = _analyse(inp, out, style, allowed=allowed, layer=layer, head=head)
    analysis.save(out, view, layer=layer, head=head, units=units, **dataclasses.asdict(style))
    _wrote(out)


def stats(
    console: Console,
    texts: Iterable[str],
    *,
    model: str | None,
    truncate: bool,
    sort: str,
    top: int | None,
    as_json: bool,
    out: Path | None,
    style: ImageStyle,
    batching: BatchOptions,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019), as a table, JSON or a figure."""
    from attnviz.perf import reuse_freed_memory
    from attnviz.stats import sort_records

    sort_records([], sort, top)  # reject a bad --sort or --top before any work
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, style)
    reuse_freed_memory()  # a command, not a library call: the process ends with it
    with _progress(len(texts) if isinstance(texts, list) else None) as advance:
        result = api.head_stats(
            texts,
            model=model,
            truncate=truncate,
            batch_size=batching.batch_size,
            device=batching.device,
            threads=batching.threads,
            dtype=batching.dtype,
            progress=advance,
        )
    if result.dropped:
        print(f"note: --truncate dropped {result.dropped} pieces in all", file=sys.stderr)
    if out is not None:
        result.save(
            out, dpi=style.dpi, cmap=style.cmap, theme=style.theme, transparent=style.transparent
        )
    shown = result.sorted(sort, top)
    if as_json:
        _json(shown)
    else:
        from attnviz.render.stats import StatsTable

        console.print(StatsTable(shown, title=result.title))
    _wrote(out)


@contextlib.contextmanager
def _progress(total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; `advance(n)` counts n sentences.

    `total` is None for a corpus read as it runs (a file, stdin): the bar counts.
    """
    from rich.progress import Progress

    from attnviz.cli.input import console_width

    err = Console(stderr=True, width=console_width())
    # Drawn only when a batch ends (no refresh thread): stderr is kept silent during calls
    # into the tokenizer (attnviz.errors.quiet_panics), and a frame lost there would
    # leave the bar's cursor moves out of step.
    # A real terminal only: FORCE_COLOR makes rich call a redirected stderr a terminal.
    shown = err.is_terminal and sys.stderr.isatty()
    with Progress(console=err, transient=True, disable=not shown, auto_refresh=False) as bar:
        task = bar.add_task("sentences", total=total)

        def advance(n: int) -> None:
            bar.advance(task, n)
            bar.refresh()

        yield advance


def tokens(console: Console, inp: Input) -> None:
    """The pieces of the text: index, piece, id, word, character span (no weights loaded)."""
    from rich.table import Table

    pieces = _prepare(inp).pieces
    words = pieces.words()
    word_of = {i: (w, word.label) for w, word in enumerate(words) for i in word.pieces}
    table = Table(title=f"{len(pieces)} pieces, {len(words)} words")
    for name, justify in (
        ("index", "right"),
        ("piece", "left"),
        ("id", "right"),
        ("word", "left"),
        ("span", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, piece in enumerate(pieces.tokens):
        w, label = word_of[i]
        start, end = pieces.offsets[i]
        span = "" if pieces.sequence_ids[i] is None else f"{start}–{end}"
        table.add_row(str(i), Text(piece), str(pieces.ids[i]), Text(f"{w} {label}"), span)
    console.print(table)


def info(console: Console, model: str | None) -> None:
    """The model's shape and where it was loaded from (no weights loaded)."""
    from rich.table import Table

    from attnviz.families import describe, read_config
    from attnviz.locate import locate
    from attnviz.weights import WEIGHT_FILES, count_parameters

    source = locate(model)
    shape = describe(read_config(source.folder))
    weights = next((n for n in WEIGHT_FILES if (source.folder / n).is_file()), "none")
    rows: list[tuple[str, Any]] = [
        ("model", source.name),
        ("family", shape.family),
        ("layers", shape.layers),
        ("heads per layer", shape.heads),
        ("hidden size", shape.hidden),
        ("head size", shape.head_size),
        ("feed-forward size", shape.intermediate),
        ("vocabulary", shape.vocab),
        ("max tokens", shape.max_tokens),
        ("activation", shape.activation),
        ("parameters", f"{count_parameters(source.folder):,} (encoder)"),
        ("weights", weights),
        ("loaded from", f"{source.folder} ({source.origin})"),
    ]
    if shape.embedding_size != shape.hidden:
        rows.insert(5, ("embedding size", shape.embedding_size))
    if shape.shared_layers:
        rows.insert(3, ("layer weights", "one set, shared by every layer"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, Text(str(value)))
    console.print(table)


def cache_info(console: Console) -> None:
    """The cache's folder, entries, size and limit."""
    import os

    from attnviz import cache

    state = cache.info()
    folder = state.folder
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not cache.cache_enabled(False):
        status = "off (ATTNVIZ_NO_CACHE is set)"
    elif not existing.is_dir() or not os.access(existing, os.W_OK):
        status = f"unusable: {existing} is not a writable folder (set ATTNVIZ_CACHE_DIR)"
    else:
        status = "on"
    console.print(
        Text(
            f"folder   {folder}\n"
            f"entries  {state.entries}\n"
            f"size     {_megabytes(state.bytes)} of {_megabytes(state.limit_bytes)}\n"
            f"status   {status}"
        )
    )


def _megabytes(size: int) -> str:
    from attnviz.cache import MB

    return f"{size / MB:.1f} MB" if size < 100 * MB else f"{size / MB:.0f} MB"


def cache_clear(console: Console) -> None:
    """Remove every cache entry."""
    from attnviz import cache

    entries, size = cache.clear()
    console.print(f"removed {entries} entries ({_megabytes(size)}) from {cache.cache_dir()}")

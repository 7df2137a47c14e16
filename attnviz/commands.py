"""What each CLI command does, as keyword-only functions of already-parsed options.

`cli.py` parses and validates options and calls these. Each function imports
the heavy parts (torch through `pipeline.compute`, matplotlib through
`render.image`) only when it needs them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.text import Text

from attnviz.errors import AttnvizError, BadInput
from attnviz.imports import import_quietly
from attnviz.output import DATA_SUFFIXES, IMAGE_SUFFIXES, atomic_write
from attnviz.pipeline import Analysis, Prepared, compute, prepare
from attnviz.views import merge_words, pair_marked, resolve_index, select


@dataclass(frozen=True)
class ImageOptions:
    dpi: int = 200
    cmap: str = "viridis"
    theme: str = "light"
    transparent: bool = False
    annotate: bool = False


@dataclass(frozen=True)
class Source:
    """What to analyse: the text (and its pair), the model, truncation, and any what-if mask."""

    text: str
    model: str | None = None
    truncate: bool = False
    pair: str | None = None
    causal: bool = False
    cache: bool = False  # read and write the attention cache
    dtype: str = "float32"  # what the encoder computes in


DPI_RANGE = (10, 1200)


def check_output(out: Path, allowed: tuple[str, ...], images: ImageOptions) -> None:
    """Reject a bad output path or image option before any work is done."""
    suffix = out.suffix.lower()
    if suffix not in allowed:
        raise BadInput(
            f"cannot write {out}: unknown extension {out.suffix or '(none)'}; "
            f"use one of {', '.join(allowed)}"
        )
    folder = out.parent if str(out.parent) else Path(".")
    if folder.exists() and not folder.is_dir():
        raise AttnvizError(f"cannot write {out}: {folder} is a file, not a folder")
    if not folder.is_dir():
        raise AttnvizError(f"cannot write {out}: folder {folder} does not exist; create it first")
    if out.is_dir():
        raise AttnvizError(f"cannot write {out}: it is a folder; give a file name inside it")
    if suffix in IMAGE_SUFFIXES:
        low, high = DPI_RANGE
        if not low <= images.dpi <= high:
            raise BadInput(
                f"--dpi {images.dpi} is out of range: use {low}..{high} (200 is the default, "
                "300 suits print)"
            )
        import_quietly("attnviz.render.image")  # matplotlib, like torch, slowed by the GC
        from attnviz.render.image import check_colormap

        check_colormap(images.cmap)


def _prepare(source: Source) -> Prepared:
    prepared = prepare(source.text, model=source.model, pair=source.pair, truncate=source.truncate)
    if prepared.pieces.dropped:
        print(
            f"note: --truncate dropped the last {prepared.pieces.dropped} pieces "
            f"(the model takes {len(prepared.pieces)})",
            file=sys.stderr,
        )
    return prepared


@dataclass(frozen=True)
class _Run:
    """A computed input with the layer (and head) the user asked for, resolved."""

    analysis: Analysis
    layer: int
    head: int | None
    heads: list[int] | None = None  # a subset of heads for grids; None is every head

    @property
    def model(self) -> str:
        """The model's name for titles, marked when a what-if mask changed it."""
        name = self.analysis.model.name
        if self.analysis.dtype != "float32":
            name += f" (in {self.analysis.dtype})"
        return f"{name} (modified: causal mask)" if self.analysis.causal else name

    def in_units(
        self, matrix: np.ndarray, words: bool, *, marked: bool = True
    ) -> tuple[np.ndarray, list[str]]:
        """`matrix` (..., T, T) over pieces, or merged into words, with its labels.

        `marked` labels the first piece (or word) of a sentence pair's B with `B:`, for
        display; data (JSON) gets the plain labels and `pair_start` instead.
        """
        if words:
            matrix = merge_words(matrix, [w.pieces for w in self.analysis.pieces.words()])
        return matrix, self.labels(words, marked=marked)

    def labels(self, words: bool, *, marked: bool = True) -> list[str]:
        """The labels of pieces or words (B's start marked `B:` when `marked`)."""
        pieces = self.analysis.pieces
        labels = [w.label for w in pieces.words()] if words else list(pieces.labels)
        return pair_marked(labels, self.pair_start(words)) if marked else labels

    def pair_start(self, words: bool) -> int | None:
        """Where sentence B starts, in pieces or words; None without a pair."""
        pieces = self.analysis.pieces
        firsts = [w.pieces[0] for w in pieces.words()] if words else range(len(pieces))
        seqs = [pieces.sequence_ids[i] for i in firsts]
        return next((i for i, seq in enumerate(seqs) if seq == 1), None)

    def heatmap(self, words: bool) -> tuple[np.ndarray, list[str], str]:
        """The chosen head (or the head mean) of the chosen layer, its labels and title."""
        matrix = select(self.analysis.attentions, self.layer, self.head)  # (T, T)
        H = self.analysis.attentions.shape[1]
        which = f"head {self.head}" if self.head is not None else f"mean of {H} heads"
        return *self.in_units(matrix, words), f"{self.model} · layer {self.layer} · {which}"

    def grid(self, words: bool) -> tuple[np.ndarray, list[str], list[str], str]:
        """The chosen heads (all by default) of the chosen layer (h, T, T), labels and titles."""
        H = self.analysis.attentions.shape[1]
        chosen = list(range(H)) if self.heads is None else self.heads
        matrices, labels = self.in_units(self.analysis.attentions[self.layer, chosen], words)
        which = f"all {H} heads" if self.heads is None else f"heads {_listing(chosen)}"
        title = f"{self.model} · layer {self.layer} · {which}"
        return matrices, labels, [f"head {h}" for h in chosen], title


def _listing(numbers: Sequence[int]) -> str:
    return ",".join(str(n) for n in numbers)


def _run(
    source: Source,
    layer: int,
    head: int | None,
    *,
    heads: Sequence[int] | None = None,
    out: Path | None = None,
    allowed: tuple[str, ...] = IMAGE_SUFFIXES,
    images: ImageOptions | None = None,
) -> _Run:
    """Check the options (cheaply, before torch), then compute the attentions."""
    if out is not None:
        check_output(out, allowed, images or ImageOptions())
    prepared = _prepare(source)
    resolved_layer = resolve_index(layer, prepared.num_layers, "layer")
    resolved_head = None if head is None else resolve_index(head, prepared.num_heads, "head")
    subset = resolve_heads(heads, prepared.num_heads)
    analysis = compute(prepared, causal=source.causal, use_cache=source.cache, dtype=source.dtype)
    return _Run(analysis, resolved_layer, resolved_head, subset)


def _write_heatmap(
    out: Path, matrix: np.ndarray, labels: list[str], title: str, images: ImageOptions
) -> None:
    from attnviz.render.image import heatmap_figure, save_figure

    figure = heatmap_figure(
        matrix,
        labels,
        title=title,
        cmap=images.cmap,
        theme=images.theme,
        annotate=images.annotate,
    )
    save_figure(figure, out, dpi=images.dpi, transparent=images.transparent)


def resolve_heads(heads: Sequence[int] | None, num_heads: int) -> list[int] | None:
    """`--heads 0,3,-1` as 0-based head numbers in the order given; None means every head."""
    if heads is None:
        return None
    resolved = [resolve_index(h, num_heads, "head") for h in heads]
    repeated = sorted({h for h in resolved if resolved.count(h) > 1})
    if repeated:
        raise BadInput(f"--heads names head {_listing(repeated)} twice: list each head once")
    return resolved


def _write_grid(
    out: Path,
    matrices: np.ndarray,
    labels: list[str],
    panel_titles: list[str],
    title: str,
    images: ImageOptions,
    columns: int | None = None,
) -> None:
    from attnviz.render.image import grid_figure, save_figure

    figure = grid_figure(
        matrices,
        labels,
        panel_titles=panel_titles,
        title=title,
        cmap=images.cmap,
        theme=images.theme,
        annotate=images.annotate,
        columns=columns,
    )
    save_figure(figure, out, dpi=images.dpi, transparent=images.transparent)


def show(
    console: Console,
    source: Source,
    *,
    layer: int,
    head: int | None,
    words: bool,
    out: Path | None,
    as_json: bool,
    images: ImageOptions,
) -> None:
    """One heatmap: a layer's head, or the mean over its heads."""
    run = _run(source, layer, head, out=out, images=images)
    matrix, labels, title = run.heatmap(words)
    if out is not None:
        _write_heatmap(out, matrix, labels, title, images)
    if as_json:
        record = {
            "model": run.model,
            "layer": run.layer,
            "head": run.head,
            "tokens": run.labels(words, marked=False),
            "pair_start": run.pair_start(words),
            "weights": matrix.tolist(),
        }
        print(json.dumps(record, ensure_ascii=False))
    else:
        from attnviz.render.terminal import Heatmap

        console.print(Heatmap(matrix, labels, title=title))
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def heads(
    console: Console,
    source: Source,
    *,
    layer: int,
    words: bool,
    out: Path | None,
    images: ImageOptions,
    subset: Sequence[int] | None = None,
) -> None:
    """Every head of one layer (or the `subset` of heads), as a grid of small heatmaps."""
    run = _run(source, layer, None, heads=subset, out=out, images=images)
    matrices, labels, panel_titles, title = run.grid(words)  # (h, W, W)
    if out is not None:
        _write_grid(out, matrices, labels, panel_titles, title, images)
    from attnviz.render.terminal import HeadGrid

    console.print(HeadGrid(matrices, labels, panel_titles=panel_titles, title=title))
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def model_view(
    console: Console,
    source: Source,
    *,
    words: bool,
    out: Path | None,
    images: ImageOptions,
    subset: Sequence[int] | None = None,
) -> None:
    """Every layer and head (or the `subset` of heads in every layer) as one grid."""
    run = _run(source, -1, None, heads=subset, out=out, images=images)
    L, H = run.analysis.attentions.shape[:2]
    chosen = list(range(H)) if run.heads is None else run.heads
    per_layer = run.analysis.attentions[:, chosen]  # (L, h, T, T)
    matrices, labels = run.in_units(per_layer.reshape(-1, *per_layer.shape[2:]), words)
    panel_titles = [f"L{layer} H{head}" for layer in range(L) for head in chosen]
    which = f"all {H} heads" if run.heads is None else f"heads {_listing(chosen)}"
    title = f"{run.model} · {L} layers × {which}"
    if out is not None:
        _write_grid(out, matrices, labels, panel_titles, title, images, columns=len(chosen))
    from attnviz.render.terminal import HeadGrid

    console.print(
        HeadGrid(matrices, labels, panel_titles=panel_titles, title=title, columns=len(chosen))
    )
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def explain(
    console: Console,
    source: Source,
    *,
    token: str | None,
    index: int | None,
    layer: int,
    head: int,
    lang: str,
) -> None:
    """One query's attention, step by step, on the model's own numbers."""
    from attnviz.explain import explain as explain_query
    from attnviz.explain import find_query
    from attnviz.i18n import check_lang

    lang = check_lang(lang)
    prepared = _prepare(source)
    choice = find_query(prepared.pieces, token=token, index=index, lang=lang)
    resolve_index(layer, prepared.num_layers, "layer")
    resolve_index(head, prepared.num_heads, "head")
    explanation = explain_query(
        prepared, layer=layer, head=head, query=choice.index, causal=source.causal
    )
    from attnviz.render.explain import ExplanationView

    console.print(ExplanationView(explanation, lang))


def rollout(
    console: Console,
    source: Source,
    *,
    upto: int,
    words: bool,
    top: int,
    out: Path | None,
    as_json: bool,
    images: ImageOptions,
) -> None:
    """Attention rollout through layer `upto`: how much each token draws from each input."""
    from attnviz.rollout import rollout as roll
    from attnviz.rollout import top_sources

    run = _run(source, upto, None, out=out, images=images)
    chained = roll(run.analysis.attentions, run.layer)  # (T, T) over pieces
    matrix, labels = run.in_units(chained, words)  # rows still sum to 1
    title = f"{run.model} · rollout through layer {run.layer}"
    if out is not None:
        _write_heatmap(out, matrix, labels, title, images)
    if as_json:
        record = {
            "tokens": run.labels(words, marked=False),
            "pair_start": run.pair_start(words),
            "rollout": matrix.tolist(),
        }
        print(json.dumps(record, ensure_ascii=False))
    else:
        from attnviz.render.stats import SourcesTable
        from attnviz.render.terminal import Heatmap

        console.print(Heatmap(matrix, labels, title=title))
        sources = top_sources(matrix, min(top, len(labels)))
        console.print(SourcesTable(labels, sources, title="what each token draws most from"))
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def tokens(console: Console, source: Source) -> None:
    """The pieces of the text: index, piece, id, word, character span (no weights loaded)."""
    from rich.table import Table

    pieces = _prepare(source).pieces
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

    from attnviz.weights import WEIGHT_FILES, count_parameters, describe, locate, read_config

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


def export(
    source: Source,
    *,
    out: Path,
    view: str,
    layer: int,
    head: int | None,
    words: bool,
    images: ImageOptions,
) -> None:
    """Write an image of a view, or the raw attention data (.npz / .json)."""
    run = _run(source, layer, head, out=out, allowed=IMAGE_SUFFIXES + DATA_SUFFIXES, images=images)
    if out.suffix.lower() in DATA_SUFFIXES:
        write_data(out, run.analysis)
    elif view == "heads":
        _write_grid(out, *run.grid(words), images)
    else:
        _write_heatmap(out, *run.heatmap(words), images)
    print(f"wrote {out}", file=sys.stderr)


def write_data(out: Path, analysis: Analysis) -> None:
    """The raw attentions over the model's own pieces, as .npz (no pickle) or .json."""
    attentions = analysis.attentions.astype(np.float32)  # (L, H, T, T)
    pieces = analysis.pieces
    if out.suffix.lower() == ".npz":
        with atomic_write(out, "wb") as handle:
            np.savez(
                handle,
                attentions=attentions,
                tokens=np.array(pieces.tokens, dtype=np.str_),
                input_ids=np.array(pieces.ids, dtype=np.int64),
                token_type_ids=np.array(pieces.type_ids, dtype=np.int64),
                causal=np.array(analysis.causal),
                dtype=np.array(analysis.dtype, dtype=np.str_),
            )
    else:
        record = {
            "model": analysis.model.name,
            "causal": analysis.causal,
            "dtype": analysis.dtype,
            "tokens": pieces.tokens,
            "input_ids": pieces.ids,
            "token_type_ids": pieces.type_ids,
            "attentions": attentions.tolist(),
        }
        with atomic_write(out, "w") as handle:
            json.dump(record, handle, ensure_ascii=False)


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

"""What each CLI command does, as keyword-only functions of already-parsed options.

`cli.py` parses and validates options and calls these. Each function imports
the heavy parts (torch through `pipeline.compute`, matplotlib through
`render.image`) only when it needs them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from attnviz.errors import BadInput
from attnviz.output import atomic_write
from attnviz.pipeline import Analysis, Prepared, compute, prepare
from attnviz.views import merge_words, resolve_index, select

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")
DATA_SUFFIXES = (".npz", ".json")


@dataclass(frozen=True)
class ImageOptions:
    dpi: int = 200
    cmap: str = "viridis"
    theme: str = "light"
    transparent: bool = False
    annotate: bool = False


@dataclass(frozen=True)
class Source:
    """What to analyse: the text, the model, and whether to truncate."""

    text: str
    model: str | None = None
    truncate: bool = False


def check_output(out: Path, allowed: tuple[str, ...], images: ImageOptions) -> None:
    """Reject a bad output path or image option before any work is done."""
    suffix = out.suffix.lower()
    if suffix not in allowed:
        raise BadInput(
            f"cannot write {out}: unknown extension {out.suffix or '(none)'}; "
            f"use one of {', '.join(allowed)}"
        )
    if images.dpi <= 0:
        raise BadInput(f"--dpi must be a positive number, not {images.dpi}: try --dpi 200")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise BadInput(f"cannot write {out}: folder {folder} does not exist; create it first")
    if out.is_dir():
        raise BadInput(f"cannot write {out}: it is a folder; give a file name such as {out}/a.png")
    if suffix in IMAGE_SUFFIXES:
        from attnviz.render.image import check_colormap

        check_colormap(images.cmap)


def _prepare(source: Source) -> Prepared:
    prepared = prepare(source.text, model=source.model, truncate=source.truncate)
    if prepared.pieces.dropped:
        print(
            f"note: --truncate dropped the last {prepared.pieces.dropped} pieces "
            f"(the model takes {len(prepared.pieces)})",
            file=sys.stderr,
        )
    return prepared


def _check_layer_head(prepared: Prepared, layer: int, head: int | None) -> tuple[int, int | None]:
    resolved_layer = resolve_index(layer, prepared.num_layers, "layer")
    resolved_head = None if head is None else resolve_index(head, prepared.num_heads, "head")
    return resolved_layer, resolved_head


def _in_units(analysis: Analysis, matrix: np.ndarray, words: bool) -> tuple[np.ndarray, list[str]]:
    """`matrix` (..., T, T) over pieces, or merged into words, with its labels."""
    if not words:
        return matrix, list(analysis.pieces.labels)
    groups = analysis.pieces.words()
    return merge_words(matrix, [w.pieces for w in groups]), [w.label for w in groups]


def _title(analysis: Analysis, layer: int, head: int | None, num_heads: int) -> str:
    which = f"head {head}" if head is not None else f"mean of {num_heads} heads"
    return f"{analysis.model.name} · layer {layer} · {which}"


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
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, images)
    prepared = _prepare(source)
    layer, head = _check_layer_head(prepared, layer, head)
    analysis = compute(prepared)
    matrix, labels = _in_units(analysis, select(analysis.attentions, layer, head), words)
    title = _title(analysis, layer, head, prepared.num_heads)
    if out is not None:
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
    if as_json:
        record = {
            "model": analysis.model.name,
            "layer": layer,
            "head": head,
            "tokens": labels,
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
) -> None:
    """Every head of one layer, as a grid of small heatmaps."""
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, images)
    prepared = _prepare(source)
    layer, _ = _check_layer_head(prepared, layer, None)
    analysis = compute(prepared)
    matrices, labels = _in_units(analysis, analysis.attentions[layer], words)  # (H, W, W)
    panel_titles = [f"head {h}" for h in range(matrices.shape[0])]
    title = f"{analysis.model.name} · layer {layer} · all {matrices.shape[0]} heads"
    if out is not None:
        _write_grid(out, matrices, labels, panel_titles, title, images)
    from attnviz.render.terminal import HeadGrid

    console.print(HeadGrid(matrices, labels, panel_titles=panel_titles, title=title))
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


def _write_grid(
    out: Path,
    matrices: np.ndarray,
    labels: list[str],
    panel_titles: list[str],
    title: str,
    images: ImageOptions,
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
    )
    save_figure(figure, out, dpi=images.dpi, transparent=images.transparent)


def tokens(console: Console, source: Source) -> None:
    """The pieces of the text: index, piece, id, word, character span (no weights loaded)."""
    from rich.table import Table

    pieces = _prepare(source).pieces
    word_of = {i: (w, word.label) for w, word in enumerate(pieces.words()) for i in word.pieces}
    table = Table(title=f"{len(pieces)} pieces, {len(pieces.words())} words")
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
        table.add_row(str(i), piece, str(pieces.ids[i]), f"{w} {label}", span)
    console.print(table)


def info(console: Console, model: str | None) -> None:
    """The model's shape and where it was loaded from (no weights loaded)."""
    from rich.table import Table

    from attnviz.weights import WEIGHT_FILES, count_parameters, locate, read_config

    source = locate(model)
    raw = read_config(source.folder)
    layers, heads_ = raw.get("num_hidden_layers", 12), raw.get("num_attention_heads", 12)
    hidden = raw.get("hidden_size", 768)
    weights = next((n for n in WEIGHT_FILES if (source.folder / n).is_file()), "none")
    rows: list[tuple[str, Any]] = [
        ("model", source.name),
        ("family", "BERT"),
        ("layers", layers),
        ("heads per layer", heads_),
        ("hidden size", hidden),
        ("head size", hidden // heads_),
        ("feed-forward size", raw.get("intermediate_size", 3072)),
        ("vocabulary", raw.get("vocab_size", 30522)),
        ("max positions", raw.get("max_position_embeddings", 512)),
        ("activation", raw.get("hidden_act", "gelu")),
        ("parameters", f"{count_parameters(source.folder):,} (encoder)"),
        ("weights", weights),
        ("loaded from", f"{source.folder} ({source.origin})"),
    ]
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, str(value))
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
    check_output(out, IMAGE_SUFFIXES + DATA_SUFFIXES, images)
    prepared = _prepare(source)
    layer, head = _check_layer_head(prepared, layer, head)
    analysis = compute(prepared)
    suffix = out.suffix.lower()
    if suffix in DATA_SUFFIXES:
        write_data(out, analysis)
    elif view == "heads":
        matrices, labels = _in_units(analysis, analysis.attentions[layer], words)
        panel_titles = [f"head {h}" for h in range(matrices.shape[0])]
        title = f"{analysis.model.name} · layer {layer} · all {matrices.shape[0]} heads"
        _write_grid(out, matrices, labels, panel_titles, title, images)
    else:
        from attnviz.render.image import heatmap_figure, save_figure

        matrix, labels = _in_units(analysis, select(analysis.attentions, layer, head), words)
        figure = heatmap_figure(
            matrix,
            labels,
            title=_title(analysis, layer, head, prepared.num_heads),
            cmap=images.cmap,
            theme=images.theme,
            annotate=images.annotate,
        )
        save_figure(figure, out, dpi=images.dpi, transparent=images.transparent)
    print(f"wrote {out}", file=sys.stderr)


def write_data(out: Path, analysis: Analysis) -> None:
    """The raw attentions over the model's own pieces, as .npz (no pickle) or .json."""
    attentions = analysis.attentions.astype(np.float32)  # (L, H, T, T)
    tokens_ = np.array(analysis.pieces.tokens, dtype=np.str_)
    input_ids = np.array(analysis.pieces.ids, dtype=np.int64)
    if out.suffix.lower() == ".npz":
        with atomic_write(out, "wb") as handle:
            np.savez(handle, attentions=attentions, tokens=tokens_, input_ids=input_ids)
    else:
        record = {
            "model": analysis.model.name,
            "tokens": analysis.pieces.tokens,
            "input_ids": analysis.pieces.ids,
            "attentions": attentions.tolist(),
        }
        with atomic_write(out, "w") as handle:
            json.dump(record, handle, ensure_ascii=False)

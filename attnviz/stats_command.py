"""The `attnviz stats` command: head statistics over a corpus, run in padded batches."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from attnviz.commands import ImageOptions, check_output
from attnviz.output import IMAGE_SUFFIXES
from attnviz.pipeline import Prepared


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"


def stats(
    console: Console,
    texts: list[str],
    *,
    model: str | None,
    truncate: bool,
    sort: str,
    top: int | None,
    as_json: bool,
    out: Path | None,
    images: ImageOptions,
    batching: BatchOptions,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019), as a table, JSON or a figure."""
    from attnviz.pipeline import compute_batches, prepare_corpus, reuse_freed_memory
    from attnviz.stats import HeadStats, sort_records, token_kinds

    sort_records([], sort, top)  # reject a bad --sort or --top before any work
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, images)
    corpus = prepare_corpus(texts, model=model, truncate=truncate)
    dropped = sum(p.dropped for p in corpus.pieces)
    if dropped:
        print(f"note: --truncate dropped {dropped} pieces in all", file=sys.stderr)
    kinds = [token_kinds(p) for p in corpus.pieces]
    first = corpus.pieces[0]
    probe = Prepared(corpus.model, corpus.config, first)
    accumulator = HeadStats(probe.num_layers, probe.num_heads)
    reuse_freed_memory()  # a command, not a library call: the process ends with it
    with _progress(len(texts)) as advance:
        for batch in compute_batches(
            corpus,
            batch_size=batching.batch_size,
            device=batching.device,
            threads=batching.threads,
            dtype=batching.dtype,
        ):
            accumulator.add_batch(
                batch.attentions, batch.lengths, [kinds[i] for i in batch.indices]
            )
            advance(len(batch.indices))
    records = accumulator.result()
    name = corpus.model.name
    if batching.dtype != "float32":
        name += f" (in {batching.dtype})"
    n = accumulator.sentences
    title = (
        f"{name} · head statistics over {n} sentence{'s' if n != 1 else ''} "
        f"({accumulator.queries} query positions)"
    )
    if out is not None:
        from attnviz.render.image import save_figure
        from attnviz.render.stats_image import stats_figure

        figure = stats_figure(
            records,
            probe.num_layers,
            probe.num_heads,
            title=title,
            cmap=images.cmap,
            theme=images.theme,
        )
        save_figure(figure, out, dpi=images.dpi, transparent=images.transparent)
    shown = sort_records(records, sort, top)
    if as_json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        from attnviz.render.stats import StatsTable

        console.print(StatsTable(shown, title=title))
    if out is not None:
        print(f"wrote {out}", file=sys.stderr)


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; `advance(n)` counts n sentences."""
    from rich.progress import Progress

    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("sentences", total=total)
        yield lambda n: bar.advance(task, n)

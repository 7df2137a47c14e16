"""`attnviz stats`: head statistics over a corpus (Clark et al. 2019)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.printing import print_json, progress, wrote
from attnviz.output import IMAGE_SUFFIXES, ImageStyle, check_output


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"


def run(
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
    quiet: bool = False,
    shared_scale: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    lang: str = "en",
    engine: str = "auto",
    exclude: Sequence[str] | None = None,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019), as a table, JSON or a figure;
    without the `exclude`d pieces, rows renormalised, when asked."""
    from attnviz.perf import reuse_freed_memory

    notices.quiet = quiet  # the engine's note obeys --quiet
    # A bad --sort or --top, or --engine: before any work.
    api.check_head_stats(by=sort, top=top, model=model, engine=engine)
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, style)
    reuse_freed_memory()  # a command, not a library call: the process ends with it
    with progress(len(texts) if isinstance(texts, list) else None) as advance:
        result = api.head_stats(
            texts,
            model=model,
            truncate=truncate,
            max_tokens=max_tokens,
            bos=bos,
            batch_size=batching.batch_size,
            device=batching.device,
            threads=batching.threads,
            dtype=batching.dtype,
            progress=advance,
            lang=lang,
            engine=engine,
            exclude=exclude,
        )
    if result.dropped and not quiet:
        print(f"note: --truncate dropped {result.dropped} pieces in all", file=sys.stderr)
    if out is not None:
        result.save(
            out,
            dpi=style.dpi,
            cmap=style.cmap,
            theme=style.theme,
            transparent=style.transparent,
            shared_scale=shared_scale,
        )
    shown = result.sorted(sort, top)
    if as_json:
        print_json(shown)
    else:
        console.print(result.table(shown))
    wrote(out)

"""`attnviz stats`: head statistics over a corpus (Clark et al. 2019)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import print_json, progress, wrote
from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, check_output


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None


def run(
    output: Output,
    request: Request,
    texts: Iterable[str],
    *,
    sort: str,
    top: int | None,
    batching: BatchOptions = BatchOptions(),
    shared_scale: bool = True,
    exclude: Sequence[str] | None = None,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019), as a table, JSON or a figure;
    without the `exclude`d pieces, rows renormalised, when asked. The `request` says how each
    text is read (its own text unused)."""
    from attnviz.perf import reuse_freed_memory

    if output.style.annotate:
        raise BadInput("--annotate does not apply to the statistics figure: drop it")
    if not shared_scale and output.out is None:
        raise BadInput("--own-scales gives each panel of the figure its own colour scale: add "
                       "--out FILE (.png, .svg or .pdf), or leave it out")  # fmt: skip
    out, style, model, engine = output.out, output.style, request.model, request.engine
    quiet = request.quiet
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
            truncate=request.truncate,
            max_tokens=request.max_tokens,
            bos=request.bos,
            batch_size=batching.batch_size,
            device=batching.device,
            threads=batching.threads,
            dtype=request.dtype,
            progress=advance,
            lang=request.lang,
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
    if output.as_json:
        print_json(shown)
    else:
        output.console.print(result.table(shown))
    wrote(out)

"""`attnviz stats`: head statistics over a corpus (Clark et al. 2019)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import print_json, progress, wrote
from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, check_output

if TYPE_CHECKING:
    from attnviz.measures.stats import HeadStats


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None


@dataclass(frozen=True)
class Slicing:
    """Corpus work over many processes: one slice into a partial file, or a Dask cluster."""

    shard: str | None = None  # "I/N"
    partial: Path | None = None
    dask: str | None = None  # a scheduler's address

    def check(self, output: Output) -> None:
        """Refuse, before any work, what does not go together."""
        if self.dask is not None and (self.shard is not None or self.partial is not None):
            raise BadInput("{dask} cuts the input into a slice a worker and merges them: drop "
                           "{shard} and {partial}", param=("dask", "shard", "partial"))  # fmt: skip
        if self.shard is not None and self.partial is None:
            raise BadInput("{shard} computes one slice: add {partial} FILE to keep its sums, "
                           "then attnviz merge the slices' files",
                           param=("shard", "partial"))  # fmt: skip
        if self.partial is not None:
            if output.out is not None or output.as_json:
                raise BadInput("{partial} writes the sums, not the result: drop {out} and "
                               "{json}, and give them to attnviz merge",
                               param=("partial", "out", "json"))  # fmt: skip
            folder = self.partial.parent
            if not folder.is_dir():
                raise BadInput(f"cannot write {self.partial}: no folder {folder}", param="partial")


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
    slicing: Slicing = Slicing(),
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
    slicing.check(output)
    reuse_freed_memory()  # a command, not a library call: the process ends with it
    options: dict[str, Any] = {
               "model": model, "truncate": request.truncate, "max_tokens": request.max_tokens,
               "bos": request.bos, "batch_size": batching.batch_size, "device": batching.device,
               "threads": batching.threads, "dtype": request.dtype, "lang": request.lang,
               "engine": engine, "exclude": exclude}  # fmt: skip
    if slicing.dask is not None:
        from attnviz.cluster import head_stats_on_dask

        result = head_stats_on_dask(texts, slicing.dask, **options)
    else:
        with progress(len(texts) if isinstance(texts, list) else None) as advance:
            part = api.partial_head_stats(
                texts, shard=slicing.shard or (1, 1), progress=advance, **options
            )
        if slicing.partial is not None:
            part.to_file(slicing.partial)
            wrote(slicing.partial)
            return
        result = part.result()
    show(output, result, sort=sort, top=top, shared_scale=shared_scale, quiet=quiet)


def show(
    output: Output, result: HeadStats, *, sort: str, top: int | None, shared_scale: bool,
    quiet: bool,
) -> None:  # fmt: skip
    """Print the statistics (a table or JSON) or write their figure, as `stats` does."""
    out, style = output.out, output.style
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

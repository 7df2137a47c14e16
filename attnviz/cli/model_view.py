"""`attnviz model`: every layer and head as one grid; pooled when the attention is too large."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from attnviz.cli.analysing import PAGES, analyse_request, encdec_model, prepare_request
from attnviz.cli.errors import defer_note
from attnviz.cli.input import Output, Request
from attnviz.cli.long import (
    draw_pooled,
    long_pieces,
    name_the_pool,
    pooled,
    refuse_pool_by,
    refuse_whole_json,
)
from attnviz.cli.options import POOLING, PoolOptions
from attnviz.cli.printing import save, wrote
from attnviz.errors import BadInput
from attnviz.limits import amount, attention_budget


def run(
    output: Output,
    request: Request,
    *,
    units: str,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pooling: PoolOptions = POOLING,
) -> None:
    """Every layer and head (or the `subset` of heads in every layer) as one grid; pooled in
    blocks of pieces (`pooling`) when asked, or when the input's whole attention is too large
    to keep (then 64 blocks a side)."""
    out, style, pool = output.out, output.style, pooling.pool
    plain = not (subset or exclude or request.pair is not None or request.mask != "none"
                 or encdec_model(request))  # what the pooled view can draw  # fmt: skip
    if pool is None and request.load is None and request.measure == "weight" and plain:
        try:
            prepared, hit = prepare_request(request, cached=True)
        except BadInput as exc:  # past the whole views' bound: the long views may read it
            name_the_pool(exc, request)
            long = long_pieces(request) if "pieces long" in exc.template else None
            if long is None:
                raise
            pool = -(-long // 64)
            if not request.quiet:
                defer_note(f"note: the text is {long:,} pieces long, more than the whole views "
                           f"read: drawing blocks of {pool} pieces, computed a block at a time "
                           f"(--pool {pool})")  # fmt: skip
    if pool is None and request.load is None and request.measure == "weight" and plain:
        whole = prepared.shape.layers * prepared.shape.heads * len(prepared.pieces) ** 2 * 4
        if hit is None and whole > attention_budget():
            pool = -(-len(prepared.pieces) // 64)
            if not request.quiet:
                defer_note(
                    f"note: the attention of every layer at {len(prepared.pieces):,} pieces "
                    f"would take {amount(whole)}: drawing blocks of {pool} pieces, computed a "
                    f"block at a time (--pool {pool})"
                )
    refuse_pool_by(pooling, pool)  # after the long input's own blocks
    if pool is not None:
        result = pooled(request, output, replace(pooling, pool=pool), subset, exclude)
        draw_pooled(output, result.model_view(lang=request.lang),
                    lambda: result.html("model", theme=style.theme, lang=request.lang),
                    result.pooled_dict)  # fmt: skip
        return
    refuse_whole_json(output.as_json)
    analysis = analyse_request(request, out, style, allowed=PAGES, heads=subset)
    view = analysis.model_view(
        subset, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    if out is not None:
        save(analysis, out, "model", style, request, heads=subset, units=units, exclude=exclude)
    output.console.print(view)
    wrote(out)

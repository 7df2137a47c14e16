"""`attnviz model`: every layer and head as one grid; pooled when the attention is too large."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from attnviz.cli.analysing import PAGES, analyse_request, encdec_model, prepare_request
from attnviz.cli.errors import defer_note
from attnviz.cli.input import Request
from attnviz.cli.long import (
    draw_pooled,
    long_pieces,
    name_the_pool,
    pooled,
    refuse_whole_json,
)
from attnviz.cli.printing import save, wrote
from attnviz.errors import BadInput
from attnviz.limits import amount, attention_budget
from attnviz.output import ImageStyle


def run(
    console: Console,
    request: Request,
    *,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
    as_json: bool = False,
) -> None:
    """Every layer and head (or the `subset` of heads in every layer) as one grid; pooled in
    blocks of `pool` pieces (`pool_by` mean or max) when asked, or when the input's whole
    attention is too large to keep (then 64 blocks a side)."""
    if pool is not None and request.load is not None:
        raise BadInput("{pool} computes the attention a block at a time: leave it out with "
                       "{load}", param=("pool", "load"))  # fmt: skip
    plain = not (subset or exclude or encdec_model(request))
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
    if pool is not None:
        result = pooled(request, out, style, pool, pool_by, subset, exclude)
        draw_pooled(console, result.model_view(lang=request.lang), out, style,
                    lambda: result.html("model", theme=style.theme, lang=request.lang),
                    result.pooled_dict if as_json else None)  # fmt: skip
        return
    refuse_whole_json(as_json)
    analysis = analyse_request(request, out, style, allowed=PAGES, heads=subset)
    view = analysis.model_view(
        subset, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    if out is not None:
        save(analysis, out, "model", style, request, heads=subset, units=units, exclude=exclude)
    console.print(view)
    wrote(out)

"""`attnviz heads`: every head of one layer as small heatmaps; pooled for long inputs."""

from __future__ import annotations

from collections.abc import Sequence

from attnviz.cli.analysing import PAGES, analyse_request
from attnviz.cli.input import Output, Request
from attnviz.cli.long import (
    draw_pooled,
    pooled,
    refuse_pool_by,
    refuse_whole_json,
    whole_or_pooled,
)
from attnviz.cli.options import POOLING, PoolOptions
from attnviz.cli.printing import save, wrote


def run(
    output: Output,
    request: Request,
    *,
    layer: int,
    units: str,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pooling: PoolOptions = POOLING,
) -> None:
    """Every head of one layer (or the `subset` of heads), as a grid of small heatmaps;
    pooled in blocks of pieces when asked."""
    out, style = output.out, output.style
    refuse_pool_by(pooling, pooling.pool)
    if pooling.pool is not None:
        result = pooled(request, output, pooling, subset, exclude, [layer])
        draw_pooled(output, result.heads_view(layer, lang=request.lang),
                    lambda: result.html("heads", layer=layer, theme=style.theme,
                                        lang=request.lang),
                    lambda: result.pooled_dict(layer, every_head=True))  # fmt: skip
        return
    refuse_whole_json(output.as_json)
    with whole_or_pooled(request, not subset and not exclude, query=False):
        analysis = analyse_request(request, out, style, allowed=PAGES, layer=layer, heads=subset,
                            view="heads", one_layer=True)  # fmt: skip
    view = analysis.heads(
        layer, subset, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    if out is not None:
        save(
            analysis,
            out,
            "heads",
            style,
            request,
            layer=layer,
            heads=subset,
            units=units,
            exclude=exclude,
        )
    output.console.print(view)
    wrote(out)

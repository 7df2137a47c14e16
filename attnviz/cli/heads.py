"""`attnviz heads`: every head of one layer as small heatmaps; pooled for long inputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from attnviz.cli.analysing import PAGES, analyse_request
from attnviz.cli.input import Request
from attnviz.cli.long import (
    check_long_shape,
    draw_pooled,
    pooled,
    refuse_whole_json,
    whole_or_pooled,
)
from attnviz.cli.printing import save, wrote
from attnviz.errors import BadInput
from attnviz.output import ImageStyle


def run(
    console: Console,
    request: Request,
    *,
    layer: int,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
    as_json: bool = False,
) -> None:
    """Every head of one layer (or the `subset` of heads), as a grid of small heatmaps;
    pooled in blocks of `pool` pieces when asked (`as_json`: the pooled maps as JSON)."""
    if pool is not None:
        if request.load is not None:
            raise BadInput("{pool} computes the attention a block at a time: leave it out "
                           "with {load}", param=("pool", "load"))  # fmt: skip
        check_long_shape(request, [layer])
        result = pooled(request, out, style, pool, pool_by, subset, exclude)
        data = (lambda: result.pooled_dict(layer, every_head=True)) if as_json else None
        draw_pooled(console, result.heads_view(layer, lang=request.lang), out, style,
                     lambda: result.html("heads", layer=layer, theme=style.theme,
                                         lang=request.lang), data)  # fmt: skip
        return
    refuse_whole_json(as_json)
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
    console.print(view)
    wrote(out)

"""`attnviz distance`: where each head looks, by distance, a block of queries at a time."""

from __future__ import annotations

from collections.abc import Sequence

from attnviz import api
from attnviz.cli.input import Output, Request
from attnviz.cli.long import check_long_shape
from attnviz.cli.printing import wrote
from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, check_output


def run(output: Output, request: Request, *, layers: Sequence[int] | None) -> None:
    """Each head's distance profile, sink share and kind, as a table (and an image in
    `output.style`'s colormap)."""
    out, console = output.out, output.console
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, output.style)
        if layers:  # the image was drawn of every layer, the --layer given dropped unsaid
            raise BadInput(
                "{out} draws every layer's heads: leave out {layer} (the table without {out} "
                "shows only those layers)",
                param=("out", "layer"),
            )
    check_long_shape(request, layers or ())
    result = api.analyse_long(request.text, model=request.model, max_tokens=request.max_tokens,
                              truncate=request.truncate, bos=request.bos,
                              dtype=request.dtype, engine=request.engine)  # fmt: skip
    table = result.profile_table(layers or None, lang=request.lang, width=console.width)
    if out is not None:
        from attnviz.render.saving import save_figure

        figure = result.profile_figure(output.style.cmap, lang=request.lang)
        save_figure(figure, out, dpi=200, transparent=False)
    console.print(table)
    wrote(out)

"""`attnviz show`: one layer's heatmap, or one query's row sorted; a long input pooled,
or read a row at a time."""

from __future__ import annotations

from collections.abc import Sequence

from attnviz import api
from attnviz.cache import views
from attnviz.cli.analysing import PAGES, analyse_request, encdec_model
from attnviz.cli.input import Output, Request
from attnviz.cli.long import (
    check_long_shape,
    draw_pooled,
    pooled,
    refuse_pair_and_mask,
    refuse_pool_by,
    too_long,
    whole_or_pooled,
)
from attnviz.cli.options import POOLING, PoolOptions
from attnviz.cli.printing import show_output
from attnviz.errors import BadInput
from attnviz.output import HTML_SUFFIXES, IMAGE_SUFFIXES, check_output


def run(
    output: Output,
    request: Request,
    *,
    layer: int,
    head: int | None,
    units: str,
    query: str | None = None,
    exclude: Sequence[str] | None = None,
    pooling: PoolOptions = POOLING,
) -> None:
    """One heatmap: a layer's head, or the mean over its heads; or one query's row, sorted.

    A query named by its piece index (`#12`), or of a text too long to read whole (past the
    decoder's 2,048 pieces, or what one layer's attention may take), is read a block of
    queries at a time (`analyse_long`), over pieces."""
    out, style, as_json = output.out, output.style, output.as_json
    pool = pooling.pool
    refuse_pool_by(pooling, pool)
    by_index = (  # #INDEX (#-1 the last): a piece
        query is not None and query[:1] == "#" and query[1:].lstrip("-").isdigit()
    )
    loaded = request.load is not None
    if pool is not None and query is not None:  # first: a '#N' query read pooled
        raise BadInput("{pool} draws a heatmap of blocks: leave out {query}",
                       param=("pool", "query"))  # fmt: skip
    if (query is not None and not loaded and not encdec_model(request)
            and (by_index or (not request.truncate and too_long(request)))):  # fmt: skip
        _refuse_unread(exclude, request.measure, by_index)
        refuse_pair_and_mask(request, "query")
        check_long_shape(request, [layer], head)
        if out is not None:
            check_output(out, IMAGE_SUFFIXES, style)
        result = api.analyse_long(request.text, model=request.model, query=query,
                                  max_tokens=request.max_tokens, truncate=request.truncate,
                                  bos=request.bos, dtype=request.dtype,
                                  engine=request.engine)  # fmt: skip
        show_output(output, result.row(layer, head, lang=request.lang))
        return
    if pool is not None:
        result = pooled(request, output, pooling, None, exclude, [layer], head)

        def page() -> str:
            return result.html("matrix", layer=layer, head=head, theme=style.theme,
                               lang=request.lang)  # fmt: skip

        draw_pooled(output, result.view(layer, head, lang=request.lang), page,
                    lambda: result.pooled_dict(layer, head))  # fmt: skip
        return
    words = {"query": query} if query is not None else None
    allowed = PAGES if query is None else IMAGE_SUFFIXES
    with whole_or_pooled(request, query is None and not exclude and not as_json, query=True):
        analysis = analyse_request(
            request,
            out,
            style,
            allowed=allowed,
            layer=layer,
            head=head,
            words=words,
            units=units,
            one_layer=True,
        )
    view = analysis.view(
        layer, head, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    shown = view if query is None else view.row(query)
    to_page = out is not None and out.suffix.lower() in HTML_SUFFIXES
    if out is not None and to_page:
        analysis.save(out, "show", layer=layer, head=head, units=units, theme=style.theme,
                      lang=request.lang, exclude=exclude)  # fmt: skip
    show_output(output, shown, save=not to_page)
    views.shown()  # drawn: the entry point may memoise what was printed (cache.views)


def _refuse_unread(exclude: Sequence[str] | None, measure: str, by_index: bool) -> None:
    """A row read a block at a time is the model's weights over every piece: refuse the
    options it would otherwise drop without a word, saying what works."""
    how = (
        "name the query by its word (--query WORD) to use {option}"
        if by_index
        else "leave out {option}, or read a shorter text (--max-tokens N --truncate)"
    )
    if exclude:
        raise BadInput(
            "{query} "
            + ("#INDEX" if by_index else "on a text this long")
            + " reads a row of weights over every piece: "
            + how.format(option="{exclude}"),
            param=("query", "exclude"),
        )
    if measure != "weight":
        raise BadInput(
            "{query} "
            + ("#INDEX" if by_index else "on a text this long")
            + " reads attention weights only: "
            + how.format(option="{measure} " + measure),
            param=("query", "measure"),
        )

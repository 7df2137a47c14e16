"""`attnviz explain`: one query's attention, step by step, on the model's own numbers."""

from __future__ import annotations

from rich.console import Console

from attnviz.cli.analysing import prepare_request
from attnviz.cli.input import Request


def run(
    console: Console,
    request: Request,
    *,
    token: str | None,
    index: int | None,
    layer: int,
    head: int,
) -> None:
    """One query's attention, step by step, on the model's own numbers, in the request's
    language."""
    from attnviz.language import resolve_lang

    lang = resolve_lang(request.lang)
    explanation = prepare_request(request)[0].explain(
        token=token, index=index, layer=layer, head=head, lang=lang, mask=request.mask
    )
    console.print(explanation)

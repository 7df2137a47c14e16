"""`attnviz compare-measures`: every measure's ranking of one query's keys, side by side."""

from __future__ import annotations

from attnviz.cli.analysing import analyse_request
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import show_output
from attnviz.errors import BadInput


def run(output: Output, request: Request, *, query: str, layer: int, top: int, units: str) -> None:
    """Every measure's ranking of one query's keys, side by side."""
    if not query.strip():
        raise BadInput("say which query to compare: pass --query WORD")
    out, style = output.out, output.style
    analysis = analyse_request(
        request, out, style, layer=layer, words={"query": query}, units=units, compared=True
    )
    comparison = analysis.compare(query, layer, units=units, top=top, lang=request.lang)
    show_output(output, comparison)

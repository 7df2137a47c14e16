"""`attnviz compare-measures`: every measure's ranking of one query's keys, side by side."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from attnviz.cli.analysing import analyse_request
from attnviz.cli.input import Request
from attnviz.cli.printing import show_result
from attnviz.output import ImageStyle


def run(
    console: Console,
    request: Request,
    *,
    query: str,
    layer: int,
    top: int,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
) -> None:
    """Every measure's ranking of one query's keys, side by side."""
    analysis = analyse_request(
        request, out, style, layer=layer, words={"query": query}, units=units, compared=True
    )
    comparison = analysis.compare(query, layer, units=units, top=top, lang=request.lang)
    if out is not None:
        comparison.save(out, **asdict(style))
    show_result(console, comparison, as_json, out)

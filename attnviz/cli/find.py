"""`attnviz find`: every head ranked by the weight from one word to another."""

from __future__ import annotations

from collections.abc import Sequence
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
    source: str,
    target: str,
    top: int,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
    exclude: Sequence[str] | None = None,
) -> None:
    """Every head ranked by the weight from `source` to `target`: a table, JSON or a heatmap."""
    words = {"source": source, "target": target}
    analysis = analyse_request(request, out, style, words=words, units=units)
    links = analysis.find(source, target, units=units, exclude=exclude, top=top, lang=request.lang)
    if out is not None:
        links.save(out, **asdict(style))
    show_result(console, links, as_json, out)

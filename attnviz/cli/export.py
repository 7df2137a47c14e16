"""`attnviz export`: a view as an image or page, or the raw attention as data."""

from __future__ import annotations

from pathlib import Path

from attnviz.cli.analysing import PAGES, analyse_request
from attnviz.cli.input import Request
from attnviz.cli.printing import save, wrote
from attnviz.output import DATA_SUFFIXES, ImageStyle


def run(
    request: Request,
    *,
    out: Path,
    view: str,
    layer: int,
    head: int | None,
    units: str,
    style: ImageStyle,
) -> None:
    """Write an image of a view, or the raw attention data (.npz / .json)."""
    allowed = PAGES + DATA_SUFFIXES
    analysis = analyse_request(request, out, style, allowed=allowed, layer=layer, head=head)
    save(analysis, out, view, style, request, layer=layer, head=head, units=units)
    wrote(out)

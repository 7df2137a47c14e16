"""`attnviz explore`: the attention full-screen in the terminal, a head, a layer and a query
at a time (`Analysis.explore`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from attnviz.cli.analysing import analyse_request
from attnviz.cli.input import Request
from attnviz.explore.terminal import need_a_terminal
from attnviz.output import ImageStyle

if TYPE_CHECKING:
    from attnviz.analysis import Analysis


def run(
    request: Request,
    *,
    layer: int,
    head: int | None,
    units: str,
    exclude: Sequence[str] | None = None,
) -> None:
    """Check and compute first (a refusal is the one line the other commands give), then
    open the explorer; `/` reads a new text with the same options."""
    need_a_terminal()
    from attnviz.measures.contributions import PER_LAYER
    from attnviz.measures.select import check_exclude

    check_exclude(exclude)  # before the model runs (the view checks the rest with it)
    head = None if request.measure in PER_LAYER else head
    analysis = analyse_request(request, None, ImageStyle(), layer=layer, head=head, units=units)

    def retext(text: str) -> Analysis:
        return analyse_request(replace(request, text=text, from_stdin=False), None, ImageStyle())

    analysis.explore(layer, head, units, exclude=exclude, measure=request.measure,
                     lang=request.lang, retext=None if request.load else retext)  # fmt: skip

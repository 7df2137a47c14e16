"""`attnviz rollout`: attention rollout (or flow) chained through the layers."""

from __future__ import annotations

from collections.abc import Sequence

from attnviz.cli.analysing import analyse_request
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import progress, show_output
from attnviz.errors import BadInput


def run(
    output: Output,
    request: Request,
    *,
    upto: int,
    units: str,
    top: int,
    exclude: Sequence[str] | None = None,
    method: str = "rollout",
) -> None:
    """Attention rollout (or flow) through layer `upto`: what each token draws from each input."""
    if method == "flow" and request.measure != "weight":
        raise BadInput("--method flow runs on the attention weights: drop --measure")
    analysis = analyse_request(request, output.out, output.style, upto=upto)
    with progress(len(analysis.pieces) ** 2, "maximum flows") as advance:
        view = analysis.rollout(
            upto,
            units,
            top,
            exclude=exclude,
            measure=request.measure,
            method=method,
            progress=advance if method == "flow" else None,
            lang=request.lang,
        )
    show_output(output, view)

"""`attnviz export`: a view as an image or page, or the raw attention as data."""

from __future__ import annotations

from attnviz.cli.analysing import PAGES, analyse_request
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import save, wrote
from attnviz.errors import BadInput
from attnviz.output import DATA_SUFFIXES


def run(
    output: Output, request: Request, *, view: str, layer: int, head: int | None, units: str
) -> None:
    """Write an image of a view to --out, or the raw attention data (.npz / .json)."""
    out, style = output.out, output.style
    assert out is not None  # export's --out is required
    if out.suffix.lower() in DATA_SUFFIXES:  # every layer's raw attention, over pieces
        shown = (("{view}", view != "show"), ("{layer}", layer != -1),
                 ("{head}", head is not None), ("{units}", units != "words"))  # fmt: skip
        chosen = [name for name, given in shown if given]
        if chosen:
            raise BadInput(f"{out.suffix} data hold every layer's raw attention over the pieces: "
                           f"leave out {' and '.join(chosen)}, or write an image or a page",
                           param=("view", "layer", "head", "units"))  # fmt: skip
    allowed = PAGES + DATA_SUFFIXES
    analysis = analyse_request(request, out, style, allowed=allowed, layer=layer, head=head)
    save(analysis, out, view, style, request, layer=layer, head=head, units=units)
    wrote(out)

"""`attnviz ablate`: each head of a decoder removed (or patched) in turn, and what the next
token's logit difference does."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.options import IMAGES
from attnviz.cli.printing import print_json, wrote
from attnviz.output import IMAGE_SUFFIXES, ImageStyle, check_output

DIVERGING = "RdBu_r"  # the heatmap's colours unless --cmap names another: effects are signed


def run(
    console: Console,
    prompt: str,
    *,
    target: str,
    foil: str,
    method: str,
    patch: str | None,
    layer: int | None,
    model: str | None,
    out: Path | None,
    as_json: bool,
    max_tokens: int | None,
    bos: bool,
    dtype: str,
    quiet: bool,
    style: ImageStyle,
) -> None:
    """Measure, then print the table (or the JSON) and write the heatmap asked for."""
    if style.cmap == IMAGES.cmap:
        style = replace(style, cmap=DIVERGING)
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, style)
    notices.quiet = quiet
    result = api.ablate(
        prompt, target=target, foil=foil, method=method, patch=patch, layer=layer, model=model,
        max_tokens=max_tokens, bos=bos, dtype=dtype,
    )  # fmt: skip
    if as_json:
        print_json(result.to_dict())
    else:
        console.print(result)
    if out is not None:
        result.save(out, **asdict(style))
    wrote(out)

"""`attnviz merge`: the partial files of every slice added up, printed as one run prints."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attnviz.cli.input import Output
from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, check_output


def run(
    output: Output,
    parts: Sequence[Path],
    *,
    sort: str,
    top: int | None,
    shared_scale: bool,
    quiet: bool,
) -> None:
    """What `stats` or `find --file` prints over the whole input, from its slices' partials."""
    from attnviz.cli.find import show_roles
    from attnviz.cli.stats import show
    from attnviz.measures.stats import HeadStats
    from attnviz.partials import merge_partials

    if output.out is not None:
        check_output(output.out, IMAGE_SUFFIXES, output.style)
    result = merge_partials(parts)
    if isinstance(result, HeadStats):
        result.sorted(sort, top)  # a column these statistics lack: refused before printing
        show(output, result, sort=sort, top=top, shared_scale=shared_scale, quiet=quiet)
        return
    if sort != "layer" or top is not None or not shared_scale:
        raise BadInput("{sort}, {top} and {own-scales} order statistics: these partials are find "
                       "--file's, which keep its --top", param=("sort", "top"))  # fmt: skip
    show_roles(output, result)

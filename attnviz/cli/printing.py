"""How the commands print and write: JSON, drawn results, the files written, progress bars."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from attnviz.cli.input import Output, Request
from attnviz.output import HTML_SUFFIXES, ImageStyle

if TYPE_CHECKING:
    from attnviz.analysis import Analysis


def save(
    analysis: Analysis, out: Path, view: str, style: ImageStyle, request: Request, **where: Any
) -> None:
    """Write `view` to `out`: an image in `style`, a page (which follows the reader's theme),
    or data (with the measure asked for)."""
    if out.suffix.lower() in HTML_SUFFIXES:
        analysis.save(out, view, **where, theme=style.theme, lang=request.lang)
    else:
        analysis.save(
            out, view, **where, measure=request.measure, lang=request.lang, **asdict(style)
        )


def show_result(console: Console, result: Any, as_json: bool, out: Path | None) -> None:
    """Print `result` as JSON (its `to_dict()`) or drawn, then say which file was written."""
    if as_json:
        print_json(result.to_dict())
    else:
        console.print(result)
    wrote(out)


def show_output(output: Output, result: Any, *, save: bool = True) -> None:
    """Write `result` to --out in the output's image style (`save`: not written already), then
    print it as JSON or drawn, and say which file was written (`show_result`)."""
    if save and output.out is not None:
        result.save(output.out, **asdict(output.style))
    show_result(output.console, result, output.as_json, output.out)


def wrote(out: Path | None) -> None:
    if out is not None:
        from attnviz.cli.errors import printable

        print(f"wrote {printable(str(out))}", file=sys.stderr)


def print_json(record: Any) -> None:
    """`record` as JSON, readable (`João`), with what a terminal would act on (an escape,
    a bidirectional override from a model's tokens) as `\\u` escapes: the same data.
    A number that is not one (NaN, an infinity: a held-out score over too few examples) is
    written `null`: JSON has no NaN, and a reader such as `jq` refuses the whole record."""
    from attnviz.render.cells import json_visible

    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(record), ensure_ascii=False, allow_nan=False)
    print(json_visible(text))


def _finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


@contextlib.contextmanager
def progress(total: int | None, what: str = "sentences") -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; `advance(n)` counts n more `what`.

    `total` is None for a corpus read as it runs (a file, stdin): the bar counts.
    """
    from rich.progress import Progress

    from attnviz.cli.input import console_width

    err = Console(stderr=True, width=console_width())
    # Drawn only when a batch ends (no refresh thread): stderr is kept silent during calls
    # into the tokenizer (attnviz.errors.quiet_panics), and a frame lost there would
    # leave the bar's cursor moves out of step.
    # A real terminal only: FORCE_COLOR makes rich call a redirected stderr a terminal.
    shown = err.is_terminal and sys.stderr.isatty()
    with Progress(console=err, transient=True, disable=not shown, auto_refresh=False) as bar:
        task = bar.add_task(what, total=total)

        def advance(n: int) -> None:
            bar.advance(task, n)
            bar.refresh()

        yield advance

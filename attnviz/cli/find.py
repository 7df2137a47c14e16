"""`attnviz find`: every head ranked by the weight from one word to another, in one sentence
or (`--file`) over labelled examples."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

from attnviz.cli.analysing import analyse_request
from attnviz.cli.input import Output, Request
from attnviz.cli.options import EndOptions, ReadingOptions
from attnviz.cli.printing import print_json, progress, show_result, wrote
from attnviz.cli.stats import Slicing
from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, ImageStyle, check_output

if TYPE_CHECKING:
    from attnviz.measures.roles import HeadRoles
    from attnviz.roles import BadExamples


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
    if not source or not target:
        raise BadInput(
            "find needs {source} WORD and {target} WORD (or {file} FILE to score every head "
            "over labelled examples)",
            param=("source", "target", "file"),
        )
    words = {"source": source, "target": target}
    analysis = analyse_request(request, out, style, words=words, units=units)
    links = analysis.find(source, target, units=units, exclude=exclude, top=top, lang=request.lang)
    if out is not None:
        links.save(out, **asdict(style))
    show_result(console, links, as_json, out)


def run_file(
    output: Output,
    file: Path,
    *,
    given: Mapping[str, Any],
    top: int,
    units: str,
    exclude: Sequence[str] | None,
    model: str | None,
    reading: ReadingOptions,
    ending: EndOptions,
    slicing: Slicing | None = None,
) -> None:
    """Every head scored over the labelled examples of `file`: a table, JSON or a heatmap;
    one slice of them into a partial file, or a slice on each worker of a Dask cluster.

    A file with problems prints each on its own line (naming its line) and exits 2."""
    from attnviz.cli.input import language
    from attnviz.roles import BadExamples, partial_head_roles

    extra = [name for name, value in given.items() if value is not None]
    if extra:
        raise BadInput(
            f"--file holds the texts and the words: drop {' and '.join(extra)}, or drop --file"
        )
    for name, value, default in (
        ("--pair", reading.pair, None), ("--stack", reading.stack, None),
        ("--target", reading.target, None), ("--generate", reading.generate, None),
        ("--truncate", reading.bounds.truncate, False), ("--mask", reading.mask.value, "none"),
    ):  # fmt: skip
        if value != default:
            raise BadInput(f"{name} does not apply to find --file: drop it")
    if output.out is not None:
        check_output(output.out, IMAGE_SUFFIXES, output.style)
    slicing = slicing or Slicing()
    slicing.check(output)
    options: dict[str, Any] = {
               "model": model, "units": units, "exclude": exclude, "lang": language(ending.lang),
               "top": top, "dtype": reading.dtype.value, "max_tokens": reading.bounds.max_tokens,
               "bos": not reading.bounds.no_bos, "engine": reading.bounds.engine.value}  # fmt: skip
    try:
        if slicing.dask is not None:
            from attnviz.cluster import head_roles_on_dask

            roles = head_roles_on_dask(file, slicing.dask, **options)
        else:
            with progress(None, "examples") as advance:
                part = partial_head_roles(
                    file, shard=slicing.shard or (1, 1), progress=advance, **options
                )
            if slicing.partial is not None:
                part.to_file(slicing.partial)
                wrote(slicing.partial)
                return
            roles = part.result()
    except BadExamples as exc:
        print_problems(exc)
    show_roles(output, roles)


def print_problems(exc: BadExamples) -> NoReturn:
    """Each problem of a labelled file on its own line; exit 2."""
    from attnviz.cli.errors import one_line

    for problem in exc.problems:
        print(f"Error: {one_line(problem)}", file=sys.stderr)
    raise typer.Exit(exc.exit_code) from None


def show_roles(output: Output, roles: HeadRoles) -> None:
    """Print the roles (a table or JSON) or write their heatmap, as `find --file` does."""
    out, style = output.out, output.style
    if out is not None:
        roles.save(out, dpi=style.dpi, cmap=style.cmap, theme=style.theme,
                   transparent=style.transparent)  # fmt: skip
    if output.as_json:
        print_json(roles.to_dict())
    else:
        output.console.print(roles)
    wrote(out)

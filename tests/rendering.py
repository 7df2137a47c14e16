"""Rendering rich output the way a user's terminal would, for tests."""

from __future__ import annotations

import io
import re

from rich.console import Console, RenderableType

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def render(
    renderable: RenderableType,
    width: int,
    *,
    colour: bool,
    no_color: bool = False,
    height: int = 25,
) -> str:
    """What a user sees: printed to a console of `width` cells, not cropped."""
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        color_system="truecolor" if colour else None,
        force_terminal=colour,
        no_color=no_color,
        legacy_windows=False,
    )
    console.print(renderable, crop=False)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def plain_lines(output: str) -> list[str]:
    """The output's lines without colour codes."""
    return ANSI.sub("", output).splitlines()

"""Every title, caption, panel heading and axis label goes through one escape rule (issue 34).

A model folder whose name holds an OSC title sequence, a screen clear, a bidirectional
override and a C1 control, and a text holding the same, are drawn by every command: no raw
ESC, BEL, C1 control or bidirectional control reaches the terminal (`distance` printed its
title raw), an image's text or a page's title. The rule is `attnviz.render.cells.visible`.
`--json` is data, and exempt.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.render.cells import visible
from tests.conftest import TinyFactory
from tests.rendering import render

OSC, CLEAR, BIDI, C1 = "\x1b]0;pwned\x07", "\x1b[2J", "\u202e", "\x9b"
HOSTILE = f"{OSC}{CLEAR}{BIDI}{C1}"
# Raw characters that drive a terminal or reorder text: C0 controls but the newline, DEL and
# C1, bidirectional embeddings, overrides, isolates and marks.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SHOWN = ("\\x1b]0;pwned\\x07", "\\x1b[2J", "U+202E", "\\x9b")  # what `visible` shows instead
TEXT = f"the bank {HOSTILE} ok"


def assert_clean(output: str, where: str, shown: bool = True) -> None:
    """No raw control of HOSTILE in `output`; with `shown`, its escaped form there."""
    found = RAW.search(output)
    assert found is None, f"{where}: raw {found[0]!r} reached the output:\n{output!r}"
    if shown:
        joined = re.sub(r"\s*\n\s*", "", output)  # a title may wrap inside an escape
        missing = [form for form in SHOWN if form not in joined]
        assert not missing, f"{where}: {missing} not shown:\n{output}"


def test_the_one_rule_escapes_each_class() -> None:
    assert visible(f"model{HOSTILE}") == "model" + "".join(SHOWN)
    assert visible("non\ufffechar\uffff") == "nonU+FFFEcharU+FFFF"  # not XML: never drawn


def test_the_distance_table_escapes_its_title() -> None:
    from attnviz.measures.long import distance_bins
    from attnviz.render.long import long_profile_title, profile_table

    bins = distance_bins(4)
    profile = np.full((1, 2, len(bins)), 0.25, np.float32)  # (L, H, bins)
    table = profile_table(
        long_profile_title(f"model{HOSTILE}[bold]x[/]", 4),
        profile,
        [f"{a}–{b}" for a, b in bins],
        np.array([b - a + 1 for a, b in bins]),
        np.zeros((1, 2)),
        [["local", "local"]],
        [0],
    )
    out = render(table, 100, colour=False)
    assert_clean(out, "distance's table")
    assert "[bold]x[/]" in out  # markup from a stranger prints as written


@pytest.fixture(scope="module")
def hostile_model(tiny_decoder: TinyFactory, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny Llama in a folder whose name holds every attack (the model's name)."""
    folder = tmp_path_factory.mktemp("hostile") / f"model{HOSTILE}"
    shutil.copytree(tiny_decoder("llama"), folder)
    return str(folder)


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "160"})
    assert result.exit_code == 0, (args, result.stderr, result.stdout)
    return result.stdout + result.stderr


COMMANDS = {
    "show": ["show", "--units", "tokens"],
    "show --query": ["show", "--query", "#-1"],
    "show --pool": ["show", "--pool", "4"],
    "heads": ["heads", "--units", "tokens"],
    "heads --pool": ["heads", "--pool", "4"],
    "model": ["model", "--units", "tokens"],
    "model --pool": ["model", "--pool", "4"],
    "stats": ["stats"],
    "find": ["find", "--from", "ok", "--to", "bank"],
    "explain": ["explain", "--index", "2", "--head", "0"],
    "distance": ["distance"],
    "rollout": ["rollout", "--units", "tokens"],
    "tokens": ["tokens"],
}


@pytest.mark.slow  # a tiny model, every command
@pytest.mark.parametrize("command", COMMANDS)
def test_a_hostile_model_name_is_escaped_in_every_title(command: str, hostile_model: str) -> None:
    name, *options = COMMANDS[command]
    out = run(name, "the bank ok", "--model", hostile_model, *options)
    assert_clean(out, command, shown=command != "tokens")  # tokens has no title


@pytest.mark.slow  # a tiny model, every command
@pytest.mark.parametrize("command", COMMANDS)
def test_a_hostile_text_is_escaped_in_every_title_and_caption(
    command: str, hostile_model: str
) -> None:
    name, *options = COMMANDS[command]
    out = run(name, TEXT, "--model", hostile_model, *options)
    assert_clean(out, command, shown=False)  # its pieces may cut the attack apart


@pytest.mark.slow  # a tiny model, images and pages
@pytest.mark.parametrize(
    "command",
    [
        ["show", "--units", "tokens"],
        ["heads", "--pool", "4"],
        ["model", "--pool", "4"],
        ["distance"],
        ["rollout"],
        ["stats"],
    ],
    ids=lambda c: c[0] + ("-pool" if "--pool" in c else ""),
)
def test_images_and_pages_draw_the_name_escaped(
    command: list[str], hostile_model: str, tmp_path: Path
) -> None:
    svg = tmp_path / "view.svg"
    run(command[0], "the bank ok", "--model", hostile_model, *command[1:], "--out", str(svg))
    drawn = "".join(ET.parse(svg).getroot().itertext())  # well-formed XML: no raw controls
    assert_clean(drawn, f"{command[0]}'s image")
    if command[0] in ("distance", "rollout", "stats"):
        return  # no page
    page = tmp_path / "view.html"
    run(command[0], "the bank ok", "--model", hostile_model, *command[1:], "--out", str(page))
    text = page.read_text(encoding="utf-8")
    assert_clean(text, f"{command[0]}'s page")


def test_a_heatmaps_title_escapes_and_prints_markup_as_written() -> None:
    from attnviz.render.terminal import Heatmap

    out = render(Heatmap(np.eye(2), ["a", "b"], title=f"[bold]m{HOSTILE}"), 80, colour=False)
    assert_clean(out, "a heatmap's title")
    assert "[bold]m" in out

"""Fuzzing the terminal: text from strangers mixed with escape sequences, C1 controls,
bidirectional overrides and isolates, zero-width and other invisible characters, through
the one rule (`attnviz.render.cells.visible`), every terminal renderer, and the commands
(the typed text, a model card's languages, a tokenizer's BOS).

Whatever the text, what reaches the terminal holds no control character (but the
newlines of the layout, and rich's own colour codes when colour is on), no bidirectional
control, no invisible character: only the joiners `visible` keeps (between emoji, between
letters of a script that uses them, the tags of a flag).

`make test` runs a short, derandomised profile; `make fuzz` the long one
(ATTNVIZ_FUZZ=long).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.cli.errors import one_line
from attnviz.render.bars import BarList
from attnviz.render.cells import visible
from attnviz.render.compare import ComparisonTable
from attnviz.render.find import LinkTable
from attnviz.render.stats import SourcesTable, StatsTable
from attnviz.render.terminal import HeadGrid, Heatmap
from tests.conftest import TinyFactory

LONG = os.environ.get("ATTNVIZ_FUZZ") == "long"


def fuzz(short: int, long: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", long)) if LONG else short,
        deadline=None,
        derandomize=not LONG,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ---------------------------------------------------------------------------
# Hostile text

ATTACKS = [
    "\x1b]0;PWNED\x07",  # OSC: retitle the window
    "\x1b]0;PWNED\x1b\\",  # the same, ended by ST
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J",  # CSI: clear the screen
    "\x1b[1A\x1b[2K",  # up a line, erase it
    "\x1b[31m",  # colour
    "\x1bP+q\x1b\\",  # DCS
    "\x9b31m",  # 8-bit CSI
    "\x9d0;x\x9c",  # 8-bit OSC ... ST
    "\x85",  # NEL
    "\r",
    "\x07",
    "\x08\x08\x08",  # backspaces
    "\x00",
    "\x7f",
    "\u202e",  # right-to-left override
    "\u202d",
    "\u202a\u202b\u202c",
    "\u2066\u2067\u2068\u2069",  # isolates
    "\u200e\u200f\u061c",  # marks
    "\u200b",  # zero-width space
    "\u2060\u2061\u2062\u2063\u2064",
    "\ufeff",
    "\u00ad",
    "\u180e",
    "\u2028\u2029",
    "\U000e0041\U000e0042\U000e007f",  # tags with no flag: hidden text
    "\udcff",  # an undecodable byte
    "\u200d",
    "\u200c",
    "🏽",  # a skin tone alone
]
ORDINARY = [
    "João",
    "東京",
    "e\u0301",
    "مرحبا",
    "می\u200cخواهم",
    "שלום",
    "##ou",
    "Ġc",
    "▁casa",
    "👍🏽",
    "👨\u200d👩\u200d👧",
    "🏳️\u200d🌈",
    "🇵🇹",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
    "[bold]x[/]",
    "[link=https://x]y",
    ":warning:",
    " ",
    "\n",
    "\t",
    "a" * 20,
]
hostile_text = st.lists(
    st.one_of(st.sampled_from(ATTACKS), st.sampled_from(ORDINARY), st.text(max_size=4)),
    min_size=1,
    max_size=6,
).map("".join)
# Text with no character `visible` escapes: it must come out as it went in.
safe_text = st.text(
    st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp")).filter(
        lambda c: not 0x1F3FB <= ord(c) <= 0x1F3FF
    ),
    max_size=12,
)

_SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colour and style codes
_FLAG = re.compile("\U0001f3f4[\U000e0020-\U000e007e]{1,6}\U000e007f")
_JOINERS = "\u200c\u200d"


def unsafe(output: str, *, colour: bool = False) -> list[str]:
    """The characters of `output` that must not reach a terminal."""
    if colour:
        output = _SGR.sub("", output)
    output = _FLAG.sub("", output)
    return [
        char
        for char in output
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        and char not in "\n" + _JOINERS
    ]


def render(renderable: RenderableType, *, colour: bool, width: int = 100) -> str:
    console = Console(
        width=width,
        file=io.StringIO(),
        color_system="truecolor" if colour else None,
        force_terminal=colour,
        legacy_windows=False,
    )
    console.print(renderable)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


# ---------------------------------------------------------------------------
# The rule


@fuzz(200, 5000)
@given(hostile_text)
def test_visible_lets_nothing_unsafe_through(text: str) -> None:
    shown = visible(text)
    assert unsafe(shown) == [] or set(unsafe(shown)) <= {"\n"}
    assert "\n" not in shown and "\r" not in shown
    assert visible(shown) == shown  # shown once, shown the same again
    assert unsafe(visible(text, newlines=True)) == []
    line = one_line(text)
    assert unsafe(line) == [] and "\n" not in line


@fuzz(200, 5000)
@given(safe_text)
def test_visible_leaves_ordinary_text_alone(text: str) -> None:
    assert visible(text) == text


# ---------------------------------------------------------------------------
# The renderers


@dataclass(frozen=True)
class _Link:
    layer: int
    head: int
    weight: float
    rank: int
    top_key: str
    top_weight: float
    others_above: int
    sink: float = 0.0


@dataclass(frozen=True)
class _Compared:
    title: str
    labels: Sequence[str]
    measures: Sequence[str]
    top: int
    shares: np.ndarray
    lang: str = "en"

    def ranking(self, measure: str) -> list[int]:
        return list(np.argsort(-self.shares[self.measures.index(measure)]))

    def disagreements(self, lang: str = "en") -> list[str]:
        return [f"{self.labels[0]} is first by weight"]


def _renderables(labels: list[str], title: str) -> list[RenderableType]:
    n = len(labels)
    matrix = np.random.default_rng(n).random((n, n))  # (n, n)
    record = {"layer": 0, "head": 1, "entropy": 1.0, "first": 0.5, "punct": 0.1}
    record |= {"self": 0.2, "prev": 0.3, "label": labels[0]}
    return [
        Heatmap(matrix, labels, title=title),
        Heatmap(matrix, labels, labels[::-1], title=title),  # a `keys:` legend
        HeadGrid(np.stack([matrix, matrix.T]), labels, panel_titles=labels[:1] * 2, title=title),
        BarList(labels, matrix[0], title=title),
        SourcesTable(labels, [[(j, 0.5)] for j in range(n)], title=title),
        StatsTable([record], title=title, first_token=labels[-1]),
        LinkTable(
            [_Link(0, 1, 0.5, 2, labels[0], 0.6, 1)], labels[0], labels[-1], title=title, note=title
        ),
        ComparisonTable(_Compared(title, labels, ["weight", labels[0]], n, matrix[[0, -1]])),
    ]


@fuzz(30, 1000)
@given(st.lists(hostile_text, min_size=1, max_size=5), hostile_text, st.integers(12, 120))
def test_no_renderer_lets_anything_unsafe_through(
    labels: list[str], title: str, width: int
) -> None:
    for renderable in _renderables(labels, title):
        for colour in (False, True):
            output = render(renderable, colour=colour, width=width)
            assert unsafe(output, colour=colour) == [], (type(renderable).__name__, output)


# ---------------------------------------------------------------------------
# The commands, on a tiny Llama (byte-level pieces keep every character of the text)


@pytest.fixture(scope="module")
def decoder(tiny_decoder: TinyFactory) -> Path:
    return tiny_decoder("llama")


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout + result.stderr


@fuzz(4, 150)
@given(text=hostile_text, bos=hostile_text, language=hostile_text)
def test_no_command_lets_a_strangers_text_through(
    decoder: Path, text: str, bos: str, language: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        shutil.copytree(decoder, folder)
        card = f"---\nlanguage: [en, {json.dumps(language)}]\n---\n"
        (folder / "README.md").write_text(card, encoding="utf-8", errors="surrogateescape")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            path = folder / name
            named = path.read_text(encoding="utf-8").replace('"<s>"', json.dumps(f"<s{bos}>"))
            path.write_text(named, encoding="utf-8")
        model = ("--model", str(folder))
        runs = [
            ("info", *model),
            ("tokens", text, *model),
            ("show", text, *model, "--units", "tokens", "--no-cache"),
            ("show", text, *model, "--query", text, "--no-cache"),  # found, or an error line
            ("explain", text, *model, "--index", "0"),
            ("stats", text, *model),
        ]
        for args in runs:
            code, output = _invoke(*args)
            assert code in (0, 1, 2), (args, output)
            assert unsafe(output) == [], (args[0], output)

"""Errors in the caller's words: Python reads the keyword, the command line reads the flag.

One library error, two spellings: `str(exc)` names the argument as a Python caller passed it
(`top`), and the command line prints it as the flag the user typed (`--top`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.cli.errors import message

TEXT = "John said he was tired."
runner = CliRunner()


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(TEXT)


CALLS: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    # name: (call on an Analysis, what Python reads, what the command line reads)
    "find top": (lambda a: a.find("he", "John", top=0), "top 0", "--top 0"),
    "find source": (lambda a: a.find("she", "John"), "source 'she'", "--from 'she'"),
    "find target": (lambda a: a.find("he", "Mary"), "target 'Mary'", "--to 'Mary'"),
    "compare top": (lambda a: a.compare("he", top=0), "top 0", "--top 0"),
    "compare query": (lambda a: a.compare("she"), "query 'she'", "--query 'she'"),
    "per-layer head": (lambda a: a.view(-1, 2, measure="alti"), "head does not", "--head"),
    "layer": (lambda a: a.view(9), "layer 9 is out of range", "--layer 9 is out of range"),
    "heads": (lambda a: a.heads(0, [1, 1]), "heads names head 1 twice", "--heads names"),
    "rollout upto": (lambda a: a.rollout(upto=9), "upto 9", "--upto 9"),
    "explain lang": (lambda a: a.explain("he", lang="xx"), "lang 'xx'", "--lang 'xx'"),
    "explain token": (lambda a: a.explain("she"), "token 'she'", "--token 'she'"),
    "page of a measure": (
        lambda a: a.save("x.html", measure="alti"),
        "drop measure",
        "drop --measure",
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_python_reads_keywords_and_the_command_line_reads_flags(
    analysis: attnviz.Analysis, name: str
) -> None:
    call, python, command_line = CALLS[name]
    with pytest.raises(attnviz.BadInput) as raised:
        call(analysis)
    assert python in str(raised.value)
    assert "--" not in str(raised.value), str(raised.value)
    assert command_line in message(raised.value)


def test_a_missing_model_names_the_argument_in_each_vocabulary(tmp_path: Any) -> None:
    missing = str(tmp_path / "nowhere")
    with pytest.raises(attnviz.AttnvizError) as raised:
        attnviz.prepare(TEXT, model=missing)
    assert "(model)" in str(raised.value) and "--model" not in str(raised.value)
    result = runner.invoke(app, ["tokens", TEXT, "--model", missing])
    assert result.exit_code == 1
    assert "(--model) does not exist" in result.stderr


def test_a_too_long_text_says_truncate_in_each_vocabulary() -> None:
    text = "word " * 600
    with pytest.raises(attnviz.BadInput) as raised:
        attnviz.prepare(text)
    assert "pass truncate=True to keep the first 512" in str(raised.value)
    result = runner.invoke(app, ["tokens", text])
    assert result.exit_code == 2
    assert "pass --truncate to keep the first 512" in result.stderr


def test_layers_and_heads_take_the_same_kinds_of_list() -> None:
    import numpy as np

    kept = attnviz.analyse(TEXT, layers=np.array([1, 2]))  # as heads= takes an array
    assert kept.layers == (1, 2)
    assert kept.heads(1, np.array([0, 3])).heads == [0, 3]
    for bad in ("3", np.zeros((2, 2), dtype=int)):
        with pytest.raises(attnviz.BadInput, match="^layers must be a"):
            attnviz.analyse(TEXT, layers=bad)  # type: ignore[arg-type]

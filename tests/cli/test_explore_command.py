"""`attnviz explore` through the CLI: it needs a terminal, and refuses bad input in one line
before the screen opens."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.explore import terminal
from attnviz.explore.app import ExploreApp

runner = CliRunner()
SENTENCE = "John thought: the train was full, but he found a free seat."


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[ExploreApp]:
    """A terminal, and the apps that would have opened in it (none runs)."""
    apps: list[ExploreApp] = []
    monkeypatch.setattr(terminal, "on_a_terminal", lambda: True)
    monkeypatch.setattr(ExploreApp, "run", lambda self, **_: apps.append(self))
    return apps


def test_without_a_terminal_it_says_so_in_one_line() -> None:
    result = runner.invoke(app, ["explore", SENTENCE])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"Error: {terminal.NO_TERMINAL}"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--layer", "9"], "--layer"),
        (["--head", "12"], "--head"),
        (["--exclude", "nouns"], "cannot exclude 'nouns'"),
    ],
)
def test_bad_input_is_refused_before_the_screen_opens(
    opened: list[ExploreApp], args: list[str], says: str
) -> None:
    result = runner.invoke(app, ["explore", SENTENCE, *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert opened == []


@pytest.mark.slow
def test_it_opens_where_the_options_say(opened: list[ExploreApp]) -> None:
    result = runner.invoke(app, ["explore", SENTENCE, "--layer", "-1", "--head", "3", "-x",
                                 "special", "--lang", "pt"])  # fmt: skip
    assert result.exit_code == 0, result.output
    (shown,) = opened
    assert (shown.place.layer, shown.place.head, shown.place.exclude) == (5, 3, ("special",))
    assert shown.lang == "pt" and shown.retext is not None
    assert shown.view_at(shown.place).title.startswith("all-MiniLM-L6-v2 · camada 5 · cabeça 3")

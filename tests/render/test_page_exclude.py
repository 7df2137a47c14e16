"""Pages with `--exclude`: the excluded pieces left off, each row renormalised by the page as
the views renormalise it (checked in Chromium against `show --exclude ... --json`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from tests.conftest import TinyFactory
from tests.render.test_html import _spec, _weights

TEXT = "the bank refused the loan, and then it closed."


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_a_page_leaves_out_what_it_excludes(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama"))
    analysis = attnviz.analyse(TEXT, model=folder)
    every = _spec(analysis.html("heads", units="tokens"))
    spec = _spec(analysis.html("heads", units="tokens", exclude=["sink", "punct"]))
    assert spec["renormalise"] and not every["renormalise"]
    view = analysis.view(1, units="tokens", exclude=["first", "punct"])
    assert spec["tokens"] == view.labels and spec["tokens"][0] != every["tokens"][0]
    assert spec["T"] == len(view.labels) < every["T"]
    assert "without punctuation and the first token" in spec["title"]
    # The page holds the model's weights over the pieces kept; rows renormalised there
    # (after the head mean) give the view's numbers.
    held = _weights(spec)[1].mean(axis=0)  # (n, n)
    sums = held.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(held / sums, view.matrix, atol=1e-4)
    words = _spec(analysis.html("heads", exclude="first"))  # in words: the first word goes
    assert words["wordLabels"] == analysis.view(units="words", exclude="first").labels
    assert all(p < words["T"] for group in words["words"] for p in group)


def test_the_command_line_writes_pages_with_exclude(
    tmp_path: Path, tiny_decoder: TinyFactory
) -> None:
    folder = str(tiny_decoder("llama"))
    for command in (["show", "--layer", "1"], ["heads"], ["model"]):
        out = tmp_path / f"{command[0]}.html"
        _cli(
            command[0],
            TEXT,
            "--model",
            folder,
            "--exclude",
            "sink",
            *command[1:],
            "--out",
            str(out),
        )
        assert "without the first token" in _spec(out.read_text(encoding="utf-8"))["title"]


@pytest.mark.slow
def test_an_excluded_page_shows_the_renormalised_rows_in_chromium(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    from tests.render.test_html import CHROMIUM, Page, _browser

    folder = str(tiny_decoder("llama"))
    out = tmp_path / "x.html"
    flags = ["--model", folder, "--layer", "1", "--units", "tokens", "--exclude", "first"]
    _cli("heads", TEXT, *flags, "--out", str(out))
    record = json.loads(_cli("show", TEXT, *flags, "--json"))
    with _browser()() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        view = Page(chromium, out)
        page_ = view.page
        n = len(record["tokens"])
        assert page_.locator(".av-left .av-tok").count() == n
        assert page_.locator(".av-left .av-tok").first.text_content() == record["tokens"][0]
        for i in (0, 3, n - 1):
            page_.hover(f'.av-left .av-tok[data-index="{i}"]')
            shown = view.weights("right")
            np.testing.assert_allclose(shown[: i + 1], record["weights"][i][: i + 1], atol=1e-4)
            assert sum(shown[: i + 1]) == pytest.approx(1.0, abs=1e-3)  # renormalised
        assert view.errors == [] and view.requests == []
        view.close()
        chromium.close()

"""`attnviz models`: the table and `--json` of the models at hand, offline; names from a
stranger's folder printed escaped; a folder that is not one refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli.app import app


@pytest.fixture()
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("ATTNVIZ_MODELS", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["models", *args], env={"COLUMNS": "250"})


def test_models_json_lists_the_default_and_gemma(run) -> None:
    result = run("--json")
    assert result.exit_code == 0, result.output
    listed = {m["model"]: m for m in json.loads(result.stdout)["models"]}
    assert listed["all-MiniLM-L6-v2"]["kind"] == "encoder"
    assert listed["gemma-3-270m"]["kind"] == "decoder"


def test_models_table_names_each_value_to_pass(run, tmp_path: Path) -> None:
    root = tmp_path / "mine"
    bad = root / "x\x1b]0;owned\x07"
    bad.mkdir(parents=True)
    (bad / "config.json").write_text('{"model_type": "[bold]gpt2"}', encoding="utf-8")
    result = run(str(root))
    assert result.exit_code == 0, result.output
    assert "all-MiniLM-L6-v2" in result.stdout and "gemma-3-270m" in result.stdout
    assert "\x1b" not in result.stdout and "\\x1b" in result.stdout
    assert "[bold]gpt2" in result.stdout  # shown as written, not as markup
    assert f"searched: {root}" in result.stdout.replace("\n", "")


def test_a_folder_that_is_not_there_is_one_line(run, tmp_path: Path) -> None:
    result = run(str(tmp_path / "nope"))
    assert result.exit_code != 0
    assert "is not a folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1

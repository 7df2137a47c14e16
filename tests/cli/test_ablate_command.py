"""`attnviz ablate`: the table, the JSON the issue asks for, the heatmap, and the one-line
refusals (the default model, a word of several pieces, a corrupted prompt of another length)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from tests.conftest import TinyFactory

PROMPT = "John thought: the train was full, but he"
CORRUPTED = "Mary thought: the train was full, but he"
KEYS = {"model", "prompt", "input_ids", "tokens", "target", "target_id", "foil", "foil_id",
        "method", "clean", "corrupted", "patch", "heads"}  # fmt: skip


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["ablate", *args], env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


def _refused(*args: str) -> str:
    code, out, err = _run(*args)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_the_default_model_is_refused_in_one_line_naming_one_that_works() -> None:
    line = _refused(PROMPT, "--target", "John", "--foil", "Mary")
    assert "all-MiniLM-L6-v2 is an encoder without an output head" in line
    assert "--model" in line and "gemma-3-270m" in line


@pytest.mark.slow
def test_the_table_names_the_pieces_and_the_json_has_the_issues_keys(
    tiny_decoder: TinyFactory,
) -> None:
    model = ("--model", str(tiny_decoder("llama", arch="lm")))
    code, out, err = _run(PROMPT, "--target", "the", "--foil", "bank", *model)
    assert code == 0, err
    assert "target ' the' (id" in out and "foil ' bank' (id" in out
    assert "zero ablation" in out and "layer" in out and "(4 more heads" in out
    code, out, err = _run(PROMPT, "--target", "the", "--foil", "bank", "--json", "--method",
                          "mean", "--layer", "-1", *model)  # fmt: skip
    assert code == 0, err
    record = json.loads(out)
    assert set(record) == KEYS
    assert record["method"] == "mean" and record["corrupted"] is None
    assert {h["layer"] for h in record["heads"]} == {1} and len(record["heads"]) == 8
    assert set(record["heads"][0]) == {"layer", "head", "logit_diff", "effect"}


@pytest.mark.slow
def test_patching_prints_the_share_restored_and_draws_the_heatmap(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    model = ("--model", str(tiny_decoder("llama", arch="lm")))
    out_file = tmp_path / "heads.png"
    code, out, err = _run(PROMPT, "--target", "the", "--foil", "bank", "--patch", CORRUPTED,
                          "--out", str(out_file), "--show", *model)  # fmt: skip
    assert code == 0, err
    assert "share restored" in out and "corrupted" in out
    assert out_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out_file}" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--target", "unbelievably", "--foil", "the"], ["--target", "3 pieces", "'un"]),
        (["--target", "the", "--foil", "bank", "--patch", "Mary thought."], ["--patch"]),
        (["--target", "the", "--foil", "bank", "--layer", "7"], ["--layer", "2 layers"]),
    ],
)
def test_bad_requests_are_one_line(tiny_decoder: TinyFactory, args: list[str], words: list[str]):
    line = _refused(PROMPT, *args, "--model", str(tiny_decoder("llama", arch="lm")))
    assert all(w in line for w in words), line

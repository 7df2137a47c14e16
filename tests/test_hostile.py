"""Hostile files, huge inputs and odd terminals (issue 14), as real processes.

The bad-input catalogue in test_cli.py runs each case through CliRunner; here are the
cases that need a real process: what reaches file descriptor 2 from Rust, the
encoding of a real stdout, memory and time measured from outside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TinyFactory

SHORT = "Vi João e Maria ontem. Eles estavam juntos."


def attnviz(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "attnviz", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1", **(env or {})},
        timeout=timeout,
    )


def one_error_line(result: subprocess.CompletedProcess[bytes], code: int) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == code, err
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.slow  # subprocess
def test_a_panicking_tokenizer_prints_one_line_without_rusts_backtrace(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "regex"
    shutil.copytree(tiny_bert(), folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    split = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated"}
    tokenizer["pre_tokenizer"] = {**split, "invert": False}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    result = attnviz("tokens", "a" * 40 + "b", "--model", str(folder), env={"RUST_BACKTRACE": "1"})
    assert "the model's tokenizer failed" in one_error_line(result, 1)


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize(
    "env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0", "LANG": "C"}]
)
def test_an_ascii_terminal_gets_a_result(env: dict[str, str]) -> None:
    result = attnviz("show", SHORT, env=env)
    assert result.returncode == 0, result.stderr
    assert b"Jo?o" in result.stdout and b"Maria" in result.stdout


@pytest.mark.slow  # subprocess
def test_valid_utf8_is_valid_in_the_c_locale() -> None:
    """LC_ALL=C without UTF-8 mode decodes argv and stdin as ASCII: attnviz reads UTF-8."""
    env = {"LC_ALL": "C", "PYTHONUTF8": "0", "LANG": "C"}
    result = attnviz("tokens", "café", env=env)
    assert result.returncode == 0, result.stderr
    piped = attnviz("show", "--json", stdin="café crème".encode(), env=env)
    assert piped.returncode == 0, piped.stderr
    # read as UTF-8; printed in the locale's ASCII, what it cannot hold as ?
    assert json.loads(piped.stdout)["tokens"][1:3] == ["caf?", "cr?me"]


@pytest.mark.slow  # a 150-word model view is computed before the image is refused
def test_an_image_too_big_to_draw_is_refused_before_drawing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    out = tmp_path / "m.svg"
    result = CliRunner().invoke(
        app, ["model", "word " * 150, "--out", str(out), "--dpi", "1200", "--no-cache"]
    )
    assert result.exit_code == 2, result.output
    assert "more than attnviz draws (40 million): use --dpi 279 or less" in result.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []

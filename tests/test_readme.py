"""The README's examples run as written, and its sample output is what attnviz prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def _examples() -> list[str]:
    block = README.split("Examples:", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.startswith("attnviz ")]


@pytest.mark.slow  # every README example, images included
@pytest.mark.parametrize("line", _examples())
def test_readme_example_runs(line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, shlex.split(line)[1:], env={"COLUMNS": "100"})
    assert result.exit_code == 0, (line, result.stderr)
    out = re.search(r"--out (\S+)", line)
    if out:
        assert (tmp_path / out.group(1)).stat().st_size > 0


def test_readme_terminal_output_is_real() -> None:
    block = README.split("```console\n", 1)[1].split("```", 1)[0]
    command, *expected = block.splitlines()
    result = CliRunner().invoke(app, shlex.split(command)[2:], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert [line.rstrip() for line in result.stdout.splitlines()] == expected


def test_readme_example_images_exist_and_are_small() -> None:
    images = re.findall(r"\]\((docs/[^)]+\.png)\)", README)
    assert "docs/joao-layer5-head5.png" in images and len(images) >= 3
    for name in images:
        image = Path(__file__).parent.parent / name
        assert image.is_file() and image.stat().st_size < 200_000, name


def test_readme_numbers_are_the_models() -> None:
    import json

    match = re.search(
        r"`ele` puts ([\d.]+) of its attention on `João` and ([\d.]+) on `trem`", README
    )
    assert match
    result = CliRunner().invoke(app, ["show", "--layer", "5", "--head", "5", "--json"])
    record = json.loads(result.stdout)
    row = record["weights"][record["tokens"].index("ele")]
    assert f"{row[record['tokens'].index('João')]:.2f}" == match.group(1)
    assert f"{row[record['tokens'].index('trem')]:.2f}" == match.group(2)


def _python_blocks() -> list[str]:
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.mark.slow  # the README's API walk, images included
def test_readme_python_api_walk_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API section's code runs as written, in order; a comment that is a Python
    literal after an expression is what that expression gives."""
    import ast

    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    assert len(blocks) >= 4
    namespace: dict = {}
    checked = 0
    for block in blocks:
        for line in block.splitlines():
            code, _, comment = line.partition("  # ")
            if not code.strip() or code.lstrip().startswith("#"):
                continue
            try:
                expected = ast.literal_eval(comment.strip()) if comment else None
            except (ValueError, SyntaxError):
                expected = None
            if expected is None:
                exec(code, namespace)
                continue
            assert eval(code, namespace) == expected, line
            checked += 1
    assert checked >= 8
    assert (tmp_path / "he-john.png").stat().st_size > 0
    assert (tmp_path / "sentence.npz").stat().st_size > 0

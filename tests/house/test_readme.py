"""The README's examples run as written, and its sample output is what attnviz prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

README = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")


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


def _console_blocks() -> list[str]:
    blocks = [part.split("```", 1)[0] for part in README.split("```console\n")[1:]]
    return [block for block in blocks if block.startswith("$ attnviz ")]


@pytest.mark.parametrize("block", _console_blocks(), ids=lambda b: b.splitlines()[0])
def test_readme_terminal_output_is_real(block: str) -> None:
    command, *expected = block.splitlines()
    result = CliRunner().invoke(app, shlex.split(command)[2:], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert [line.rstrip() for line in result.stdout.splitlines()] == [
        line.rstrip() for line in expected
    ]


def test_readme_has_the_new_console_examples() -> None:
    commands = [block.splitlines()[0] for block in _console_blocks()]
    assert any("find --from he --to John" in c for c in commands)
    assert any("--query he" in c for c in commands)


def test_readme_example_images_exist_and_are_small() -> None:
    images = re.findall(r"\]\((docs/[^)]+\.png)\)", README)
    assert "docs/john-layer3-head7.png" in images and len(images) >= 3
    for name in images:
        image = Path(__file__).parents[2] / name
        assert image.is_file() and image.stat().st_size < 200_000, name


def test_readme_numbers_are_the_models() -> None:
    import json

    match = re.search(
        r"`he`\nputs ([\d.]+) of its attention on `John` and ([\d.]+) on `train`", README
    )
    assert match
    result = CliRunner().invoke(app, ["show", "--layer", "3", "--head", "7", "--json"])
    record = json.loads(result.stdout)
    row = record["weights"][record["tokens"].index("he")]
    assert f"{row[record['tokens'].index('John')]:.2f}" == match.group(1)
    assert f"{row[record['tokens'].index('train')]:.2f}" == match.group(2)


def test_readme_find_claims_are_the_models() -> None:
    """The English head that links he to John, and the Portuguese broad column, as told."""
    import attnviz

    en = attnviz.analyse("John thought: the train was full, but he found a free seat.")
    best = en.find("he", "John").links[0]
    assert (best.layer, best.head, round(best.weight, 2), best.others_above) == (3, 7, 0.7, 0)
    assert "layer 3, head 7, where\n`he` puts 0.70 on `John`" in README
    pt = attnviz.analyse("João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre.")
    links = pt.find("ele", "João")
    top = links.links[0]
    view = pt.view(top.layer, top.head)
    k, q = view.labels.index("João"), view.labels.index("ele")
    above = [
        view.labels[i] for i in range(len(view.labels)) if view.matrix[i, k] > view.matrix[q, k]
    ]
    above = [w for w in above if w not in ("ele", "João")]
    told = re.search(
        r"ranks layer (\d+),\nhead (\d+) first, with ([\d.]+), but (\d) other words \(([^)]*)\)",
        README,
    )
    assert told
    assert (str(top.layer), str(top.head), f"{top.weight:.2f}") == told.groups()[:3]
    assert int(told.group(4)) == top.others_above == len(above)
    assert sorted(re.findall(r"`([^`]+)`", told.group(5))) == sorted(above)
    assert len(pt.tokens) == 28 and "becomes 28 pieces for 17 words" in README
    assert len(pt.words) == 17


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

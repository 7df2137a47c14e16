"""A file written quietly: with --out a command writes the file and says `wrote FILE` on stderr,
stdout empty (a compiler's -o); --show draws in the terminal as well; --show alone is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat."

# Every command with --out (but export, which has no drawing): its options, a word its drawing has.
DRAWINGS = {
    "show": (["--layer", "2"], "layer 2"),
    "heads": (["--layer", "3"], "all 12 heads"),
    "model": (["--heads", "0,1"], "layers"),
    "distance": ([], "sink"),
    "rollout": ([], "rollout"),
    "find": (["--from", "he", "--to", "John"], "john"),
    "compare-measures": (["--query", "he", "--layer", "3"], "john"),
    "stats": ([], "entropy"),
}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow  # each command computes and writes an image file on the default model
@pytest.mark.parametrize("command", DRAWINGS)
def test_out_writes_the_file_and_only_says_so(command: str, tmp_path: Path) -> None:
    options = DRAWINGS[command][0]
    image = tmp_path / "x.png"
    code, out, err = _run(command, TEXT, *options, "--out", str(image), "--quiet")
    assert code == 0, err
    assert out == ""
    assert err.splitlines() == [f"wrote {image}"]
    assert image.stat().st_size > 0


@pytest.mark.slow  # each command computes and draws on the default model
@pytest.mark.parametrize("command", DRAWINGS)
def test_show_draws_in_the_terminal_as_well(command: str, tmp_path: Path) -> None:
    options, drawn = DRAWINGS[command]
    image = tmp_path / "x.png"
    code, out, err = _run(command, TEXT, *options, "--out", str(image), "--show", "-q")
    assert code == 0, err
    assert drawn in out.lower()
    assert err.splitlines() == [f"wrote {image}"]
    assert image.stat().st_size > 0
    code, alone, _ = _run(command, TEXT, *options, "-q")
    assert code == 0 and alone == out  # the same drawing as without --out


def test_heads_with_out_prints_no_grid_and_one_wrote_line(tmp_path: Path) -> None:
    """The issue's case: `heads TEXT --layer 3 --out x.png` printed the grid as well."""
    code, out, err = _run("heads", TEXT, "--layer", "3", "--out", str(tmp_path / "x.png"), "-q")
    assert (code, out) == (0, "")
    assert [line for line in err.splitlines() if line.startswith("wrote ")] == [
        f"wrote {tmp_path / 'x.png'}"
    ]


def test_a_page_is_written_quietly_too(tmp_path: Path) -> None:
    code, out, err = _run("heads", TEXT, "--layer", "3", "--out", str(tmp_path / "v.html"), "-q")
    assert (code, out, err) == (0, "", f"wrote {tmp_path / 'v.html'}\n")


def test_json_asked_for_is_still_printed_beside_the_file(tmp_path: Path) -> None:
    """--json is an output the user asked for on stdout: only the drawing goes away."""
    code, out, err = _run("show", TEXT, "--json", "--out", str(tmp_path / "x.png"), "-q")
    assert code == 0, err
    assert json.loads(out)["model"] == "all-MiniLM-L6-v2"
    assert err == f"wrote {tmp_path / 'x.png'}\n"


@pytest.mark.parametrize("command", [*DRAWINGS, "generate"])
def test_show_without_out_is_refused_in_one_line(command: str) -> None:
    options = DRAWINGS.get(command, ([], ""))[0]
    code, out, err = _run(command, TEXT, *options, "--show")
    assert (code, out) == (2, "")
    assert err == "Error: --show draws in the terminal as well as the file: pass --out\n"


def test_show_is_declared_on_every_command_with_out_and_no_other() -> None:
    import typer

    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if name == "cache":
            continue
        flags = {flag for param in command.params for flag in getattr(param, "opts", [])}
        assert ("--show" in flags) == ("--out" in flags and name != "export"), name


def test_generate_writes_its_file_quietly(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    folder = str(tiny_decoder("gpt2", arch="lm"))
    steps = tmp_path / "steps.png"
    args = ("generate", "Once upon a time", "--max-new", "3", "--model", folder, "-q")
    code, out, err = _run(*args, "--out", str(steps))
    assert (code, out, err) == (0, "", f"wrote {steps}\n")
    code, shown, err = _run(*args, "--out", str(steps), "--show")
    assert code == 0 and shown == _run(*args)[1] != ""
    assert err == f"wrote {steps}\n"

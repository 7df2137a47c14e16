"""No option silently dropped: each option of each command, tried on a short text (and on a
`--load` file where the command takes one), either changes what the command prints or writes,
or is refused in one line that names it. The text is read by a tiny BERT with the default
model's tokenizer (the default model itself is what `--model` is tried with), for speed.

The options are read from the commands themselves, so an option added without a value here,
or a command added without its arguments here, fails the test until it is walked too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from attnviz.cli import app
from tests.conftest import TinyFactory

runner = CliRunner()
TEXT = "Unbelievably, João waved. He smiled."  # a word of several pieces: --units shows
# What each option is tried with: a value other than its default.
VALUES: dict[str, list[str]] = {
    "--layer": ["0"], "--head": ["1"], "--heads": ["0,1"], "--units": ["tokens"],
    "--out": ["out.png"], "--show": [], "--json": [], "--query": ["He"], "--exclude": ["punct"],
    "--measure": ["norm"], "--pair": ["And B."], "--stack": ["decoder"], "--target": ["Oi."],
    "--generate": ["2"], "--mask": ["causal"], "--truncate": [], "--max-tokens": ["6"],
    "--no-bos": [], "--engine": ["transformers"], "--no-cache": [], "--dtype": ["float16"],
    "--dpi": ["300"], "--cmap": ["magma"], "--theme": ["dark"], "--transparent": [],
    "--annotate": [], "--pool": ["4"], "--pool-by": ["max"], "--lang": ["pt"], "--quiet": [],
    "--debug": [], "--upto": ["0"], "--top": ["1"], "--method": ["flow"], "--view": ["heads"],
    "--token": ["He"], "--index": ["2"], "--sort": ["entropy"], "--file": ["corpus.txt"],
    "--batch-size": ["1"], "--device": ["cpu"], "--threads": ["1"], "--own-scales": [],
    "--model": ["the default model's folder"], "--from": ["João"], "--to": ["He"],
    "--load": ["saved.npz"], "--shard": ["1/2"], "--partial": ["out-partial.json"],
    "--dask": [""],
}  # fmt: skip
# What a command needs besides its text (export: an image, so that every view option shows).
REQUIRED = {
    "explain": ["--index", "1"],
    "find": ["--from", "He", "--to", "João"],
    "compare-measures": ["--query", "He"],
    "export": ["--out", "out.png"],
}
# Options whose effect is not in what the command prints or writes, by design.
UNSEEN = {
    "--no-cache": "the same attention, computed afresh",
    "--quiet": "notes on stderr only, and a short text gets none",
    "--debug": "tracebacks of errors only",
    "--batch-size": "how the corpus runs, not what it computes",
    "--device": "how the corpus runs, not what it computes",
    "--threads": "how the corpus runs, not what it computes",
}
# Commands not walked here, and where their options are checked.
NOT_WALKED = {
    "generate": "needs a decoder with its LM head: tests/cli/test_decoder_commands.py",
    "cache": "no option but --debug: tests/cache/test_cache_commands.py",
    "models": "reads no text nor model: tests/cli/test_models_command.py",
    "explore": "a full-screen app: tests/explore/ presses its keys",
    "ablate": "needs a decoder with its LM head: tests/cli/test_ablate_command.py",
    "merge": "reads partial files, no text: tests/cli/test_merge_command.py",
}
WALKED = ["show", "heads", "model", "distance", "explain", "rollout", "find",
          "compare-measures", "stats", "tokens", "info", "export"]  # fmt: skip


def _options(name: str) -> list[str]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return [p.opts[0] for p in command.params if p.param_type_name == "option"]


def test_every_command_is_walked() -> None:
    names = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert names == set(WALKED) | set(NOT_WALKED)


def _run(argv: list[str], folder: Path) -> tuple[Any, ...]:
    """Exit code, stdout, stderr and the files written: what a run gives the user."""
    for old in folder.glob("out*"):
        old.unlink()
    result = runner.invoke(app, argv, env={"COLUMNS": "100", "LANG": "C.UTF-8"})
    files = {f.name: f.read_bytes() for f in sorted(folder.glob("out*"))}
    return result.exit_code, result.stdout, result.stderr, files


def _refused_naming(given: tuple[Any, ...], option: str) -> bool:
    """Refused in one line that names `option` (by its flag; a message of the API's own
    names it by its parameter, `measure 'norm'`)."""
    lines = given[2].strip().splitlines()
    named = option in lines[-1] or f"{option[2:]} " in lines[-1] if lines else False
    return given[0] != 0 and len(lines) == 1 and named


@pytest.fixture(scope="module")
def tiny(tiny_bert: TinyFactory, embedded_folder: Path) -> str:
    VALUES["--model"] = [str(embedded_folder)]
    return str(tiny_bert())


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, tiny: str) -> Path:
    here = tmp_path_factory.mktemp("walk")
    (here / "corpus.txt").write_text("A cat sat.\nThe dog ran.\n", encoding="utf-8")
    assert _run(["export", TEXT, "--model", tiny, "--out", str(here / "saved.npz")], here)[0] == 0
    return here


@pytest.mark.slow  # about 300 runs of the commands, in-process
@pytest.mark.parametrize("name", WALKED)
@pytest.mark.parametrize("loaded", [False, True], ids=["text", "load"])
def test_each_option_changes_the_output_or_is_refused(
    name: str, loaded: bool, folder: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    options = _options(name)
    if loaded and "--load" not in options:
        pytest.skip(f"{name} has no --load")
    source = ["--load", "saved.npz"] if loaded else ["--model", tiny]
    source += [] if loaded or name == "info" else [TEXT]
    base = [name, *source, *REQUIRED.get(name, [])]
    plain = _run(base, folder)
    assert plain[0] == 0, (base, plain[2])
    silent = []
    for option in options:
        if (option in base and option != "--model") or option in UNSEEN:
            continue
        assert option in VALUES, f"add a value to try for {name} {option}"
        if option == "--truncate":  # it keeps the start of a text too long: make it so
            too_long = [*base, "--max-tokens", "6"]
            if _run([*too_long, "--truncate"], folder) == _run(too_long, folder):
                silent.append(option)
            continue
        given = _run([*base, option, *VALUES[option]], folder)  # the last --model counts
        if given[0] != 0:
            assert _refused_naming(given, option), (name, option, given[2])
        elif given == plain:
            silent.append(option)
    assert silent == [], f"{name} drops these options without a word"

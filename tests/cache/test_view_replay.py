"""A memoised `show` (cache.views): replayed byte for byte without typer, rich, numpy or
torch, and only while nothing it was drawn from, nor the environment, has changed."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TEXT = "the cat sat on the mat"
WATCHED = ("typer", "rich", "numpy", "torch")

# The console script (`attnviz.cli:main`), reporting at exit which of WATCHED it imported.
LAUNCHER = """
import atexit, json, sys
from pathlib import Path

def report():
    Path({report!r}).write_text(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))

atexit.register(report)
sys.argv = ["attnviz", *sys.argv[1:]]
from attnviz.cli import main
main()
"""


class Runner:
    """Runs `attnviz ARGS` in its own folder, with a cache of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache = root / "cache"
        self.work = root / "work"  # the working folder: nothing is written there
        self.work.mkdir(exist_ok=True)
        self.report = root / "report.json"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "ATTNVIZ_CACHE_DIR": str(self.cache), "COLUMNS": "100", **extra}

    def __call__(
        self, *args: str, tty: bool = False, **extra: str
    ) -> tuple[bytes, bytes, list[str]]:
        """(stdout, stderr, which of WATCHED the run imported)."""
        code = LAUNCHER.format(report=str(self.report), watched=WATCHED)
        command = [sys.executable, "-c", code, *args]
        if tty:
            main, child = pty.openpty()
            try:
                done = subprocess.run(
                    command, stdout=child, stderr=subprocess.PIPE, env=self.env(**extra),
                    cwd=self.work, timeout=300,
                )  # fmt: skip
            finally:
                os.close(child)
                os.close(main)
            out = b""
        else:
            done = subprocess.run(
                command, capture_output=True, env=self.env(**extra), cwd=self.work, timeout=300
            )
            out = done.stdout
        assert done.returncode == 0, done.stderr.decode()
        return out, done.stderr, json.loads(self.report.read_text())

    def memos(self) -> list[Path]:
        views = self.cache / "views"
        return sorted(views.iterdir()) if views.is_dir() else []


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the attentions of TEXT under the default model (computed once)."""
    root = tmp_path_factory.mktemp("seeded")
    Runner(root)("show", TEXT)
    return root / "cache"


@pytest.fixture
def run(tmp_path: Path, seeded: Path) -> Runner:
    """A runner over a copy of the seeded cache (its entry, its secret)."""
    runner = Runner(tmp_path)
    shutil.copytree(seeded, runner.cache)
    return runner


def replayed(imported: list[str]) -> bool:
    return imported == []


@pytest.mark.slow  # subprocesses
def test_a_replay_is_byte_identical_and_imports_nothing_heavy(run: Runner) -> None:
    fresh, _, _ = run("show", TEXT, "--debug", ATTNVIZ_NO_CACHE="1")  # not even watched
    hit, _, imported = run("show", TEXT)
    assert not replayed(imported) and "typer" in imported  # a hit, drawn: memoised now
    assert len(run.memos()) == 1
    again, err, imported = run("show", TEXT)
    assert replayed(imported), imported
    assert again == hit == fresh and fresh.strip() and err == b""
    # another layer and head is another memo, drawn the first time, then replayed
    other, _, imported = run("show", TEXT, "--layer", "1", "--head", "0")
    assert not replayed(imported) and other != fresh
    assert len(run.memos()) == 2
    assert run("show", TEXT, "--layer", "1", "--head", "0")[::2] == (other, [])
    assert run("show", TEXT, "--layer", "1", "--head", "0", ATTNVIZ_NO_CACHE="1")[0] == other


def _memoised(run: Runner, *args: str, **extra: str) -> bytes:
    """Run until a memo is written (by the first run that hits the cache); its stdout."""
    for _ in range(2):
        out, _, imported = run(*args, **extra)
        assert not replayed(imported)
        if run.memos():
            return out
    raise AssertionError("no memo written")


@pytest.mark.slow  # subprocesses
def test_a_changed_model_file_is_not_replayed(run: Runner, embedded_folder: Path) -> None:
    model = run.root / "model"
    model.mkdir()
    for file in embedded_folder.iterdir():
        if file.name == "config.json":
            shutil.copy2(file, model / file.name)
        elif not file.name.startswith("."):
            (model / file.name).symlink_to(file.resolve())
    args = ("show", TEXT, "--model", str(model))
    before = _memoised(run, *args)
    assert replayed(run(*args)[2])
    config = model / "config.json"
    config.write_bytes(config.read_bytes())  # the same content, written again
    out, _, imported = run(*args)
    assert not replayed(imported) and out == before
    assert replayed(run(*args)[2])  # memoised again
    (model / "notes.txt").write_text("a file added")  # part of the attention's key
    out, _, imported = run(*args)
    assert not replayed(imported) and out == before


@pytest.mark.slow  # subprocesses
def test_a_touched_entry_is_not_replayed(run: Runner) -> None:
    before = _memoised(run, "show", TEXT)
    (entry,) = run.cache.glob("*.npz")
    os.utime(entry, ns=(1, 1))
    out, _, imported = run("show", TEXT)
    assert not replayed(imported) and out == before


@pytest.mark.slow  # subprocesses
def test_another_environment_or_terminal_is_not_replayed(run: Runner) -> None:
    _memoised(run, "show", TEXT)
    wide, _, imported = run("show", TEXT, COLUMNS="60")
    assert not replayed(imported)
    assert wide == run("show", TEXT, COLUMNS="60", ATTNVIZ_NO_CACHE="1")[0]
    assert not replayed(run("show", TEXT, ATTNVIZ_SOME_SETTING="x")[2])
    assert not replayed(run("show", TEXT, tty=True)[2])  # a terminal, not a pipe


@pytest.mark.slow  # subprocesses
def test_a_tampered_memo_is_not_replayed(run: Runner) -> None:
    before = _memoised(run, "show", TEXT)
    (memo,) = run.memos()
    data = memo.read_bytes()
    memo.write_bytes(data[:-3] + b"9" + data[-2:])  # the drawing edited, the HMAC kept
    out, _, imported = run("show", TEXT)
    assert not replayed(imported) and out == before


@pytest.mark.slow  # subprocesses
def test_a_run_with_a_warning_or_a_file_is_not_memoised(run: Runner) -> None:
    for _ in range(3):
        _, err, imported = run("show", TEXT, ATTNVIZ_CACHE_MB="lots")
        assert b"warning: ATTNVIZ_CACHE_MB" in err and not replayed(imported)
    out = run.root / "view.html"
    for _ in range(2):
        run("show", TEXT, "--out", str(out))
    assert out.is_file() and run.memos() == []


@pytest.mark.slow  # subprocesses
def test_cache_clear_removes_memos_and_no_cache_makes_none(run: Runner) -> None:
    _memoised(run, "show", TEXT)
    run("cache", "clear")
    assert not (run.cache / "views").exists()
    assert not replayed(run("show", TEXT)[2])
    for _ in range(2):
        assert not replayed(run("show", TEXT, ATTNVIZ_NO_CACHE="1")[2])
    assert run.memos() == []


@pytest.mark.slow  # subprocesses
def test_a_view_with_its_note_is_replayed_with_the_note(run: Runner) -> None:
    """The lesson's Portuguese sentence on the English default model prints a note on how
    badly it fits the vocabulary: the note is part of what the command prints, replayed on
    stderr with the view on stdout; --quiet's memo has no note."""
    text = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."
    fresh, fresh_err, _ = run("show", text, "--debug", ATTNVIZ_NO_CACHE="1")
    assert b"note:" in fresh_err
    _memoised(run, "show", text)
    out, err, imported = run("show", text)
    assert replayed(imported), imported
    assert (out, err) == (fresh, fresh_err)
    quiet = _memoised(run, "show", text, "--quiet")
    out, err, imported = run("show", text, "--quiet")
    assert replayed(imported) and out == quiet == fresh and err == b""

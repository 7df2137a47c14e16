"""`attnviz merge` and `--shard I/N --partial FILE` on `stats` and `find --file`: the slices
merged print exactly what one run prints; what does not go together is one line, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "sample_sentences" / "pronouns-en.jsonl"


def run(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "100"})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    lines = [f"Line {n}: the dog barked" + ", and the cat ran" * (n % 3) + "." for n in range(19)]
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n")
    return folder / "corpus.txt"


@pytest.mark.slow
def test_stats_slices_merged_print_what_one_run_prints(corpus: Path, tmp_path: Path) -> None:
    base = ["stats", "--file", corpus, "--batch-size", "1"]
    for i in (1, 2, 3):
        written = run(*base, "--shard", f"{i}/3", "--partial", tmp_path / f"p{i}.json")
        assert written.exit_code == 0, written.stderr
        assert written.stdout == "" and f"wrote {tmp_path / f'p{i}.json'}" in written.stderr
    parts = [tmp_path / f"p{i}.json" for i in (3, 1, 2)]
    for shown in (["--json"], ["--sort", "prev", "--top", "4"]):
        whole, merged = run(*base, *shown), run("merge", *parts, *shown)
        assert whole.exit_code == merged.exit_code == 0, merged.stderr
        assert merged.stdout == whole.stdout
    image = run("merge", *parts, "--out", tmp_path / "stats.png")
    assert image.exit_code == 0 and (tmp_path / "stats.png").stat().st_size > 0
    missing = run("merge", *parts[:2])
    assert missing.exit_code == 2 and "slice 2/3 missing" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_find_file_slices_merged_print_what_one_run_prints(tmp_path: Path) -> None:
    examples = tmp_path / "pronouns.jsonl"
    examples.write_text("".join(EXAMPLES.read_text().splitlines(keepends=True)[:10]))
    for i in (1, 2):
        written = run("find", "--file", examples, "--shard", f"{i}/2", "--partial",
                      tmp_path / f"r{i}.json")  # fmt: skip
        assert written.exit_code == 0, written.stderr
    whole = run("find", "--file", examples, "--json")
    merged = run("merge", tmp_path / "r2.json", tmp_path / "r1.json", "--json")
    assert whole.exit_code == merged.exit_code == 0, merged.stderr
    assert merged.stdout == whole.stdout and '"held_out"' in merged.stdout
    sorted_roles = run("merge", tmp_path / "r1.json", tmp_path / "r2.json", "--sort", "prev")
    assert sorted_roles.exit_code == 2 and "find --file's" in sorted_roles.stderr


def test_what_does_not_go_together_is_refused_before_any_work(corpus: Path, tmp_path: Path) -> None:
    cases = {
        ("--shard", "1/2"): "add --partial FILE",
        ("--shard", "3/2", "--partial", "p.json"): "--shard 3 is out of range",
        ("--shard", "1-2", "--partial", "p.json"): "--shard must be I/N",
        ("--partial", "p.json", "--json"): "--partial writes the sums",
        ("--dask", "tcp://127.0.0.1:1", "--shard", "1/2"): "--dask cuts the input",
        ("--partial", tmp_path / "no" / "p.json"): "no folder",
    }
    for extra, expected in cases.items():
        result = run("stats", "--file", corpus, *extra)
        assert result.exit_code == 2, (extra, result.stderr)
        assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    one = run("find", "A sentence he wrote.", "--from", "he", "--to", "sentence", "--shard", "1/2")
    assert one.exit_code == 2 and "are for --file" in one.stderr


def test_merge_refuses_a_file_that_is_not_a_partial(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text('{"a": 1}')
    result = run("merge", tmp_path / "notes.json")
    assert result.exit_code == 2 and "notes.json: not a partial file" in result.stderr
    absent = run("merge", tmp_path / "absent.json")
    assert absent.exit_code == 2 and "no such file" in absent.stderr


def test_dask_missing_says_how_to_install_it(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if absent
    result = run("stats", "--file", corpus, "--dask", "tcp://127.0.0.1:8786")
    assert result.exit_code == 2
    assert "pip install 'attnviz[dask]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("given", ["/dev/zero", "folder"])
def test_merge_of_a_device_or_a_folder_says_what_to_pass(tmp_path: Path, given: str) -> None:
    """Not a regular file: one line saying to pass the file --partial wrote (the wording of a
    model's files, 'a model's a partial file … came with the checkpoint', was wrong here)."""
    path = Path(given) if given.startswith("/") else tmp_path
    result = run("merge", path, path)
    message = result.stderr.strip()
    assert result.exit_code != 0 and len(message.splitlines()) == 1, message
    assert "reads a partial file only from a plain file" in message
    assert "pass the file that --partial wrote" in message and "checkpoint" not in message

"""The attention cache as users meet it: through the pipeline and the commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz.api import prepare
from attnviz.cli import app
from attnviz.pipeline import compute
from tests.conftest import TinyFactory

runner = CliRunner()
TEXT = "O trem estava cheio, mas ele conseguiu uma cadeira livre."


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    monkeypatch.delenv("ATTNVIZ_NO_CACHE", raising=False)
    return folder


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.npz")) if folder.is_dir() else []


def test_hit_and_miss_give_identical_arrays(cache_dir: Path) -> None:
    prepared = prepare(TEXT)
    miss = compute(prepared, use_cache=True)
    assert len(_entries(cache_dir)) == 1
    hit = compute(prepared, use_cache=True)
    assert np.array_equal(hit, miss)
    assert hit.dtype == np.float32
    assert np.array_equal(compute(prepared), miss)


def test_pair_and_causal_mask_are_cached_apart(cache_dir: Path) -> None:
    plain = compute(prepare(TEXT), use_cache=True)
    causal = compute(prepare(TEXT), causal=True, use_cache=True)
    paired = compute(prepare(TEXT, pair="Ele sentou."), use_cache=True)
    assert len(_entries(cache_dir)) == 3
    assert not np.allclose(plain, causal)
    assert paired.shape != plain.shape


def _show_json(*args: str, env: dict[str, str] | None = None) -> dict:
    result = runner.invoke(app, ["show", *args, "--json"], env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_a_changed_model_file_invalidates(cache_dir: Path, tiny_bert: TinyFactory) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    folder = cache_dir.parent / "model"
    shutil.copytree(tiny_bert("safetensors"), folder)  # the fixture's folder is shared
    before = _show_json(TEXT, "--model", str(folder), "--head", "0")
    path = folder / "model.safetensors"
    state = load_file(str(path))
    key = next(k for k in state if k.endswith("layer.1.attention.self.query.weight"))
    state[key] = torch.randn_like(state[key]) * 3
    save_file(state, str(path), metadata={"format": "pt"})
    after = _show_json(TEXT, "--model", str(folder), "--head", "0")
    assert not np.allclose(before["weights"], after["weights"], atol=1e-4)
    fresh = _show_json(TEXT, "--model", str(folder), "--head", "0", "--no-cache")
    np.testing.assert_allclose(after["weights"], fresh["weights"], atol=1e-7)


def test_a_corrupt_entry_is_recomputed_with_a_warning(cache_dir: Path) -> None:
    expected = _show_json(TEXT, "--head", "1")
    (entry,) = _entries(cache_dir)
    entry.write_bytes(b"not a zip file at all")
    result = runner.invoke(app, ["show", TEXT, "--head", "1", "--json", "--quiet"])  # no notes
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert result.stderr.startswith("warning:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_hit_found_from_the_text_brings_the_pieces_the_tokenizer_gives(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attnviz
    from attnviz.text import tokenize

    first = attnviz.analyse(TEXT, pair="Ele sentou, feliz.")
    monkeypatch.setattr(tokenize, "load_tokenizer", _no_tokenizer)
    again = attnviz.analyse(TEXT, pair="Ele sentou, feliz.")
    assert again.pieces == first.pieces  # tokens, ids, offsets, word and sequence ids, labels
    assert [w.label for w in again.words] == [w.label for w in first.words]
    assert again.pair_start == first.pair_start
    assert np.array_equal(again.attentions, first.attentions)


def _no_tokenizer(*args: object, **kwargs: object) -> None:
    raise AssertionError("a cache hit loaded the tokenizer")


@pytest.mark.parametrize(
    "change",
    [
        lambda T: {"offsets": np.array([[0, 10**6]] * T)},  # spans far outside the text
        lambda T: {"word_ids": np.full(T, -1)},  # every piece special, none a word
        lambda T: {"tokens": np.arange(T)},  # numbers, not strings
        lambda T: {"dropped": np.array([1, 2])},  # not one count
        lambda T: {"sequence_ids": np.full(T, 1)},  # a pair, but there is none
    ],
    ids=["offsets", "word_ids", "tokens", "dropped", "sequence_ids"],
)
def test_an_entry_whose_pieces_do_not_fit_is_discarded_with_a_warning(
    cache_dir: Path, change: Callable[[int], dict[str, np.ndarray]]
) -> None:
    expected = _show_json(TEXT, "--head", "1")
    (entry,) = _entries(cache_dir)
    with np.load(entry) as archive:
        arrays = dict(archive)
    np.savez(entry, **{**arrays, **change(len(arrays["ids"]))})
    result = runner.invoke(app, ["show", TEXT, "--head", "1", "--json", "--quiet"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == expected
    assert result.stderr.startswith("warning: cached attentions") and "discarded" in result.stderr


def test_no_cache_writes_nothing(cache_dir: Path) -> None:
    _show_json(TEXT, "--no-cache")
    _show_json(TEXT, env={"ATTNVIZ_NO_CACHE": "1"})
    assert _entries(cache_dir) == []


def test_an_unusable_cache_folder_only_warns(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(blocker))
    result = runner.invoke(app, ["show", TEXT, "--json"])
    assert result.exit_code == 0
    assert "warning: cannot use the attention cache" in result.stderr
    assert json.loads(result.stdout)["weights"]


def test_cache_info_and_clear(cache_dir: Path) -> None:
    _show_json(TEXT)
    _show_json("Outra frase.")
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0
    assert str(cache_dir) in info.stdout and "entries  2" in info.stdout
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 2 entries" in cleared.stdout
    assert _entries(cache_dir) == []


def test_the_bound_holds_through_the_commands(cache_dir: Path, monkeypatch) -> None:
    compute(prepare(TEXT), use_cache=True)
    (first,) = _entries(cache_dir)
    size = first.stat().st_size
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", str(2.5 * size / 2**20))
    for ending in ("Uma frase.", "Outra frase qualquer.", "E mais uma, a terceira."):
        text = f"{TEXT} {ending}"  # each entry larger than the first
        compute(prepare(text), use_cache=True)
    total = sum(p.stat().st_size for p in _entries(cache_dir))
    assert total <= 2.5 * size
    assert not first.exists()  # the least recently used entry went first


@pytest.mark.slow  # subprocesses
def test_a_cache_hit_imports_neither_torch_nor_transformers(cache_dir: Path) -> None:
    code = (
        "import sys\n"
        "from attnviz.cli import app\n"
        "for args in {runs!r}:\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "print(sorted(m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules))\n"
    )
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": str(cache_dir), "COLUMNS": "100"}

    def heavy(runs: list[list[str]]) -> str:
        result = subprocess.run(
            [sys.executable, "-c", code.format(runs=runs)],
            capture_output=True,
            text=True,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().splitlines()[-1]

    assert heavy([["show", TEXT]]) == "['tokenizers', 'torch']"  # the miss computes
    views = [
        ["show", TEXT, "--layer", "2"],
        ["heads", TEXT, "--layer", "0", "--units", "tokens"],
        ["rollout", TEXT],
        ["model", TEXT, "--heads", "0"],
        ["export", TEXT, "--out", str(cache_dir.parent / "a.npz")],
    ]
    assert heavy(views) == "[]"


@pytest.mark.slow  # subprocesses
def test_a_folder_without_tokenizer_json_needs_transformers_only_once(
    cache_dir: Path, tiny_bert: TinyFactory
) -> None:
    """The converted tokenizer is kept: a later cache hit imports no torch nor transformers."""
    folder = cache_dir.parent / "vocab-only"
    shutil.copytree(tiny_bert("safetensors"), folder)
    (folder / "tokenizer.json").unlink()
    code = (
        "import sys\n"
        "from attnviz.cli import app\n"
        f"args = ['show', {TEXT!r}, '--model', {str(folder)!r}, '--json']\n"
        "try:\n"
        "    app(args)\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules))\n"
    )
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": str(cache_dir)}

    def run_once() -> tuple[dict, str]:
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env
        )
        assert result.returncode == 0, result.stderr
        *output, modules = result.stdout.strip().splitlines()
        return json.loads("\n".join(output)), modules

    first, first_modules = run_once()
    assert first_modules == "['tokenizers', 'torch', 'transformers']"
    assert len(list((cache_dir / "tokenizers").glob("*.json"))) == 1
    second, second_modules = run_once()
    assert second_modules == "[]"
    assert second == first
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0
    assert list((cache_dir / "tokenizers").glob("*.json")) == []


# --- the converted tokenizer is part of the cache (issue 14) ---------------------------------


def _vocab_only(cache_dir: Path, tiny_bert: TinyFactory) -> str:
    folder = cache_dir.parent / "vocab-only"
    if not folder.exists():
        shutil.copytree(tiny_bert("safetensors"), folder)
        (folder / "tokenizer.json").unlink()
    return str(folder)


@pytest.mark.slow  # transformers converts the tokenizer (about 2 s)
def test_the_converted_tokenizer_is_cached_counted_and_optional(
    cache_dir: Path, tiny_bert: TinyFactory
) -> None:
    folder = _vocab_only(cache_dir, tiny_bert)
    assert runner.invoke(app, ["show", TEXT, "--model", folder, "--no-cache"]).exit_code == 0
    assert not (cache_dir / "tokenizers").exists()

    assert runner.invoke(app, ["tokens", TEXT, "--model", folder]).exit_code == 0
    assert len(list((cache_dir / "tokenizers").glob("*.json"))) == 1
    info = runner.invoke(app, ["cache", "info"]).stdout
    assert "entries  1" in info  # counted in the cache's size, evicted like an entry


@pytest.mark.slow  # transformers converts the tokenizer (about 2 s)
def test_a_tokenizer_the_cache_cannot_keep_is_a_warning(
    cache_dir: Path, tiny_bert: TinyFactory
) -> None:
    folder = _vocab_only(cache_dir, tiny_bert)
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "tokenizers").write_text("a file where the folder goes")  # unwritable, as root too
    result = runner.invoke(app, ["tokens", TEXT, "--model", folder])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("warning: cannot use the attention cache")


def test_cache_clear_that_cannot_remove_fails_in_one_line(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnviz.cache import contents, entries

    entries.store("ab" * 32, np.full((1, 1, 2, 2), 0.5, np.float32), [1, 2])

    def refuse(path: object, *, dir_fd: int | None = None) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(contents.os, "unlink", refuse)  # unlinks relative to the folder's fd
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot remove 1 of the cache's 1 files in")
    assert "Permission denied" in result.stderr and result.stdout == ""

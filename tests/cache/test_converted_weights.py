"""The dequantized weights of a GGUF model, kept in the cache by default: a later run maps
them instead of dequantizing again, gets the very same numbers, refuses a file that was
changed (and keeps a new one), stays under ATTNVIZ_WEIGHTS_MB, and `cache info` / `cache
clear` account for them apart from the attention's entries."""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from attnviz.cache import contents
from attnviz.cli import app
from attnviz.model.gguf import convert as gguf_convert
from attnviz.model.gguf.read import read_header
from attnviz.model.locate import locate
from attnviz.model.weights import read_state_dict
from tests.gguf_files import TEXT, write_gguf

WEIGHTS = ".dequantized.safetensors"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    for name in ("ATTNVIZ_NO_CACHE", "ATTNVIZ_CACHE_MB", "ATTNVIZ_WEIGHTS_MB"):
        monkeypatch.delenv(name, raising=False)
    gguf_convert.forget()
    return folder


class Counted:
    """`gguf_convert.dequantized`, counting the files it dequantizes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.real = gguf_convert.dequantized
        monkeypatch.setattr(gguf_convert, "dequantized", self)

    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.calls += 1
        return self.real(*args, **kwargs)


def _run(path: Path) -> dict[str, torch.Tensor]:
    """The weights a new process reads for the GGUF file at `path`."""
    gguf_convert.forget()
    return read_state_dict(locate(str(path)).folder)


def _reference(path: Path) -> dict[str, torch.Tensor]:
    """The file dequantized now, apart from the cache."""
    arrays = gguf_convert.hf_arrays(read_header(path))
    return {name: torch.from_numpy(values) for name, values in arrays.items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)


def _kept(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"gguf/*/{WEIGHTS}"))


def test_a_later_run_maps_the_kept_weights_instead_of_dequantizing(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "Q8_0")
    counted = Counted(monkeypatch)
    cold = _run(path)
    assert counted.calls == 1 and len(_kept(cache)) == 1
    warm = _run(path)
    again = _run(path)
    assert counted.calls == 1  # neither later run dequantized
    assert _same(warm, cold) and _same(again, cold) and _same(cold, _reference(path))


def test_a_changed_weights_file_is_refused_and_kept_anew(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32", hidden=256, ffn=1024)  # 8 MB
    reference = _reference(path)
    _run(path)
    (kept,) = _kept(cache)
    time.sleep(0.05)  # past the file system's clock tick, so that the write shows in ctime
    with open(kept, "r+b") as out:  # one number in the middle changed, the size the same
        out.seek(kept.stat().st_size // 2 // 4 * 4)
        out.write(b"\x00\x00\x80\x7f")  # +inf
    counted = Counted(monkeypatch)
    assert _same(_run(path), reference)
    assert counted.calls == 1  # refused, dequantized again
    assert _same(_run(path), reference) and counted.calls == 1  # and the new file kept


def test_another_models_weights_put_in_their_place_are_refused(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = write_gguf(tmp_path / "one.gguf", "llama", "F32", seed=1)
    two = write_gguf(tmp_path / "two.gguf", "llama", "F32", seed=2)
    _run(one)
    _run(two)
    first, second = _kept(cache)
    folder_of_two = gguf_convert.identity(two)
    target = second if second.parent.name == folder_of_two else first
    shutil.copyfile(first if target is second else second, target)  # signed, but not for two
    reference = _reference(two)
    counted = Counted(monkeypatch)
    assert _same(_run(two), reference)
    assert counted.calls == 1


def test_a_copied_weights_file_is_checked_whole_once_and_used(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "Q8_0")
    cold = _run(path)
    (kept,) = _kept(cache)
    shutil.copy2(kept, tmp_path / "backup")
    os.replace(tmp_path / "backup", kept)  # a new inode and ctime, the same bytes
    counted = Counted(monkeypatch)
    assert _same(_run(path), cold) and _same(_run(path), cold)
    assert counted.calls == 0


def test_the_weights_have_their_own_bound(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = write_gguf(tmp_path / "one.gguf", "llama", "F32", seed=1)
    two = write_gguf(tmp_path / "two.gguf", "llama", "F32", seed=2)
    _run(one)
    (kept,) = _kept(cache)
    size = kept.stat().st_size
    monkeypatch.setenv("ATTNVIZ_WEIGHTS_MB", str(1.5 * size / 2**20))  # room for one model
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", "0.5")  # far less than the weights: not their bound
    _run(two)
    assert [p.parent.name for p in _kept(cache)] == [gguf_convert.identity(two)]
    state = contents.info()
    assert state.weights == 1 and state.weights_bytes == size
    assert state.weights_limit_bytes == int(1.5 * size)
    assert state.bytes <= state.limit_bytes  # the attention's bound holds the small files

    monkeypatch.setenv("ATTNVIZ_WEIGHTS_MB", "0")  # none kept, the run the same
    shutil.rmtree(cache)
    reference = _reference(one)
    counted = Counted(monkeypatch)
    assert _same(_run(one), reference) and _same(_run(one), reference)
    assert counted.calls == 2 and not _kept(cache)


def test_a_full_disk_is_a_warning_and_leaves_no_file(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    real = gguf_convert.write_safetensors

    def full(out: Any, arrays: Any) -> None:
        real(out, dict(list(arrays.items())[:2]))  # part written, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gguf_convert, "write_safetensors", full)
    assert _same(_run(path), _reference(path))
    err = capsys.readouterr().err
    assert "No space left on device" in err and "dequantized again" in err
    assert not _kept(cache)
    assert not [p for p in cache.glob("gguf/*/.*") if p.name.endswith(".tmp")]


def test_cache_info_and_clear_count_the_weights(tmp_path: Path, cache: Path) -> None:
    runner = CliRunner()
    path = write_gguf(tmp_path / "m.gguf", "llama", "Q8_0")
    shown = runner.invoke(app, ["show", TEXT, "--model", str(path), "--layer", "0"])
    assert shown.exit_code == 0, shown.stderr
    (kept,) = _kept(cache)
    size = kept.stat().st_size
    info = runner.invoke(app, ["cache", "info"]).stdout
    assert "weights  1 GGUF model dequantized, " in info and "of 2048 MB" in info
    assert f"{size / 2**20:.1f} MB of 2048 MB" in info
    cleared = runner.invoke(app, ["cache", "clear"]).stdout
    assert f"the dequantized weights of 1 GGUF model ({size / 2**20:.1f} MB)" in cleared
    assert not _kept(cache) and not (cache / "gguf").exists()
    info = runner.invoke(app, ["cache", "info"]).stdout
    assert "weights  0 GGUF models dequantized, 0.0 MB of 2048 MB" in info


def test_a_bad_weights_bound_is_a_warning_and_the_default(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from attnviz.cache import notices, settings

    monkeypatch.setattr(notices, "_warned", set(), raising=False)
    monkeypatch.setenv("ATTNVIZ_WEIGHTS_MB", "lots")
    assert settings.weights_limit_bytes() == 2048 * 2**20
    assert "ATTNVIZ_WEIGHTS_MB='lots' is not a size in MB" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["ATTNVIZ_CACHE_MB", "ATTNVIZ_WEIGHTS_MB"])
def test_a_huge_bad_bound_is_quoted_short(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, name: str
) -> None:
    """A setting of 5,000 digits (past what a float holds) is one short warning line that
    quotes the start of the value, not all of it."""
    from attnviz.cache import notices, settings

    monkeypatch.setattr(notices, "_warned", set(), raising=False)
    monkeypatch.setenv(name, "9" * 5000)
    bound = settings.limit_bytes() if name == "ATTNVIZ_CACHE_MB" else settings.weights_limit_bytes()
    assert bound > 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 300 and f"{name}='999" in lines[0], lines

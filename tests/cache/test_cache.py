"""The attention cache: hits give back the same numbers, anything that changes them misses,
bad entries and unusable folders never crash, and the size bound holds (LRU)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import attnviz.version
from attnviz.cache import contents, entries, keys, notices, settings
from attnviz.cache.secret import SECRET

KEY_ARGS: dict[str, Any] = dict(
    text="The bank refused the loan.", pair=None, causal=False, dtype="float32"
)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    for name in ("ATTNVIZ_CACHE_MB", "ATTNVIZ_NO_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(notices, "warned", set())
    return folder


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 2}')
    (folder / "tokenizer.json").write_text('{"model": {}}')
    (folder / "model.safetensors").write_bytes(b"\x01" * 1000)
    return folder


def attentions(seed: int, t: int = 7) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    att = rng.random((2, 3, t, t), dtype=np.float32)  # (L, H, T, T)
    att /= att.sum(-1, keepdims=True)
    return att, list(range(100 + seed, 100 + seed + t))


def key(n: int) -> str:
    return f"{n:064x}"


def warnings_of(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_store_then_load_gives_identical_array(cache_in_tmp: Path) -> None:
    att, ids = attentions(1)
    assert entries.load(key(1)) is None
    entries.store(key(1), att, ids)
    got = entries.load(key(1), expect_ids=ids)
    assert got is not None
    assert got.dtype == np.float32
    assert np.array_equal(got, att)
    names = sorted(p.name for p in cache_in_tmp.iterdir())
    assert names == [f"{key(1)}.npz", SECRET]  # no temp left over
    assert entries.load(key(2)) is None


def test_other_ids_are_a_miss(capsys: pytest.CaptureFixture[str]) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    assert entries.load(key(1), expect_ids=[*ids[:-1], 999]) is None
    assert entries.load(key(1), expect_ids=ids[:-1]) is None
    assert entries.load(key(1), expect_ids=ids) is not None  # the entry is still there
    assert warnings_of(capsys) == []


def test_key_is_stable_and_ignores_hidden_files(model_folder: Path) -> None:
    first = keys.cache_key(model_folder, truncate=False, **KEY_ARGS)
    (model_folder / ".DS_Store").write_bytes(b"junk")
    (model_folder / "1_Pooling").mkdir()
    assert keys.cache_key(model_folder, truncate=False, **KEY_ARGS) == first
    assert len(first) == 64 and int(first, 16) >= 0


def test_key_changes_with_everything_that_changes_the_numbers(
    model_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def k(**changes: object) -> str:
        args: dict = {**KEY_ARGS, "truncate": False, **changes}
        return keys.cache_key(model_folder, **args)

    base = k()
    changed = {
        "text": k(text="The bank refused the loan!"),
        "pair": k(pair="It had no funds."),
        "empty pair": k(pair=""),
        "causal": k(causal=True),
        "dtype": k(dtype="float64"),
        "truncate": k(truncate=True),
    }
    weights = model_folder / "model.safetensors"
    st = weights.stat()
    weights.write_bytes(b"\x01" * 999 + b"\x02")  # the key is the content (FORMAT 3) ...
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... not the size and mtime
    changed["weights same size, mtime restored"] = k()
    weights.write_bytes(b"\x02" * 1001)
    changed["weights content"] = k()
    (model_folder / "vocab.txt").write_text("[PAD]\n")
    changed["new tokenizer file"] = k()
    monkeypatch.setattr(attnviz.version, "__version__", "99.0")
    changed["version"] = k()
    assert base not in changed.values()
    assert len(set(changed.values())) == len(changed), changed


def test_key_follows_symlinks_to_the_weights(tmp_path: Path, model_folder: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(b"\x03" * 10)
    (model_folder / "pytorch_model.bin").symlink_to(blob)
    before = keys.cache_key(model_folder, truncate=False, **KEY_ARGS)
    blob.write_bytes(b"\x04" * 20)  # a new revision behind the same link
    assert keys.cache_key(model_folder, truncate=False, **KEY_ARGS) != before


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _random(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the attention values
    path.write_bytes(bytes(data))


def _other_arrays(path: Path) -> None:
    with path.open("wb") as handle:
        np.savez(handle, weights=np.zeros(3))


def _not_a_zip(path: Path) -> None:
    with path.open("wb") as handle:
        np.save(handle, np.zeros((2, 3, 7, 7), np.float32))


def _bad_shape(path: Path) -> None:
    with path.open("wb") as handle:
        np.savez(handle, attentions=np.zeros((3, 7, 7), np.float32), ids=np.arange(7))


def _empty_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w"):
        pass


def _poisoned(values: np.ndarray) -> Callable[[Path], None]:
    """An entry of the right shape and ids whose weights are not attention."""

    def write(path: Path) -> None:
        with path.open("wb") as handle:
            np.savez(handle, attentions=values, ids=np.arange(100 + 1, 100 + 1 + 7))

    write.__name__ = "_poisoned"
    return write


_NAN = np.full((2, 3, 7, 7), 1 / 7, np.float32)
_NAN[1, 2, 3, 4] = np.nan
_NOT_ROWS = np.full((2, 3, 7, 7), 0.5, np.float32)  # rows sum to 3.5
_NEGATIVE = np.zeros((2, 3, 7, 7), np.float32)
_NEGATIVE[..., 0], _NEGATIVE[..., 1] = -1, 2  # rows sum to 1, but a weight below 0


def _huge_header(path: Path) -> None:
    """A compressed member whose header claims 4 GB of zeros (a zip bomb of the right kind)."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (2, 3, 16384, 16384)}
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ids.npy", _npy(np.arange(101, 108)))
        with archive.open("attentions.npy", "w", force_zip64=True) as out:
            out.write(member.getvalue())
            for _ in range(64):  # 64 MB of zeros, a few kilobytes compressed
                out.write(bytes(2**20))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    "corrupt",
    [
        _truncate,
        _random,
        _flip_a_byte,
        _other_arrays,
        _not_a_zip,
        _bad_shape,
        _empty_zip,
        _poisoned(_NAN),
        _poisoned(_NOT_ROWS),
        _poisoned(_NEGATIVE),
        _huge_header,
        _fifo,
    ],
)
def test_corrupt_entry_warns_is_removed_and_recomputed(
    corrupt, cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    path = cache_in_tmp / f"{key(1)}.npz"
    corrupt(path)
    assert entries.load(key(1), expect_ids=ids) is None  # quickly: no hang, no 4 GB read
    lines = warnings_of(capsys)
    assert len(lines) == 1 and lines[0].startswith("warning: "), lines
    assert not path.exists()
    entries.store(key(1), att, ids)
    got = entries.load(key(1), expect_ids=ids)
    assert got is not None and np.array_equal(got, att)
    assert warnings_of(capsys) == []


def _entry_bytes() -> int:
    att, ids = attentions(0)
    entries.store(key(0), att, ids)
    size = contents.info().bytes
    contents.clear()
    return size


def test_bound_evicts_least_recently_used(
    cache_in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = _entry_bytes()  # all test entries have the same shape, so the same size
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", repr(3.5 * size / settings.MB))  # room for 3
    for n in (1, 2, 3):
        entries.store(key(n), *attentions(n))
        path = cache_in_tmp / f"{key(n)}.npz"
        os.utime(path, ns=(n * 10**15, n * 10**15))  # used in order 1, 2, 3 in 1970
    assert entries.load(key(1)) is not None  # 1 is now the most recently used
    entries.store(key(4), *attentions(4))
    left = {p.name for p in cache_in_tmp.glob("*.npz")}
    assert left == {f"{key(n)}.npz" for n in (1, 3, 4)}  # 2 was the least recently used
    state = contents.info()
    assert state.entries == 3
    assert state.bytes <= state.limit_bytes == int(3.5 * size)
    for n in (5, 6, 7, 8):
        entries.store(key(n), *attentions(n))
        assert contents.info().bytes <= state.limit_bytes
    assert entries.load(key(8)) is not None  # the entry just written is kept


def test_entry_bigger_than_the_limit_is_not_kept_and_evicts_nothing(
    cache_in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = _entry_bytes()
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", repr(1.5 * size / settings.MB))
    entries.store(key(1), *attentions(1))
    entries.store(key(2), *attentions(2, t=40))  # about 30 times bigger
    assert entries.load(key(2)) is None
    assert entries.load(key(1)) is not None


@pytest.mark.parametrize("value", ["lots", "-1", "nan", "inf", "1e999"])
def test_bad_size_limit_warns_and_uses_the_default(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", value)
    assert contents.info().limit_bytes == 512 * 2**20
    entries.store(key(1), *attentions(1))
    assert entries.load(key(1)) is not None
    lines = warnings_of(capsys)
    assert len(lines) == 1 and lines[0].startswith("warning: ATTNVIZ_CACHE_MB"), lines


@pytest.mark.parametrize(("value", "limit"), [("0.05", int(0.05 * 2**20)), (" 2 ", 2 * 2**20)])
def test_size_limit_is_in_mebibytes(value: str, limit: int) -> None:
    assert (
        contents.info({"ATTNVIZ_CACHE_DIR": "/x", "ATTNVIZ_CACHE_MB": value}).limit_bytes == limit
    )


@pytest.mark.parametrize(
    ("flag", "env", "enabled"),
    [
        (False, {}, True),
        (True, {}, False),
        (False, {"ATTNVIZ_NO_CACHE": "1"}, False),
        (False, {"ATTNVIZ_NO_CACHE": "yes"}, False),
        (False, {"ATTNVIZ_NO_CACHE": "0"}, True),
        (False, {"ATTNVIZ_NO_CACHE": ""}, True),
        (True, {"ATTNVIZ_NO_CACHE": "0"}, False),
    ],
)
def test_cache_enabled(flag: bool, env: dict[str, str], enabled: bool) -> None:
    assert settings.cache_enabled(flag, env) is enabled


def test_no_cache_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNVIZ_NO_CACHE", "1")
    assert settings.cache_enabled(False) is False


def test_cache_dir_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert settings.cache_dir({"HOME": str(home)}) == home / ".cache" / "attnviz"
    assert settings.cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/attnviz")
    relative = {"HOME": str(home), "XDG_CACHE_HOME": "relative"}
    assert settings.cache_dir(relative) == home / ".cache" / "attnviz"
    both = {"XDG_CACHE_HOME": "/xdg", "ATTNVIZ_CACHE_DIR": str(tmp_path / "mine")}
    assert settings.cache_dir(both) == tmp_path / "mine"


def _unusable_store_and_load(capsys: pytest.CaptureFixture[str]) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    entries.store(key(2), *attentions(2))
    assert entries.load(key(1), expect_ids=ids) is None
    lines = warnings_of(capsys)
    assert len(lines) == 1 and lines[0].startswith("warning: cannot use the attention cache")
    assert "ATTNVIZ_CACHE_DIR" in lines[0]


def test_cache_dir_that_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("mine")
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(a_file))
    _unusable_store_and_load(capsys)
    assert a_file.read_text() == "mine"
    assert contents.info().entries == 0 and contents.clear() == (0, 0)
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(a_file / "below"))
    entries.store(key(1), *attentions(1))
    assert warnings_of(capsys)[0].startswith("warning: cannot use the attention cache")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_cache_dir(cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_in_tmp.mkdir()
    cache_in_tmp.chmod(0o500)
    try:
        _unusable_store_and_load(capsys)
        assert list(cache_in_tmp.iterdir()) == []
    finally:
        cache_in_tmp.chmod(0o700)


def test_info_and_clear_touch_only_cache_files(cache_in_tmp: Path) -> None:
    entries.store(key(1), *attentions(1))
    entries.store(key(2), *attentions(2))
    sizes = sum(p.stat().st_size for p in cache_in_tmp.glob("*.npz"))
    leftover = cache_in_tmp / f".{key(3)}.npz.abc123.tmp"  # a crashed write
    leftover.write_bytes(b"x" * 10)
    others = ["notes.txt", "results.npz", f"{key(4)}.npy", f"{key(5)}.npz.bak"]
    for name in others:
        (cache_in_tmp / name).write_text("user data")
    state = contents.info()
    assert (state.folder, state.entries, state.bytes) == (cache_in_tmp, 2, sizes)
    assert contents.clear() == (2, sizes + 10)
    assert sorted(p.name for p in cache_in_tmp.iterdir()) == sorted(others)
    assert contents.info().entries == 0
    assert contents.clear() == (0, 0)


def test_store_removes_only_stale_temp_files(cache_in_tmp: Path) -> None:
    cache_in_tmp.mkdir()
    stale = cache_in_tmp / f".{key(3)}.npz.old.tmp"
    fresh = cache_in_tmp / f".{key(4)}.npz.new.tmp"  # maybe another attnviz writing now
    for path in (stale, fresh):
        path.write_bytes(b"x")
    os.utime(stale, (0, 0))
    entries.store(key(1), *attentions(1))
    assert not stale.exists() and fresh.exists()


def test_clear_of_a_missing_folder(tmp_path: Path) -> None:
    assert contents.clear({"ATTNVIZ_CACHE_DIR": str(tmp_path / "none")}) == (0, 0)


@pytest.mark.slow  # subprocess
def test_importing_the_cache_does_not_import_torch_or_transformers() -> None:
    code = (
        "import sys, attnviz.cache.entries, attnviz.cache.contents, attnviz.cache.tokenizers; "
        "print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_entry_of_another_shape_is_refused_from_its_header(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)  # 2 layers, 3 heads
    entries.store(key(1), att, ids)
    assert entries.load(key(1), expect_ids=ids, expect_shape=(2, 3)) is not None
    assert entries.load(key(1), expect_ids=ids, expect_shape=(6, 12)) is None
    assert "expected (6, 12, 7, 7)" in warnings_of(capsys)[0]

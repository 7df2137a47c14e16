"""An .npy header is read from its first bytes before numpy reads it (issue 34).

numpy reads a whole header before it checks its length, so a 1 MB .npz whose member
(format 2.0) declares a 1 GiB header of spaces cost 2.1 GB, whatever ATTNVIZ_ATTENTION_MB
said. attnviz reads the magic string, the version and the header's length itself, refuses a
header past NPY_HEADER_BYTES before a byte of it is read, then checks the dict (dtype, shape)
before numpy sees it: both readers of arrays, `--load` (attnviz.reading.read_npz) and the
attention cache (attnviz.cache.arrays), refuse each hostile header in one line.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cache import entries, notices
from attnviz.cli import app
from attnviz.limits import NPY_HEADER_BYTES
from attnviz.reading import read_npy_header
from tests.cache.test_cache import attentions, key

GIB = 2**30
TOKENS = np.array(["a", "b"])
WEIGHTS = np.full((1, 1, 2, 2), 0.5, np.float32)  # (L, H, T, T): rows sum to 1


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    for name in ("ATTNVIZ_CACHE_MB", "ATTNVIZ_NO_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(notices, "warned", set())
    return folder


def npy(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    """`array` as the bytes of an .npy file of format `version` (numpy's choice: None)."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version, allow_pickle=False)
    return buffer.getvalue()


def raw_npy(header: bytes, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    """An .npy file whose header is `header` as it is, its length honest."""
    width = 2 if version == (1, 0) else 4
    return b"\x93NUMPY" + bytes(version) + len(header).to_bytes(width, "little") + header + data


def header_of(shape: object, descr: object = "<f4", order: object = False) -> bytes:
    return repr({"descr": descr, "fortran_order": order, "shape": shape}).encode() + b"\n"


def write_npz(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)


def load_line(path: Path) -> str:
    """The one line `show --load path` prints on stderr (it must fail)."""
    result = CliRunner().invoke(app, ["show", "--load", str(path)], env={"COLUMNS": "100"})
    assert result.exit_code != 0 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def cache_line(cache_in_tmp: Path, attentions_npy: bytes, capsys: pytest.CaptureFixture) -> str:
    """The one warning a cache entry whose attentions member is `attentions_npy` gives; the
    entry (signed, its other arrays genuine) is discarded."""
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    path = cache_in_tmp / f"{key(1)}.npz"
    with zipfile.ZipFile(path) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    members["attentions.npy"] = attentions_npy
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    capsys.readouterr()
    assert entries.load(key(1), expect_ids=ids) is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: "), lines
    assert not path.exists()
    return lines[0]


# --- the length is read before the header ---------------------------------------------------


class Spaces(io.RawIOBase):
    """A stream of an .npy start declaring a header of `length` bytes, then spaces without
    end; it counts the bytes read from it."""

    def __init__(self, length: int, version: tuple[int, int] = (2, 0)) -> None:
        self.start = b"\x93NUMPY" + bytes(version) + length.to_bytes(4, "little")
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        assert 0 <= size <= 2**20, f"asked for {size:,} bytes at once"
        head = self.start[self.consumed : self.consumed + size]
        self.consumed += size
        return head + b" " * (size - len(head))


@pytest.mark.parametrize("version", [(2, 0), (3, 0)])
def test_a_header_bomb_is_refused_from_its_length(version: tuple[int, int]) -> None:
    stream = Spaces(GIB, version)
    with pytest.raises(ValueError, match="declares a header of 1,073,741,824 bytes"):
        read_npy_header(stream, "attentions", 2 * GIB)  # type: ignore[arg-type]
    assert stream.consumed <= 12  # the magic string, the version, the length: no more


def test_a_header_at_the_bound_is_read() -> None:
    header = header_of((1, 1, 2, 2))
    header += b" " * (NPY_HEADER_BYTES - len(header) - 1) + b"\n"
    data = raw_npy(header, WEIGHTS.tobytes(), (2, 0))
    got = read_npy_header(io.BytesIO(data), "attentions", len(data))
    assert got == ((1, 1, 2, 2), False, np.dtype("<f4"), 16)
    header += b" "
    with pytest.raises(ValueError, match="declares a header of 4,097 bytes, past the 4 KB"):
        read_npy_header(io.BytesIO(raw_npy(header, b"", (2, 0))), "attentions", 10**6)


def _bomb(path: Path) -> None:
    """A 1 MB .npz whose attentions (format 2.0) declare a header of 1 GiB of spaces, all
    there (deflated), then honest data."""
    head = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), }"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("attentions.npy", "w", force_zip64=True) as member:
            member.write(b"\x93NUMPY\x02\x00" + GIB.to_bytes(4, "little") + head)
            left, block = GIB - len(head) - 1, b" " * 2**22
            while left > 0:
                member.write(block[: min(left, len(block))])
                left -= len(block)
            member.write(b"\n" + WEIGHTS.tobytes())
        archive.writestr("tokens.npy", npy(TOKENS))


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    _bomb(path)
    assert path.stat().st_size < 2 * 2**20
    return path


PEAK = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, stdin=subprocess.DEVNULL)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024\n"
    "sys.stdout.write(f'{r.returncode}\\n{peak}\\n' + r.stderr.decode(errors='replace'))\n"
)


def peak_of(*command: str, env: dict[str, str] | None = None) -> tuple[str, int, str]:
    """(exit status, peak memory in MB, stderr) of `command`, measured from outside."""
    wrapper = subprocess.run(
        [sys.executable, "-c", PEAK, *command],
        capture_output=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        check=True,
    )
    returncode, peak, err = wrapper.stdout.decode().split("\n", 2)
    return returncode, int(peak), err


@pytest.mark.slow  # a 1 GiB member deflated (seconds), subprocesses measured from outside
def test_a_header_bomb_loads_in_one_line_in_bounded_memory(bomb: Path) -> None:
    code, peak, err = peak_of(
        sys.executable, "-m", "attnviz", "show", "--load", str(bomb), "--json",
        env={"ATTNVIZ_ATTENTION_MB": "1024"},
    )  # fmt: skip
    assert peak < 300, f"{peak} MB"  # numpy reading the header whole took 2.1 GB
    assert code == "1" and err.count("\n") == 1, err
    assert "declares a header of 1,073,741,824 bytes" in err and "attnviz reads" in err


@pytest.mark.slow  # the same bomb as a cache entry, in a subprocess measured from outside
def test_a_header_bomb_in_the_cache_is_discarded_in_bounded_memory(
    bomb: Path, cache_in_tmp: Path
) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    path = cache_in_tmp / f"{key(1)}.npz"
    with zipfile.ZipFile(path) as archive:
        genuine = {n: archive.read(f"{n}.npy") for n in ("ids", "mac")}
    path.write_bytes(bomb.read_bytes())  # the bomb's attentions (and tokens) in the entry
    with zipfile.ZipFile(path, "a") as archive:  # appended: nothing decompressed
        for name, data in genuine.items():
            archive.writestr(f"{name}.npy", data)
    code = (
        "from attnviz.cache import entries\n"
        f"got = entries.load({key(1)!r}, expect_ids={ids!r})\n"
        "print('hit' if got is not None else 'miss')\n"
    )
    returncode, peak, err = peak_of(
        sys.executable, "-c", code, env={"ATTNVIZ_CACHE_DIR": str(cache_in_tmp)}
    )
    assert returncode == "0", err
    assert peak < 300, f"{peak} MB"  # numpy reading the header whole took 2.1 GB
    assert err.count("\n") == 1 and "declares a header of 1,073,741,824 bytes" in err, err
    assert not path.exists()


# --- headers that are not numpy's -----------------------------------------------------------


HOSTILE: dict[str, tuple[bytes, str]] = {
    "truncated": (raw_npy(header_of((1, 1, 2, 2)))[:40], "ends inside its header"),
    "no-length": (b"\x93NUMPY\x02\x00\x10", "ends inside its header"),
    "not-npy": (b"PK this is no array at all", "does not start as an .npy file does"),
    "version": (raw_npy(header_of((1, 1, 2, 2)), version=(4, 0)), "has .npy format (4, 0)"),
    "not-a-dict": (raw_npy(b"[1, 2, 3]\n"), "not a dict of descr, fortran_order and shape"),
    "not-a-literal": (raw_npy(b"{'descr': __import__('os')}\n"), "not a Python literal"),
    "other-keys": (
        raw_npy(b"{'descr': '<f4', 'shape': (2,), 'extra': 1}\n"),
        "not a dict of descr",
    ),
    "negative": (raw_npy(header_of((1, 1, -2, 2))), "has a negative axis: -2"),
    "huge": (
        raw_npy(header_of((1, 1, 10**30, 2))),
        "claims 8,000,000,000,000,000,000,000,000,000",
    ),
    "huge-and-empty": (raw_npy(header_of((0, 10**30))), "has an axis of 1,000,000,000,000,000"),
    "not-ints": (raw_npy(header_of((1, 1, 2.0, 2))), "not a tuple of whole numbers"),
    "bools": (raw_npy(header_of((True, 1, 2, 2))), "not a tuple of whole numbers"),
    "a-list": (raw_npy(header_of([1, 1, 2, 2])), "not a tuple of whole numbers"),
    "axes": (raw_npy(header_of((1,) * 40)), "has 40 axes (at most 32)"),
    "structured": (raw_npy(header_of((2,), [("a", "<f4")])), "structured"),
    "subarray": (raw_npy(header_of((1,), "(2,)<f4")), "not numbers or strings"),
    "dtype": (raw_npy(header_of((2,), "<q9")), "a dtype numpy does not know"),
    "datetime": (raw_npy(header_of((2,), "<M8[s]")), "not numbers or strings"),
    "order": (raw_npy(header_of((1, 1, 2, 2), order="yes")), "fortran_order"),
    "latin-1-in-3.0": (raw_npy(b"{'descr': '\xff'}\n", version=(3, 0)), "not a Python literal"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_header_loads_as_one_line(tmp_path: Path, case: str) -> None:
    member, reason = HOSTILE[case]
    path = tmp_path / f"{case}.npz"
    write_npz(path, {"attentions": member, "tokens": npy(TOKENS)})
    line = load_line(path)
    assert reason in line and "array 'attentions'" in line, line


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_header_in_the_cache_is_one_warning(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    member, reason = HOSTILE[case]
    line = cache_line(cache_in_tmp, member, capsys)
    assert reason in line, line


def test_a_lying_shape_is_refused_before_any_data(tmp_path: Path) -> None:
    path = tmp_path / "lying.npz"
    write_npz(path, {"attentions": raw_npy(header_of((4, 12, 512, 512))), "tokens": npy(TOKENS)})
    assert "claims 50,331,648 bytes in a member of" in load_line(path)


# --- good files still load ------------------------------------------------------------------


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_every_npy_format_loads(tmp_path: Path, version: tuple[int, int]) -> None:
    path = tmp_path / "good.npz"
    write_npz(path, {"attentions": npy(WEIGHTS, version), "tokens": npy(TOKENS, version)})
    analysis = attnviz.load_attentions(path)
    np.testing.assert_array_equal(analysis.attentions, WEIGHTS)
    assert analysis.tokens == ["a", "b"]
    header = read_npy_header(io.BytesIO(npy(TOKENS, version)), "tokens", 10**6)
    assert header == ((2,), False, TOKENS.dtype, 8)


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((0,), np.float32),
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)),
        np.array(True),
        np.array(["ação", "🙂"]),
        np.array([b"x", b"yz"]),
        np.array([1 + 2j], np.complex64),
        np.arange(4, dtype=">u4"),
    ],
    ids=lambda a: f"{a.dtype.str}{a.shape}",
)
def test_headers_numpy_writes_are_read_as_numpy_reads_them(array: np.ndarray) -> None:
    data = npy(array)
    got = read_npy_header(io.BytesIO(data), "x", len(data))
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(_at(data))
    assert got == (shape, fortran, dtype, array.nbytes)


def _at(data: bytes) -> io.BytesIO:
    """`data` after its magic string and version, where numpy's header readers start."""
    stream = io.BytesIO(data)
    np.lib.format.read_magic(stream)
    return stream


def test_an_export_and_a_cache_entry_still_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    weights = rng.random((2, 3, 4, 4)) ** 2  # (L, H, T, T)
    weights /= weights.sum(-1, keepdims=True)
    path = tmp_path / "export.npz"
    attnviz.from_attentions(weights, ["a", "b", "c", "d"]).save(path)
    again = attnviz.load_attentions(path)
    np.testing.assert_allclose(again.attentions, weights, atol=1e-7)
    att, ids = attentions(2)
    entries.store(key(2), att, ids)
    got = entries.load(key(2), expect_ids=ids)
    assert got is not None and np.array_equal(got, att)

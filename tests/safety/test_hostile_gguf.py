"""A GGUF file from a stranger: lying counts, lengths, shapes and offsets, unknown or
unsupported types, truncated data, NaN weights, a wrong magic or version. Each ends in one
line naming the problem, within seconds and before anything is allocated; nothing runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from attnviz.errors import AttnvizError
from attnviz.model.gguf import convert as gguf_convert
from attnviz.model.gguf.read import float32_bytes, read_header
from attnviz.model.locate import locate
from attnviz.model.weights import read_state_dict
from tests.gguf_files import write_gguf


@contextlib.contextmanager
def within(seconds: int = 20) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise AssertionError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", "llama", "F32").read_bytes()


@pytest.fixture(scope="module")
def k_base(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("gguf")
    return write_gguf(folder / "k.gguf", "llama", "Q4_K", hidden=256, ffn=256).read_bytes()


def _u64(data: bytearray, at: int, value: int) -> None:
    data[at : at + 8] = struct.pack("<Q", value)


def _after(data: bytes, text: bytes) -> int:
    """Where the bytes after the first length-prefixed string `text` start."""
    at = data.index(struct.pack("<Q", len(text)) + text)
    return at + 8 + len(text)


def _tensor(data: bytes, name: bytes) -> tuple[int, int]:
    """(where a tensor record's n_dims is, its n_dims)."""
    at = _after(data, name)
    return at, struct.unpack_from("<I", data, at)[0]


def _set_dim(data: bytearray, value: int) -> None:
    at, _ = _tensor(data, b"token_embd.weight")
    _u64(data, at + 4, value)


def _set_type(data: bytearray, value: int, name: bytes = b"token_embd.weight") -> None:
    at, n = _tensor(data, name)
    data[at + 4 + 8 * n : at + 8 + 8 * n] = struct.pack("<I", value)


def _set_offset(data: bytearray, value: int) -> None:
    at, n = _tensor(data, b"blk.0.attn_q.weight")
    _u64(data, at + 8 + 8 * n, value)


def _array_count(data: bytearray, value: int) -> None:
    _u64(data, _after(data, b"tokenizer.ggml.tokens") + 8, value)


MUTATIONS: dict[str, tuple[Callable[[bytearray], object], str]] = {
    "wrong magic": (lambda d: d.__setitem__(slice(0, 4), b"GGML"), "is not a GGUF file"),
    "version 1": (lambda d: d.__setitem__(slice(4, 8), struct.pack("<I", 1)), "version 1"),
    "version 99": (lambda d: d.__setitem__(slice(4, 8), struct.pack("<I", 99)), "version 99"),
    "2**63 tensors": (lambda d: _u64(d, 8, 2**63), "tensors"),
    "2**40 metadata pairs": (lambda d: _u64(d, 16, 2**40), "metadata pairs"),
    "a key of 2**62 bytes": (lambda d: _u64(d, 24, 2**62), "a string of"),
    "a token array of 2**40 items": (lambda d: _array_count(d, 2**40), "an array of"),
    "a token array of 7.9 million items": (lambda d: _array_count(d, 7_900_000), "an array of"),
    "a dimension of 2**62": (lambda d: _set_dim(d, 2**62), "has shape"),
    "a dimension of 0": (lambda d: _set_dim(d, 0), "has shape"),
    "9 dimensions": (
        lambda d: d.__setitem__(
            slice(_tensor(d, b"token_embd.weight")[0], _tensor(d, b"token_embd.weight")[0] + 4),
            struct.pack("<I", 9),
        ),
        "9 dimensions",
    ),
    "an unknown tensor type": (lambda d: _set_type(d, 999), "unknown type 999"),
    "a misaligned offset": (lambda d: _set_offset(d, 3), "not aligned"),
    "an offset past the end": (lambda d: _set_offset(d, 2**40), "truncated"),
    "an architecture attnviz does not compute": (
        lambda d: d.__setitem__(
            slice(_after(d, b"general.architecture") + 12, _after(d, b"general.architecture") + 17),
            b"bloom",
        ),
        "'bloom' model",
    ),
}


def _refusal(path: Path) -> str:
    gguf_convert.forget()
    with within(), pytest.raises(AttnvizError) as caught:
        read_state_dict(locate(str(path), use_cache=False).folder)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600
    return message


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_a_lying_gguf_is_refused_in_one_line(base: bytes, tmp_path: Path, case: str) -> None:
    mutate, expected = MUTATIONS[case]
    data = bytearray(base)
    mutate(data)
    path = tmp_path / "m.gguf"
    path.write_bytes(bytes(data))
    message = _refusal(path)
    assert expected in message, message
    assert str(path) in message


@pytest.mark.parametrize("keep", [0, 10, 23, 100, -1000, -1])
def test_a_truncated_gguf_is_refused(base: bytes, tmp_path: Path, keep: int) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(base[:keep])
    assert "GGUF" in _refusal(path) or "holds" in _refusal(path)


def test_a_type_attnviz_does_not_dequantize_is_named(k_base: bytes, tmp_path: Path) -> None:
    data = bytearray(k_base)
    _set_type(data, 23, b"blk.1.ffn_down.weight")  # IQ4_XS: 136 bytes a block, not Q4_K's 144
    path = tmp_path / "m.gguf"
    path.write_bytes(bytes(data))
    message = _refusal(path)
    assert "blk.1.ffn_down.weight" in message and "IQ4_XS" in message


def test_nan_weights_are_refused_naming_the_tensor(base: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(base)
    info = read_header(path).tensor("blk.1.ffn_down.weight")
    assert info is not None
    data = bytearray(base)
    data[info.offset : info.offset + 16] = np.full(4, np.nan, np.float32).tobytes()
    path.write_bytes(bytes(data))
    message = _refusal(path)
    assert "blk.1.ffn_down.weight" in message and "NaN" in message


@pytest.mark.slow
def test_the_command_line_says_one_line(base: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + base[4:100])
    result = subprocess.run(
        [sys.executable, "-m", "attnviz", "info", "--model", str(path)],
        env={**os.environ, "ATTNVIZ_NO_CACHE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_weights_past_the_machines_memory_are_refused_before_dequantizing(
    base: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file within every bound whose weights, in float32, would not fit in memory."""
    path = tmp_path / "m.gguf"
    path.write_bytes(base)
    pages = float32_bytes(read_header(path)) // os.sysconf("SC_PAGE_SIZE")  # all it needs
    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda n: pages if n == "SC_PHYS_PAGES" else real(n))
    message = _refusal(path)
    assert "dequantized to float32" in message and "use a smaller model" in message

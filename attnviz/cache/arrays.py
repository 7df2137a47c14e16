"""An entry's arrays: the tokenized input as arrays and back, the HMAC over them, and an
entry read with every array's header checked before its data (an entry may be hostile)."""

from __future__ import annotations

import hmac
import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from attnviz.cache.files import open_regular, touch
from attnviz.cache.keys import FORMAT
from attnviz.cache.names import entry_name
from attnviz.cache.settings import limit_bytes
from attnviz.reading import read_npy_header

ROW_SUM_TOLERANCE = 1e-2  # a cached row may sum to 1 this far off (float16 attention)


class PieceLists(Protocol):
    """What an entry keeps of a tokenized input (`attnviz.text.pieces.Pieces` has it)."""

    @property
    def tokens(self) -> list[str]: ...
    @property
    def type_ids(self) -> list[int]: ...
    @property
    def offsets(self) -> list[tuple[int, int]]: ...
    @property
    def word_ids(self) -> list[int | None]: ...
    @property
    def sequence_ids(self) -> list[int | None]: ...
    @property
    def dropped(self) -> int: ...


# The tokenized input beside the attentions: name -> (shape after T, what it holds).
PIECES: dict[str, tuple[tuple[int, ...] | None, str]] = {
    "tokens": ((), "U"),  # the vocabulary pieces
    "type_ids": ((), "i"),
    "offsets": ((2,), "i"),  # character spans (start, end) in the text or the pair
    "word_ids": ((), "i"),  # -1 for None (a special token)
    "sequence_ids": ((), "i"),  # 0 text, 1 pair, -1 None
    "dropped": (None, "i"),  # () : pieces cut off by --truncate
}  # fmt: skip


class Forged(ValueError):
    """An entry whose HMAC does not check out."""


def entry_mac(secret: bytes, key: str, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """HMAC-SHA256 of the key and every array (name, dtype, shape, bytes), as (32,) uint8."""
    mac = hmac.new(secret, b"attnviz entry\0%d\0%s\0" % (FORMAT, key.encode("ascii")), "sha256")
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        mac.update(f"{name}\0{array.dtype.str}\0{array.shape}\0{array.nbytes}\0".encode())
        mac.update(array.reshape(-1).view(np.uint8).data)
    return np.frombuffer(mac.digest(), dtype=np.uint8)


def _member(archive: zipfile.ZipFile, name: str, shape: tuple[int, ...] | None) -> np.ndarray:
    """The array `name`.npy of an entry, its header checked before its data is read.

    `shape` is the one expected (None: any that fits the cache's size limit); a header
    that claims another, more bytes than the member holds, or is not numpy's (too long,
    cut short: `attnviz.reading.read_npy_header`) is refused before a single byte of data
    is decompressed, and a header past NPY_HEADER_BYTES before a byte of it is read.
    """
    info = archive.getinfo(f"{name}.npy")
    with archive.open(info) as member:
        claimed, _, dtype, size = read_npy_header(member, name, info.file_size)
    if dtype.hasobject or (shape is not None and claimed != shape):
        raise ValueError(f"{name} is {dtype} {claimed}, expected {shape}")
    if size > limit_bytes():
        raise ValueError(f"{name} is {size:,} bytes, more than ATTNVIZ_CACHE_MB lets it keep")
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def read_entry(
    fd: int, key: str, secret: bytes, expect: tuple[int, int, int] | None = None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The (attentions, ids, arrays of PIECES) in the entry for `key` in the folder `fd`.

    ValueError if it is not well formed, `Forged` if its HMAC is not the one `secret`
    gives for `key` and its arrays (checked before anything is shown). `expect` is
    (layers, heads, pieces): an entry of another shape is refused from its header. The
    weights are checked as attention: finite, in 0..1, rows summing to 1. The arrays of
    PIECES (if there are) come in the dict, their headers checked for size.
    """
    name = entry_name(key)
    with os.fdopen(open_regular(name, fd), "rb") as handle, zipfile.ZipFile(handle) as archive:
        names = {n.removesuffix(".npy") for n in archive.namelist()}
        if not {"attentions", "ids", "mac"} <= names:
            raise ValueError("the arrays 'attentions', 'ids' and 'mac' are not all there")
        unknown = names - {"attentions", "ids", "mac", *PIECES}
        if unknown:
            raise ValueError(f"it holds arrays attnviz never writes: {', '.join(sorted(unknown))}")
        mac = _member(archive, "mac", (32,))
        L, H, T = expect if expect is not None else (None, None, None)
        ids = _member(archive, "ids", (T,) if T is not None else None)  # (T,)
        if ids.ndim != 1:
            raise ValueError(f"ids are {ids.dtype} {ids.shape}")
        T = ids.shape[0]
        want = (L, H, T, T) if L is not None and H is not None else None
        attentions = _member(archive, "attentions", want)  # (L, H, T, T)
        arrays = {n: _member(archive, n, None) for n in PIECES if n in names}
        signed = {"attentions": attentions, "ids": ids, **arrays}
        if mac.dtype != np.uint8 or not hmac.compare_digest(
            mac.tobytes(), entry_mac(secret, key, signed).tobytes()
        ):
            raise Forged("its integrity check failed: written by someone else, or changed since")
        touch(handle.fileno())
    if attentions.dtype != np.float32 or attentions.ndim != 4:
        raise ValueError(f"attentions are {attentions.dtype} {attentions.shape}")
    if attentions.shape[2] != attentions.shape[3]:
        raise ValueError(f"attentions are not square: {attentions.shape}")
    if ids.dtype.kind not in "iu" or ids.shape[0] != attentions.shape[2]:
        raise ValueError(f"ids {ids.dtype} {ids.shape} do not fit attentions {attentions.shape}")
    if attentions.size and not _is_attention(attentions):
        raise ValueError("its weights are not attention (non-finite, or rows not summing to 1)")
    return attentions, ids, arrays


def _is_attention(attentions: np.ndarray) -> bool:
    """Finite weights in 0..1 whose rows sum to 1 (to float16's precision)."""
    rows = attentions.sum(axis=-1, dtype=np.float64)  # (L, H, T)
    if not np.isfinite(rows).all() or np.abs(rows - 1).max() > ROW_SUM_TOLERANCE:
        return False
    return bool(attentions.min() >= 0)


def piece_arrays(pieces: PieceLists) -> dict[str, np.ndarray]:
    """The tokenized input as the arrays of PIECES, to be kept beside the attentions."""

    def none_as(values: Sequence[int | None]) -> np.ndarray:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)

    return {
        "tokens": np.array(pieces.tokens, dtype=str),
        "type_ids": np.array(pieces.type_ids, dtype=np.int64),
        "offsets": np.array(pieces.offsets, dtype=np.int64).reshape(-1, 2),
        "word_ids": none_as(pieces.word_ids),
        "sequence_ids": none_as(pieces.sequence_ids),
        "dropped": np.array(pieces.dropped, dtype=np.int64),
    }


def pieces_from(
    arrays: dict[str, np.ndarray], ids: np.ndarray, text: str, pair: str | None
) -> dict[str, Any]:
    """The tokenized input an entry holds, as the keyword arguments of `Pieces`, every array
    checked first (an entry may be hostile)."""
    T = ids.shape[0]
    for name, (tail, kind) in PIECES.items():
        array = arrays[name]
        shape = () if tail is None else (T, *tail)
        if array.shape != shape or array.dtype.kind not in (kind + "u" if kind == "i" else kind):
            raise ValueError(f"{name} are {array.dtype} {array.shape}, expected {kind} {shape}")
    sequence_ids, word_ids, offsets = (arrays[n] for n in ("sequence_ids", "word_ids", "offsets"))
    if not np.isin(sequence_ids, (-1, 0) if pair is None else (-1, 0, 1)).all():
        raise ValueError("sequence ids outside -1, 0, 1")
    if ((word_ids < 0) != (sequence_ids < 0)).any() or word_ids.max(initial=0) > T:
        raise ValueError("word ids do not fit the pieces")
    sizes = np.where(sequence_ids == 1, len(pair or ""), len(text))  # (T,)
    starts, ends = offsets[:, 0], offsets[:, 1]
    if not ((starts >= 0) & (starts <= ends) & (ends <= sizes)).all():
        raise ValueError("offsets outside the text")
    if not 0 <= int(arrays["dropped"]) <= 2**31 or (arrays["type_ids"] < 0).any():
        raise ValueError("bad token types or dropped count")
    return dict(
        text=text,
        pair=pair,
        tokens=[str(t) for t in arrays["tokens"]],
        ids=ids.tolist(),
        type_ids=arrays["type_ids"].tolist(),
        offsets=[(int(a), int(b)) for a, b in offsets],
        word_ids=[None if w < 0 else w for w in word_ids.tolist()],
        sequence_ids=[None if q < 0 else q for q in sequence_ids.tolist()],
        dropped=int(arrays["dropped"]),
    )

"""Read a GGUF file (llama.cpp, Ollama, LM Studio) with bounds: its header here, its tensors
dequantized to float32 with the `gguf` package's numpy dequantizers.

A GGUF file is: the magic `GGUF`, a version (2 or 3), the number of tensors and of
metadata pairs, the pairs (a key, a type, a value; a value may be an array), one record per
tensor (name, dims fastest first, type, offset), padding to the alignment, then the data.

The header is parsed here, not with `gguf.GGUFReader`: that reader builds a numpy view per
array element (20 s for Gemma 3's 262,144 tokens) and trusts the counts it reads. Every
count, length, shape and offset is checked against what the file can hold and the bounds
below *before* anything is allocated, so a lying file ends in one line (`BadGguf`), in
bounded time and memory. The file is memory-mapped; a tensor's bytes are read only when it
is dequantized. Nothing in the file is ever executed.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import AttnvizError
from attnviz.limits import GGUF_ARRAY_ITEMS, GGUF_INNER_ARRAYS, GGUF_TOKENS, amount, shown
from attnviz.model.gguf.metadata import BadGguf, Metadata, named
from attnviz.reading import open_regular

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 (2023) counted in 32 bits; llama.cpp itself no longer reads it
MAX_TENSORS = 1 << 16  # a 1,024-layer model with 60 tensors a layer
MAX_PAIRS = 1 << 16
MAX_KEY_BYTES = 1 << 16  # the format's own bound
MAX_STRING_BYTES = 16 * 2**20  # one value (a chat template is some KB, a token some bytes)
MAX_HEADER_BYTES = 512 * 2**20  # metadata and tensor records together
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ELEMENTS = 1 << 36  # one tensor: 256 GB in float32, past any model attnviz computes
MAX_NESTING = 2  # an array of arrays, at most

# Metadata value types: (struct format, size) for the fixed-size ones.
_SCALARS = {
    0: ("<B", 1),  # UINT8
    1: ("<b", 1),  # INT8
    2: ("<H", 2),  # UINT16
    3: ("<h", 2),  # INT16
    4: ("<I", 4),  # UINT32
    5: ("<i", 4),  # INT32
    6: ("<f", 4),  # FLOAT32
    7: ("<?", 1),  # BOOL
    10: ("<Q", 8),  # UINT64
    11: ("<q", 8),  # INT64
    12: ("<d", 8),  # FLOAT64
}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1"}
_NUMPY.update({10: "<u8", 11: "<i8", 12: "<f8"})
STRING, ARRAY = 8, 9

# The tensor types attnviz dequantizes, by GGML type id: (name, elements a block, bytes a block).
TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    30: ("BF16", 1, 2),
    8: ("Q8_0", 32, 34),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
}
# Types a GGUF may hold that attnviz does not dequantize (named in the refusal); others
# are unknown ids. Sizes are needed to check the layout all the same.
OTHER_TYPES = {
    9: ("Q8_1", 32, 40),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}
# llama.cpp's `general.file_type` (LLAMA_FTYPE_*): the mix a whole file was quantized to.
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}  # fmt: skip


__all__ = ["BadGguf", "GgufHeader", "TensorInfo", "dequantized", "read_header"]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # as GGUF lists them, the fastest-varying first
    type_id: int
    offset: int  # from the file's start
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The numpy / torch shape (GGUF's dims reversed)."""
        return tuple(reversed(self.dims))

    @property
    def type_name(self) -> str:
        return {**TYPES, **OTHER_TYPES}[self.type_id][0]


@dataclass(frozen=True)
class GgufHeader:
    path: Path
    size: int
    version: int
    metadata: dict[str, Any]  # a number, bool, str, list of str, numpy array, tuple of arrays
    tensors: tuple[TensorInfo, ...]
    data_start: int  # where the tensor data begins (the header's length, padded)

    @property
    def meta(self) -> Metadata:
        """The metadata, each key read by type (`metadata.Metadata`)."""
        return Metadata(self.metadata, str(self.path))

    def tensor(self, name: str) -> TensorInfo | None:
        return next((t for t in self.tensors if t.name == name), None)

    def type_counts(self) -> dict[str, int]:
        """How many tensors of each type, most first."""
        counts: dict[str, int] = {}
        for info in self.tensors:
            counts[info.type_name] = counts.get(info.type_name, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def file_type(self) -> str | None:
        """The mix the file was quantized to (`Q4_K_M (file type 15)`), or None if unsaid."""
        code = self.meta.integer("general.file_type", (0, 1 << 16))
        if code is None:
            return None
        return f"{FILE_TYPES.get(code, 'unknown')} (file type {code})"


class _Cursor:
    """Reads the header from the mapped file, refusing any read past its end and any array
    past the bounds (`limits.GGUF_*`): its items, strings and inner arrays are counted over
    the whole file, so that many small arrays cost no more than one large one."""

    def __init__(self, data: mmap.mmap, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where
        self.key = ""  # the metadata key being read, for messages
        self.items = 0  # array items read so far, the file's whole
        self.inner = 0  # arrays read inside arrays so far

    def bad(self, why: str) -> BadGguf:
        return BadGguf(
            f"cannot read {self.where} as a GGUF file: {why}; the file is corrupt, truncated or "
            "not a model (re-download or re-convert it)"
        )

    def take(self, n: int) -> int:
        if n < 0 or self.pos + n > len(self.data):
            raise self.bad(f"it ends at byte {len(self.data):,}, inside its header")
        if self.pos + n > MAX_HEADER_BYTES:
            raise self.bad(f"its header passes {MAX_HEADER_BYTES // 2**20} MB")
        start = self.pos
        self.pos += n
        return start

    def scalar(self, kind: int) -> Any:
        fmt, size = _SCALARS[kind]
        return struct.unpack_from(fmt, self.data, self.take(size))[0]

    def u32(self) -> int:
        return int(self.scalar(4))

    def u64(self) -> int:
        return int(self.scalar(10))

    def string(self, limit: int = MAX_STRING_BYTES) -> str:
        n = self.u64()
        if n > limit:
            raise self.bad(f"a string of {n:,} bytes (at most {limit:,} are read)")
        start = self.take(n)
        try:
            return self.data[start : start + n].decode("utf-8")
        except UnicodeDecodeError:
            return self.data[start : start + n].decode("utf-8", "replace")

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(kind)
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            return self.array(depth)
        raise self.bad(f"a metadata value of unknown type {kind}")

    def array(self, depth: int) -> Any:
        kind, count = self.u32(), self.u64()
        if depth >= MAX_NESTING:
            raise self.bad(f"arrays nested more than {MAX_NESTING} deep")
        least = _SCALARS[kind][1] if kind in _SCALARS else 8 if kind == STRING else 12
        if kind not in _SCALARS and kind not in (STRING, ARRAY):
            raise self.bad(f"an array of unknown type {kind}")
        if count * least > len(self.data) - self.pos:
            raise self.bad(f"an array of {count:,} items, more than the file can hold")
        self._count(count, kind)
        if kind in _NUMPY:
            import numpy as np

            start = self.take(count * least)
            values = np.frombuffer(self.data, _NUMPY[kind], count, start).copy()
            return values.astype(bool) if kind == 7 else values
        if kind == STRING:
            return self.strings(count)
        self.inner += count
        if self.inner > GGUF_INNER_ARRAYS:
            raise self.bad(
                f"{self.inner:,} arrays inside arrays (at most {GGUF_INNER_ARRAYS:,} are read; "
                "llama.cpp writes none)"
            )
        return tuple(self.value(kind, depth + 1) for _ in range(count))  # never a list of str

    def _count(self, count: int, kind: int) -> None:
        """Refuse an array past the bounds, before any of its items is read."""
        if kind in (STRING, ARRAY) and count > GGUF_TOKENS:
            raise self.bad(
                f"{named(self.key)} is an array of {count:,} items; an array of strings or "
                f"arrays is read up to {GGUF_TOKENS:,} (twice the largest vocabulary published, "
                "Gemma 3's 262,144)"
            )
        self.items += count
        if self.items > GGUF_ARRAY_ITEMS:
            raise self.bad(
                f"with {named(self.key)}, an array of {count:,} items, its arrays hold "
                f"{self.items:,} items, more than the {GGUF_ARRAY_ITEMS:,} read of one file"
            )

    def strings(self, count: int) -> list[str]:
        """`count` strings, read in one tight loop (a vocabulary holds hundreds of thousands)."""
        data, pos, end = self.data, self.pos, min(len(self.data), MAX_HEADER_BYTES)
        unpack = struct.Struct("<Q").unpack_from
        out: list[str] = []
        for _ in range(count):
            if pos + 8 > end:
                raise self.bad(f"it ends at byte {end:,}, inside its header")
            (n,) = unpack(data, pos)
            pos += 8
            if n > MAX_STRING_BYTES or pos + n > end:
                raise self.bad(f"a string of {n:,} bytes where the file has {end - pos:,} left")
            out.append(data[pos : pos + n].decode("utf-8", "replace"))
            pos += n
        self.pos = pos
        return out


def _mapped(handle: Any, where: Path) -> mmap.mmap:
    """The open file `handle` mapped read-only; out of address space says so, in one line."""
    try:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        if exc.errno == errno.ENOMEM:
            raise out_of_memory(where, os.fstat(handle.fileno()).st_size) from exc
        raise


def out_of_memory(where: Path, size: int) -> AttnvizError:
    """The line for a file whose mapping this process has no memory (address space) for."""
    return AttnvizError(
        f"out of memory mapping {where} ({amount(size)}): this process may not map that "
        "much (an address-space limit such as ulimit -v, or the machine's memory is short); "
        "raise the limit, close other programs, or use a smaller model"
    )


def read_header(path: Path) -> GgufHeader:
    """The metadata and tensor records of the GGUF file at `path`, every one checked.

    Refuses (BadGguf, one line) a wrong magic or version, counts, lengths or shapes the
    file cannot hold or past the bounds above, a tensor of an unknown type, misaligned or
    overlapping tensors, and data that ends past the file (a truncated download).
    """
    where = str(path)
    with os.fdopen(open_regular(path, "GGUF file"), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 24:
            raise BadGguf(f"cannot read {where} as a GGUF file: it holds {size} bytes")
        with _mapped(handle, path) as data:
            return _parse(_Cursor(data, where), path, size)


def _parse(cur: _Cursor, path: Path, size: int) -> GgufHeader:
    magic = bytes(cur.data[0:4])
    if magic != MAGIC:
        raise BadGguf(
            f"{cur.where} is not a GGUF file (it starts with {shown(magic, 20)}, not b'GGUF'): "
            "pass a .gguf model file or a model folder"
        )
    cur.take(4)
    version = cur.u32()
    if version not in VERSIONS:
        raise BadGguf(
            f"{cur.where} is a GGUF file of version {version}; attnviz reads versions 2 and 3: "
            "convert it again with a recent llama.cpp"
        )
    n_tensors, n_pairs = cur.u64(), cur.u64()
    if n_tensors > MAX_TENSORS or n_pairs > MAX_PAIRS:
        raise cur.bad(f"it claims {n_tensors:,} tensors and {n_pairs:,} metadata pairs")
    metadata: dict[str, Any] = {}
    for _ in range(n_pairs):
        cur.key = key = cur.string(MAX_KEY_BYTES)
        if key in metadata:  # gguf-py refuses such a file too: which value would be meant?
            raise cur.bad(f"its metadata key {named(key)} appears twice")
        metadata[key] = cur.value(cur.u32())
    records = [_tensor_record(cur) for _ in range(n_tensors)]
    alignment = Metadata(metadata, cur.where).integer("general.alignment", (1, 1 << 20)) or 32
    if alignment & alignment - 1:
        raise cur.bad(f"general.alignment is {shown(alignment)}, not a power of two")
    start = -(-cur.pos // alignment) * alignment
    tensors = []
    end = 0
    for name, dims, type_id, offset in sorted(records, key=lambda r: r[3]):
        info = _located(cur, name, dims, type_id, offset, start, alignment)
        if info.offset < end:
            raise cur.bad(f"tensor {shown(name)} overlaps the one before it")
        if info.offset + info.nbytes > size:
            raise cur.bad(
                f"tensor {shown(name)} ends at byte {info.offset + info.nbytes:,} but the file "
                f"has {size:,} (a truncated download?)"
            )
        end = info.offset + info.nbytes
        tensors.append(info)
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise cur.bad("two tensors share a name")
    order = {name: i for i, (name, *_) in enumerate(records)}
    tensors.sort(key=lambda t: order[t.name])
    return GgufHeader(path, size, version, metadata, tuple(tensors), start)


def _tensor_record(cur: _Cursor) -> tuple[str, tuple[int, ...], int, int]:
    name = cur.string(MAX_KEY_BYTES)
    n_dims = cur.u32()
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.bad(f"tensor {shown(name)} has {n_dims} dimensions (1 to {MAX_DIMS})")
    dims = tuple(cur.u64() for _ in range(n_dims))
    return name, dims, cur.u32(), cur.u64()


def _located(
    cur: _Cursor,
    name: str,
    dims: tuple[int, ...],
    type_id: int,
    offset: int,
    start: int,
    align: int,
) -> TensorInfo:
    known = {**TYPES, **OTHER_TYPES}
    if type_id not in known:
        raise cur.bad(f"tensor {shown(name)} has unknown type {type_id}")
    type_name, block, block_bytes = known[type_id]
    count = 1
    for d in dims:
        count *= d  # Python ints: a lying shape cannot wrap around
    if min(dims) < 1 or count > MAX_ELEMENTS:
        raise cur.bad(f"tensor {shown(name)} has shape {shown(list(dims))}")
    if dims[0] % block:
        raise cur.bad(
            f"tensor {shown(name)} ({type_name}) has rows of {dims[0]}, not a whole number of "
            f"{block}-value blocks"
        )
    if offset % align:
        raise cur.bad(f"tensor {shown(name)} is not aligned to {align} bytes")
    return TensorInfo(name, dims, type_id, start + offset, count // block * block_bytes)


def float32_bytes(header: GgufHeader) -> int:
    """What every tensor of the file takes once dequantized to float32."""
    total = 0
    for info in header.tensors:
        count = 1
        for d in info.dims:
            count *= d
        total += 4 * count
    return total


def check_memory(header: GgufHeader) -> None:
    """Refuse, before dequantizing, weights that would not fit in this machine's memory."""
    need = float32_bytes(header)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if need > have * 3 // 4:
        raise BadGguf(
            f"the weights of {header.path} take {need / 2**30:.1f} GB dequantized to float32 "
            f"(attnviz computes in float32), more than this machine's memory allows "
            f"({have / 2**30:.1f} GB): use a smaller model"
        )


def unsupported(header: GgufHeader) -> TensorInfo | None:
    """The first tensor whose type attnviz does not dequantize, or None."""
    return next((t for t in header.tensors if t.type_id not in TYPES), None)


def dequantized(
    header: GgufHeader, names: list[str] | None = None
) -> Iterator[tuple[str, np.ndarray]]:
    """(name, float32 array in numpy order) for each tensor (or those named), one at a time.

    A type attnviz does not dequantize, or a tensor holding NaN or infinities, is refused
    in one line naming it. The file is mapped once; each array is a new float32 copy.
    """
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    with os.fdopen(open_regular(header.path, "GGUF file"), "rb") as handle:
        if os.fstat(handle.fileno()).st_size != header.size:
            raise BadGguf(f"{header.path} changed while attnviz read it: run again")
        # Not closed by hand: an array on its way out in a traceback may still point into it.
        data = _mapped(handle, header.path)
    for info in header.tensors:
        if names is not None and info.name not in names:
            continue
        if info.type_id not in TYPES:
            raise BadGguf(
                f"tensor {shown(info.name)} in {header.path} is of type "
                f"{info.type_name}, which attnviz does not dequantize: use a file "
                f"quantized to one of {', '.join(t[0] for t in TYPES.values())}"
            )
        _, block, block_bytes = TYPES[info.type_id]
        raw = np.frombuffer(data, np.uint8, info.nbytes, info.offset)
        rows = raw.reshape(*info.shape[:-1], info.dims[0] // block * block_bytes)
        with np.errstate(all="ignore"):  # inf * 0 in a corrupt block: refused just below
            values = dequantize(rows, GGMLQuantizationType(info.type_id))
        # F32 comes back as a view of the mapped file: copied, like the others
        values = np.asarray(values, dtype=np.float32)
        values = values.copy() if info.type_id == 0 else values
        values = values.reshape(info.shape)
        del raw, rows
        if not np.isfinite(values).all():
            raise BadGguf(
                f"tensor {shown(info.name)} in {header.path} holds NaN or infinite "
                "values: the file is corrupt; re-download it"
            )
        yield info.name, values

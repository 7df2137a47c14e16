"""Reading files from strangers: regular files only, never past the bound of their kind.

A model folder's files are input from strangers. Each is read only when it is a regular file
(never a FIFO, which would wait forever, a device such as /dev/zero, which never ends, a
socket or a folder), and no further than its bound (`attnviz.limits`: CONFIG_BYTES,
TOKENIZER_BYTES, ...); past it, one line refuses it before a byte is parsed.
"""

from __future__ import annotations

import math
import os
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from attnviz.errors import AttnvizError
from attnviz.limits import NPY_DIMENSIONS, NPY_HEADER_BYTES, amount

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "NPZ_MEMBERS",
    "NpyHeader",
    "open_regular",
    "read_bounded",
    "read_json",
    "read_npy_header",
    "read_npz",
]

_CHUNK = 4 * 2**20  # read in blocks, so a file shorter than its bound costs only its size
NPZ_MEMBERS = 64  # arrays an .npz of attention may hold (attnviz's own exports hold 16)
# An .npy file's start: the magic string, the format's version (major, minor), then the
# header's length, a little-endian u2 in format 1.0 and a u4 in 2.0 and 3.0, and the header
# (latin-1 up to 2.0, UTF-8 in 3.0).
_NPY_MAGIC = b"\x93NUMPY"
_NPY_LENGTH = {(1, 0): (2, "latin1"), (2, 0): (4, "latin1"), (3, 0): (4, "utf8")}
_NPY_KINDS = "biufcSUO"  # bool, numbers, bytes, str; objects (O) left to the caller to refuse


def open_regular(path: str | os.PathLike[str], what: str) -> int:
    """A read-only descriptor of `path` (links followed) when it is a regular file.

    Refuses anything else in one line naming `what` ("tokenizer.json") before opening it,
    and opens without blocking, so a FIFO put in its place after the check cannot hang the
    read: the descriptor is checked again once open. Raises OSError when it cannot be
    opened (missing, unreadable); the caller decides what a missing file means.
    """
    _check_regular(os.stat(path).st_mode, path, what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        _check_regular(os.fstat(fd).st_mode, path, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(
    path: str | os.PathLike[str], limit: int, what: str, *, head: bool = False
) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them (see `open_regular`).

    A file larger than `limit` is refused in one line naming `what` and the bound, by its
    size before it is read (a 2 GB file costs no memory), and again if it grows while it
    is read. With `head`, a longer file is not refused: its first `limit` bytes are read.
    """
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        size = os.fstat(fd).st_size
        if size > limit and not head:
            raise AttnvizError(_too_big(path, size, limit, what))
        data = bytearray()
        while len(data) <= limit:
            block = handle.read(min(_CHUNK, limit + 1 - len(data)))
            if not block:
                break
            data += block
    if len(data) > limit:
        if head:
            return bytes(data[:limit])
        raise AttnvizError(_too_big(path, len(data), limit, what))
    return bytes(data)


def read_json(path: str | os.PathLike[str], limit: int, what: str) -> Any:
    """The JSON in the regular file `path` of at most `limit` bytes (see `read_bounded`).

    A file that cannot be read, is not UTF-8 JSON, or is nested too deeply for Python's
    parser is refused in one line (AttnvizError) naming it.
    """
    import json

    from attnviz.errors import short_reason

    try:
        return json.loads(read_bounded(path, limit, what).decode("utf-8"))
    except RecursionError:
        raise AttnvizError(
            f"cannot read {path}: its JSON is nested too deeply; restore or re-download the file"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, huge ints
        raise AttnvizError(
            f"cannot read {path} ({short_reason(exc, 120)}): restore or re-download the file"
        ) from None


class NpyHeader(NamedTuple):
    """What an .npy header declares, checked: its shape, order, dtype and data's size."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype[Any]
    nbytes: int  # the data's bytes: the product of the shape times the item size


def read_npy_header(member: IO[bytes], name: str, size: int) -> NpyHeader:
    """The header of the .npy array `name` at the start of `member`, a file of `size` bytes.

    Read from its first bytes before numpy reads any of it: a header longer than
    NPY_HEADER_BYTES (numpy would read the whole of it first), cut short, not a dict of
    `descr`, `fortran_order` and `shape`, a structured dtype or one that is neither numbers
    nor strings, a shape with a negative entry, more than NPY_DIMENSIONS axes or an axis
    longer than the file, or data larger than the file, is refused (ValueError, a short
    reason naming `name`) after at most NPY_HEADER_BYTES bytes are read.
    """
    import ast

    start = member.read(len(_NPY_MAGIC) + 2)
    if len(start) < len(_NPY_MAGIC) + 2 or not start.startswith(_NPY_MAGIC):
        raise ValueError(f"array {name!r} does not start as an .npy file does")
    version = (start[-2], start[-1])
    if version not in _NPY_LENGTH:
        raise ValueError(f"array {name!r} has .npy format {version}, not 1.0, 2.0 or 3.0")
    width, encoding = _NPY_LENGTH[version]
    raw = member.read(width)
    if len(raw) < width:
        raise ValueError(f"array {name!r} ends inside its header")
    length = int.from_bytes(raw, "little")
    if length > NPY_HEADER_BYTES:
        raise ValueError(
            f"array {name!r} declares a header of {length:,} bytes, past the "
            f"{amount(NPY_HEADER_BYTES)} attnviz reads (a real one is under 1 KB)"
        )
    header = member.read(length)
    if len(header) < length:
        raise ValueError(f"array {name!r} ends inside its header")
    try:
        fields = ast.literal_eval(header.decode(encoding))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError, UnicodeError):
        raise ValueError(f"array {name!r} has a header that is not a Python literal") from None
    if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
        raise ValueError(
            f"array {name!r} has a header that is not a dict of descr, fortran_order and shape"
        )
    shape = _npy_shape(fields["shape"], name)
    dtype = _npy_dtype(fields["descr"], name)
    if not isinstance(fields["fortran_order"], bool):
        raise ValueError(f"array {name!r} has a fortran_order that is not True or False")
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: a lying shape cannot wrap
    if nbytes > size:
        raise ValueError(f"array {name!r} claims {nbytes:,} bytes in a member of {size:,}")
    if max(shape, default=0) > size:  # an empty array (or items of 0 bytes) of 10**30 rows
        raise ValueError(f"array {name!r} has an axis of {max(shape):,} in {size:,} bytes")
    return NpyHeader(shape, fields["fortran_order"], dtype, nbytes)


def _npy_shape(shape: object, name: str) -> tuple[int, ...]:
    """`shape` of an .npy header when it is a tuple of at most NPY_DIMENSIONS whole numbers,
    none negative."""
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in shape
    ):
        raise ValueError(f"array {name!r} has a shape that is not a tuple of whole numbers")
    if len(shape) > NPY_DIMENSIONS:
        raise ValueError(f"array {name!r} has {len(shape)} axes (at most {NPY_DIMENSIONS})")
    if min(shape, default=0) < 0:
        raise ValueError(f"array {name!r} has a negative axis: {min(shape):,}")
    return shape


def _npy_dtype(descr: object, name: str) -> np.dtype[Any]:
    """The dtype of an .npy header's `descr` when it is one of numbers, bytes, str or objects
    (a plain one: a structured dtype is refused)."""
    import numpy as np

    if not isinstance(descr, str) or len(descr) > 32:
        raise ValueError(f"array {name!r} is not of numbers or strings (a structured array)")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"array {name!r} has a dtype numpy does not know: {descr!r}") from None
    if dtype.kind not in _NPY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"array {name!r} is {dtype}, not numbers or strings")
    return dtype


def read_npz(path: str | os.PathLike[str], limit: int) -> dict[str, Any]:
    """The arrays of the .npz file `path`, numbers and strings only, at most `limit` bytes.

    Every array's header is read before its data, and its length before the header
    (`read_npy_header`): a header past NPY_HEADER_BYTES, one that is not numpy's, holds
    Python objects (a pickle), claims more bytes than its member holds (a lying header) or
    takes the arrays past `limit` is refused in one line (AttnvizError) before any data is
    decompressed;
    a member is never decompressed past the size its header claims, so a zip bomb costs
    no more than an honest file. At most NPZ_MEMBERS arrays; other members are skipped.
    """
    import stat
    import zipfile

    import numpy as np

    from attnviz.errors import PASS_THROUGH, short_reason

    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise AttnvizError(f"cannot read {path}: {short_reason(exc, 120)}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a pipe, a device or a socket"
        raise AttnvizError(f"{path} is {kind}, not an .npz file: name the file itself")
    arrays: dict[str, Any] = {}
    try:
        fd = open_regular(path, "attention file")
        with os.fdopen(fd, "rb") as handle, zipfile.ZipFile(handle) as archive:
            members = [i for i in archive.infolist() if i.filename.endswith(".npy")]
            if len(archive.infolist()) > NPZ_MEMBERS:
                raise AttnvizError(
                    f"{path} holds {len(archive.infolist()):,} files; an .npz of attention "
                    f"holds a few arrays (attnviz reads at most {NPZ_MEMBERS})"
                )
            total = 0
            for info in members:
                name = info.filename.removesuffix(".npy")
                with archive.open(info) as member:
                    header = read_npy_header(member, name, info.file_size)
                if header.dtype.hasobject:
                    raise AttnvizError(
                        f"{path}: array {name!r} holds Python objects (a pickle), which "
                        "attnviz never loads; save numbers and strings (np.savez with "
                        "numeric and str arrays)"
                    )
                total += header.nbytes
                if total > limit:
                    raise AttnvizError(
                        f"{path} holds {amount(total)} of arrays or more, past what attnviz "
                        f"reads ({amount(limit)}; ATTNVIZ_ATTENTION_MB sets it): save fewer "
                        "layers or a shorter input"
                    )
                with archive.open(info) as member:
                    arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
    except (AttnvizError, *PASS_THROUGH):
        raise
    except Exception as exc:  # zipfile's and numpy's parsers on a stranger's bytes: any failure
        # (BadZipFile, zlib.error, a header numpy's ast.literal_eval or tokenize rejects, an
        # encrypted member, an unknown compression method) is the file's fault
        raise AttnvizError(
            f"cannot read {path} as an .npz file of arrays ({short_reason(exc, 120)}): write "
            "it with numpy.savez or attnviz export"
        ) from None
    return arrays


def _check_regular(mode: int, path: object, what: str) -> None:
    import stat

    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a pipe, a device or a socket"
        if what in _OWN_FILES:
            raise AttnvizError(
                f"{path} is {kind}, not a regular file: attnviz reads a {what} only from a "
                f"plain file; {_OWN_FILES[what]}"
            )
        raise AttnvizError(
            f"{path} is {kind}, not a regular file: attnviz reads a model's {what} only from a "
            "plain file; put the file that came with the checkpoint there"
        )


# Files a user writes with attnviz, not a model's: how to give the right one.
_OWN_FILES = {
    "partial file": "pass the file that --partial wrote",
    "labelled file": "pass the labelled file itself",
}


# What a real file of each kind weighs, for the refusal of one that is far larger.
_TYPICAL = {
    "config.json": "a few kilobytes",
    "index of shards": "some kilobytes",
    "tokenizer file": "some megabytes at most",
}


def _too_big(path: object, size: int, limit: int, what: str) -> str:
    if what in _OWN_FILES:
        return (
            f"{path} is {amount(size)}, past the {amount(limit)} attnviz reads of a {what}: "
            f"{_OWN_FILES[what]}"
        )
    typical = _TYPICAL.get(what, "far smaller")
    return (
        f"{path} is {amount(size)}; a {what} is {typical} (attnviz reads at most "
        f"{amount(limit)}): restore or re-download the file"
    )

"""Reading files from strangers: regular files only, never past the bound of their kind.

A model folder's files are input from strangers. Each is read only when it is a regular file
(never a FIFO, which would wait forever, a device such as /dev/zero, which never ends, a
socket or a folder), and no further than its bound (`attnviz.limits`: CONFIG_BYTES,
TOKENIZER_BYTES, ...); past it, one line refuses it before a byte is parsed.
"""

from __future__ import annotations

import os
from typing import Any

from attnviz.errors import AttnvizError
from attnviz.limits import amount

__all__ = ["NPZ_MEMBERS", "open_regular", "read_bounded", "read_json", "read_npz"]

_CHUNK = 4 * 2**20  # read in blocks, so a file shorter than its bound costs only its size
NPZ_MEMBERS = 64  # arrays an .npz of attention may hold (attnviz's own exports hold 16)


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


def read_npz(path: str | os.PathLike[str], limit: int) -> dict[str, Any]:
    """The arrays of the .npz file `path`, numbers and strings only, at most `limit` bytes.

    Every array's header is read before its data: one that holds Python objects (a
    pickle), claims more bytes than its member holds (a lying header) or takes the arrays
    past `limit` is refused in one line (AttnvizError) before any data is decompressed;
    a member is never decompressed past the size its header claims, so a zip bomb costs
    no more than an honest file. At most NPZ_MEMBERS arrays; other members are skipped.
    """
    import math
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
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        claimed, _, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        claimed, _, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        raise ValueError(f"array {name!r} has .npy format {version}")
                    if dtype.hasobject:
                        raise AttnvizError(
                            f"{path}: array {name!r} holds Python objects (a pickle), which "
                            "attnviz never loads; save numbers and strings (np.savez with "
                            "numeric and str arrays)"
                        )
                    size = math.prod(claimed) * dtype.itemsize  # Python ints: cannot wrap
                    if size > info.file_size:
                        raise ValueError(
                            f"array {name!r} claims {size:,} bytes in a member of "
                            f"{info.file_size:,}"
                        )
                    total += size
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
        raise AttnvizError(
            f"{path} is {kind}, not a regular file: attnviz reads a model's {what} only from a "
            "plain file; put the file that came with the checkpoint there"
        )


# What a real file of each kind weighs, for the refusal of one that is far larger.
_TYPICAL = {
    "config.json": "a few kilobytes",
    "index of shards": "some kilobytes",
    "tokenizer file": "some megabytes at most",
}


def _too_big(path: object, size: int, limit: int, what: str) -> str:
    typical = _TYPICAL.get(what, "far smaller")
    return (
        f"{path} is {amount(size)}; a {what} is {typical} (attnviz reads at most "
        f"{amount(limit)}): restore or re-download the file"
    )

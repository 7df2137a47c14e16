"""Models converted from GGUF files, kept in the cache's `gguf/<identity>/` folders: a
config.json, tokenizer.json and the like always, the dequantized float32 weights
(`.dequantized.safetensors`) when they fit in their own bound (ATTNVIZ_WEIGHTS_MB, default
2048: Gemma 3 270M's 1,023 MB are kept), so that a later run maps them as a safetensors
folder's instead of dequantizing again.

Each folder holds `attnviz.mac`: a line with the HMAC (the cache's secret) of the rest, a JSON
map of every file's size and SHA-256. A folder is used only when every small file checks
out; the weights are checked each time they are loaded against a signed stamp and samples
(`load_weights`: reading a GB whole would cost as much as the run).
Files are written and read as the cache's entries are, relative to the folder's descriptor,
never through a link; the small files count in the cache's size and are evicted least
recently used first (the manifest or a small file gone: the folder is converted again), the
weights under their own bound (gone: they are dequantized again).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO

from attnviz.cache.contents import evict, evict_weights
from attnviz.cache.files import open_regular, touch, write_at
from attnviz.cache.folder import open_folder, open_subfolder, unusable
from attnviz.cache.keys import FORMAT, MAX_TOKENIZER_BYTES
from attnviz.cache.names import CONVERTED, MANIFEST, WEIGHTS
from attnviz.cache.notices import warn
from attnviz.cache.secret import checked_secret
from attnviz.cache.settings import cache_dir, limit_bytes, weights_limit_bytes
from attnviz.errors import PASS_THROUGH

_PREFIX = b"attnviz-mac "


def folder_path(identity: str, environ: Mapping[str, str] | None = None) -> Path:
    return cache_dir(environ) / CONVERTED / identity


def _mac(secret: bytes, identity: str, body: bytes) -> bytes:
    mac = hmac.new(secret, b"attnviz converted\0%d\0" % FORMAT, hashlib.sha256)
    mac.update(identity.encode("ascii") + b"\0" + body)
    return mac.hexdigest().encode("ascii")


@contextlib.contextmanager
def _opened(identity: str, *, create: bool) -> Iterator[tuple[int, bytes] | None]:
    """(descriptor of gguf/<identity>, the cache's secret), or None when the cache is unusable."""
    with open_folder(create=create) as top:
        secret = checked_secret(top, create=create) if top is not None else None
        if top is None or secret is None:
            yield None
            return
        with open_subfolder(top, CONVERTED, create=create) as outer:
            if outer is None:
                yield None
                return
            with open_subfolder(outer, identity, create=create) as inner:
                yield None if inner is None else (inner, secret)


def _read(fd: int, name: str, limit: int) -> bytes | None:
    try:
        with os.fdopen(open_regular(name, fd), "rb") as handle:
            data = handle.read(limit + 1)
            touch(handle.fileno())
    except (OSError, ValueError):
        return None
    return data if len(data) <= limit else None


def _manifest(fd: int, identity: str, secret: bytes) -> dict[str, list[int | str]] | None:
    data = _read(fd, MANIFEST, 1 << 20)
    if data is None:
        return None
    first, _, body = data.partition(b"\n")
    if not hmac.compare_digest(first.removeprefix(_PREFIX), _mac(secret, identity, body)):
        return None
    try:
        files = json.loads(body)["files"]
    except (ValueError, KeyError, TypeError):
        return None
    return files if isinstance(files, dict) else None


@contextlib.contextmanager
def _signed(identity: str) -> Iterator[tuple[int, bytes, dict[str, list[int | str]]] | None]:
    """(descriptor of gguf/<identity>, the secret, its signed manifest's files) of an existing
    converted folder, or None when the cache is unusable or the manifest is missing or forged."""
    with _opened(identity, create=False) as opened:
        if opened is None:
            yield None
            return
        fd, secret = opened
        files = _manifest(fd, identity, secret)
        yield None if files is None else (fd, secret, files)


def find(identity: str) -> Path | None:
    """The converted folder for `identity` when it is complete and its small files check out."""
    with _signed(identity) as signed:
        if signed is None:
            return None
        fd, _, files = signed
        for name, listed in files.items():
            if name == WEIGHTS:
                continue  # checked when they are loaded (`load_weights`)
            size, digest = listed[:2]
            data = _read(fd, name, MAX_TOKENIZER_BYTES)
            if data is None or len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                return None
    return folder_path(identity)


def store(identity: str, files: dict[str, bytes]) -> Path | None:
    """Write the small files of a converted folder and its manifest; None if the cache cannot."""
    with _opened(identity, create=True) as opened:
        if opened is None:
            return None
        fd, secret = opened
        listed: dict[str, list[int | str]] = {}
        try:
            for name, data in files.items():
                write_at(fd, name, _writer(data))
                listed[name] = [len(data), hashlib.sha256(data).hexdigest()]
            _sign(fd, identity, secret, listed)
        except OSError as exc:
            unusable(folder_path(identity), exc.strerror or exc)
            return None
    evict(limit_bytes(), keep=(f"{CONVERTED}/{identity}", MANIFEST))
    return find(identity)


def _writer(data: bytes) -> Callable[[IO[bytes]], object]:
    return lambda out: out.write(data)


def _sign(fd: int, identity: str, secret: bytes, files: dict[str, list[int | str]]) -> None:
    body = json.dumps({"files": files}, sort_keys=True).encode("ascii")
    write_at(
        fd, MANIFEST, lambda out: out.write(_PREFIX + _mac(secret, identity, body) + b"\n" + body)
    )


def load_weights(identity: str, load: Callable[[str], object]) -> object | None:
    """`load(path)` of the kept weights when they are the ones signed, else None.

    `path` names the file through the descriptor that was checked (/proc/self/fd/N), so
    `load` may map it: what a run touches of the weights is all it holds of them.
    Checked each time without reading them all: the signed manifest names the file as it
    was written (device, inode, size, mtime and ctime: any write to the file changes its
    ctime, which no call can set back) and the digest of 16 samples of it. A file whose
    stamp differs (copied, restored from a backup) is read whole once: its SHA-256 must be
    the signed one, and the manifest is signed again with its new stamp.
    """
    with _signed(identity) as signed:
        weights = None if signed is None else _weights_entry(signed[2])
        if signed is None or weights is None:
            return None
        fd, secret, files = signed
        size, digest, samples, stamp = weights
        try:
            handle = open_regular(WEIGHTS, fd)
        except (OSError, ValueError):
            return None
        with os.fdopen(handle, "rb") as file:
            st = os.fstat(file.fileno())
            if st.st_size != size or not size:
                return None
            try:
                if _stamp(st) != stamp:
                    if _sha256(file) != digest:
                        return None
                    stamp = _stamp(os.fstat(file.fileno()))
                    files[WEIGHTS] = [size, digest, samples, *stamp]
                    with contextlib.suppress(OSError):
                        _sign(fd, identity, secret, files)
                if _samples(file.fileno(), size) != samples:
                    return None
                return load(f"/proc/self/fd/{file.fileno()}")
            except PASS_THROUGH:
                raise
            except Exception:  # unreadable, or a file the library refuses: dequantized again
                return None


def _weights_entry(
    files: dict[str, list[int | str]] | None,
) -> tuple[int, str, str, list[int]] | None:
    """(size, SHA-256, samples' digest, stamp) of the signed weights, or None."""
    listed = (files or {}).get(WEIGHTS)
    if not isinstance(listed, list) or len(listed) != 3 + _STAMP_FIELDS:
        return None  # none kept, or kept by an attnviz that checked them otherwise
    size, digest, samples, *stamp = listed
    if not isinstance(size, int) or not isinstance(digest, str) or not isinstance(samples, str):
        return None
    if not all(isinstance(n, int) for n in stamp):
        return None
    return size, digest, samples, [int(n) for n in stamp]


_STAMP_FIELDS = 5
_SAMPLES, _SAMPLE_BYTES = 16, 64 * 1024
_CHUNK = 16 * 2**20


def _stamp(st: os.stat_result) -> list[int]:
    """The file as it was written: where it lives, its size and its times (ns)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _samples(fd: int, size: int) -> str:
    """SHA-256 of 16 pieces of 64 KB spread over the file, its first and last among them."""
    digest = hashlib.sha256(b"%d\0" % size)
    for i in range(_SAMPLES):
        digest.update(
            os.pread(fd, _SAMPLE_BYTES, max(0, size - _SAMPLE_BYTES) * i // (_SAMPLES - 1))
        )
    return digest.hexdigest()


def _sha256(file: io.BufferedReader) -> str:
    """The whole file's SHA-256, read through one buffer (no mapping: the pages read are
    not counted in this process's memory)."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    file.seek(0)
    while n := file.readinto(buffer):
        digest.update(view[:n])
    return digest.hexdigest()


def weights_fit(size: int) -> bool:
    """Whether weights of `size` bytes fit in the bound on kept weights at all."""
    return 0 < size <= weights_limit_bytes()


def store_weights(identity: str, size: int, write: Callable[[IO[bytes]], None]) -> bool:
    """Keep the dequantized weights (`write` writes them) in the converted folder; True if kept.

    Written to a temp file renamed into place (nothing half-written is ever read), then
    signed; the least recently used weights of other models go past their bound. A failure
    to write (a full disk) is a warning: the run goes on with the weights it holds.
    """
    with _signed(identity) as signed:
        if signed is None:
            return False
        fd, secret, files = signed
        hashing = _Hashing()
        try:
            write_at(fd, WEIGHTS, lambda out: write(hashing.wrap(out)))
            with os.fdopen(open_regular(WEIGHTS, fd), "rb") as file:
                st = os.fstat(file.fileno())
                samples = _samples(file.fileno(), st.st_size)
            if st.st_size != hashing.size:
                return False  # replaced meanwhile by another attnviz: its own signing follows
            files[WEIGHTS] = [hashing.size, hashing.digest.hexdigest(), samples, *_stamp(st)]
            _sign(fd, identity, secret, files)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            warn(
                f"cannot keep the dequantized weights in {folder_path(identity)} ({reason}); "
                "they are dequantized again on the next run (free some space, or set "
                "ATTNVIZ_WEIGHTS_MB=0 not to keep them)",
                once=True,
            )
            return False
    evict_weights(weights_limit_bytes(), keep=f"{CONVERTED}/{identity}")
    with _opened(identity, create=False) as opened:
        return opened is not None and _exists(opened[0], WEIGHTS)


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class _Hashing:
    """A writer that hashes what goes through it."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.size = 0

    def wrap(self, out: IO[bytes]) -> IO[bytes]:
        parent = self

        class Writer:
            def write(self, data: bytes) -> int:
                parent.digest.update(data)
                parent.size += len(data)
                return out.write(data)

            def flush(self) -> None:
                out.flush()

        return Writer()  # type: ignore[return-value]

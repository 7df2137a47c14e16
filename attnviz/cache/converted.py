"""Models converted from GGUF files, kept in the cache's `gguf/<identity>/` folders: a
config.json, tokenizer.json and the like always, the dequantized float32 weights
(model.safetensors) when they fit in the cache's size bound.

Each folder holds `attnviz.mac`: a line with the HMAC (the cache's secret) of the rest, a JSON
map of every file's size and SHA-256. A folder is used only when every small file checks
out; the weights are checked (their SHA-256, about 0.7 s a GB) each time they are loaded.
Files are written and read as the cache's entries are, relative to the folder's descriptor,
never through a link; they count in the cache's size and are evicted least recently used
first (the manifest or a small file gone: the folder is converted again; the weights gone:
they are dequantized again).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import mmap
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO

from attnviz.cache.contents import evict
from attnviz.cache.files import open_regular, touch, write_at
from attnviz.cache.folder import open_folder, open_subfolder, unusable
from attnviz.cache.keys import FORMAT, MAX_TOKENIZER_BYTES
from attnviz.cache.names import CONVERTED, MANIFEST, WEIGHTS
from attnviz.cache.secret import checked_secret
from attnviz.cache.settings import cache_dir, limit_bytes

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


def find(identity: str) -> Path | None:
    """The converted folder for `identity` when it is complete and its small files check out."""
    with _opened(identity, create=False) as opened:
        if opened is None:
            return None
        fd, secret = opened
        files = _manifest(fd, identity, secret)
        if files is None:
            return None
        for name, (size, digest) in files.items():
            if name == WEIGHTS:
                continue
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
    """`load(path)` of the kept weights when their SHA-256 is the signed one, else None.

    `path` names the file through the descriptor that was checked (/proc/self/fd/N).
    """
    with _opened(identity, create=False) as opened:
        if opened is None:
            return None
        fd, secret = opened
        files = _manifest(fd, identity, secret)
        if files is None or WEIGHTS not in files:
            return None
        size, digest = files[WEIGHTS]
        try:
            handle = open_regular(WEIGHTS, fd)
        except (OSError, ValueError):
            return None
        with os.fdopen(handle, "rb") as file:
            if os.fstat(file.fileno()).st_size != size or not size:
                return None
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if hashlib.sha256(data).hexdigest() != digest:
                    return None
            touch(file.fileno())
            return load(f"/proc/self/fd/{file.fileno()}")


def weights_fit(size: int) -> bool:
    """Whether weights of `size` bytes fit in the cache's bound at all."""
    return size + 64 * 2**20 <= limit_bytes()


def store_weights(identity: str, size: int, write: Callable[[IO[bytes]], None]) -> bool:
    """Keep the dequantized weights (`write` writes them) in the converted folder; True if kept."""
    with _opened(identity, create=False) as opened:
        if opened is None:
            return False
        fd, secret = opened
        files = _manifest(fd, identity, secret)
        if files is None:
            return False
        hashing = _Hashing()
        try:
            write_at(fd, WEIGHTS, lambda out: write(hashing.wrap(out)))
            files[WEIGHTS] = [hashing.size, hashing.digest.hexdigest()]
            _sign(fd, identity, secret, files)
        except OSError as exc:
            unusable(folder_path(identity), exc.strerror or exc)
            return False
    evict(limit_bytes(), keep=(f"{CONVERTED}/{identity}", WEIGHTS))
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

"""Files inside the cache's folder, reached through its descriptor and never through a link:
a regular file opened for reading, a file written atomically, a file marked as used."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from attnviz.cache.settings import shared

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def touch(fd: int) -> None:
    """Mark the open file as just used (a fine-grained clock, so the LRU order has no ties)."""
    now = time.time_ns()
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(fd, ns=(now, now))


def open_regular(name: str | Path, dir_fd: int | None = None) -> int:
    """A read-only descriptor of `name` when it is a regular file (not a link, FIFO or device).

    Opened without blocking and without following a link (relative to `dir_fd`), then
    checked with fstat: a FIFO planted as an entry would otherwise block the read
    forever. A link is a ValueError.
    """
    flags = os.O_RDONLY | NOFOLLOW | NONBLOCK | CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link, which the cache never follows") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_at(fd: int, name: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write `name` in the folder `fd` atomically: a new temp file (O_EXCL, no link
    followed) renamed over it; a failure leaves nothing. Private (0600) unless shared."""
    mode = (0o666 & ~_umask()) if shared() else 0o600
    temp = f".{name}.attnviz-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
    out = os.open(temp, flags, 0o600, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            touch(handle.fileno())
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)  # replaces a link, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

"""The cache folder's HMAC key, `secret.key`: made once, and trusted only when it is the
user's own regular file that nobody else can read."""

from __future__ import annotations

import contextlib
import os
import stat

from attnviz.cache.files import CLOEXEC, NOFOLLOW, open_regular
from attnviz.cache.folder import distrust, untrusted
from attnviz.cache.settings import cache_dir, shared

SECRET = "secret.key"  # the HMAC key of the folder's entries
SECRET_BYTES = 32


def _read_secret(fd: int, *, create: bool) -> bytes | None:
    """The folder's HMAC key from SECRET (made now with `create`); None if there is none.

    The file must be a regular file (never a link) of `SECRET_BYTES` bytes, the user's
    own and readable by nobody else (in a shared folder: by nobody outside its group).
    Raises ValueError for one that is not.
    """
    for _ in range(3):  # another attnviz may be making it right now
        try:
            handle = open_regular(SECRET, fd)
        except FileNotFoundError:
            if not create:
                return None
            _make_secret(fd)
            continue
        with os.fdopen(handle, "rb") as file:
            st = os.fstat(file.fileno())
            data = file.read(SECRET_BYTES + 1)
        problem = distrust(st)
        if problem is None and not shared() and st.st_mode & 0o077:
            problem = f"it is readable by others (mode {stat.S_IMODE(st.st_mode):o})"
        if problem is None and shared() and st.st_mode & 0o007:
            problem = f"it is readable by others (mode {stat.S_IMODE(st.st_mode):o})"
        if problem is None and len(data) != SECRET_BYTES:
            problem = f"it holds {len(data)} bytes, not {SECRET_BYTES}"
        if problem:
            raise ValueError(problem)
        return data
    return None


def _make_secret(fd: int) -> None:
    """Write a new SECRET, atomically (link(2) fails if another attnviz made one first)."""
    mode = 0o640 if shared() else 0o600
    temp = f".{SECRET}.attnviz-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC, 0o600, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(os.urandom(SECRET_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(temp, SECRET, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)


def secret_problem() -> str | None:
    """Why the folder's SECRET cannot be trusted (the cache is then not used), or None;
    for `attnviz cache info`. Warns about nothing."""
    try:
        fd = os.open(cache_dir(), os.O_RDONLY | CLOEXEC | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None  # no folder yet, or one `folder_problem` reports
    try:
        _read_secret(fd, create=False)
    except (OSError, ValueError) as exc:
        return f"its {SECRET} cannot be trusted ({getattr(exc, 'strerror', None) or exc})"
    finally:
        os.close(fd)
    return None


def checked_secret(fd: int, *, create: bool) -> bytes | None:
    """`_read_secret`, a bad one being a warning (and None): the cache is then not used."""
    try:
        return _read_secret(fd, create=create)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        folder = cache_dir()
        untrusted(folder, f"its {SECRET} cannot be trusted ({reason})", "run `attnviz cache clear`")
        return None

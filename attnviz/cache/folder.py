"""Whether the cache's folder is to be trusted, and a descriptor of it (or of a subfolder)
when it is; the warnings that say why the cache is not used."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from attnviz.cache.files import CLOEXEC, DIRECTORY, NOFOLLOW
from attnviz.cache.notices import warn
from attnviz.cache.settings import SHARED_ENV, cache_dir, shared


def distrust(st: os.stat_result, environ: Mapping[str, str] | None = None) -> str | None:
    """Why a folder (or the secret) with this stat must not be trusted, or None.

    Owned by someone else, or writable by its group or by others: whoever can write it
    can plant entries, links and secrets. `ATTNVIZ_CACHE_SHARED=1` accepts both.
    """
    if shared(environ) or not hasattr(os, "geteuid"):
        return None
    me = os.geteuid()
    if st.st_uid != me:
        return f"it is owned by uid {st.st_uid}, not by you (uid {me})"
    writable = [who for who, bit in (("its group", 0o020), ("others", 0o002)) if st.st_mode & bit]
    if writable:
        return f"it is writable by {' and '.join(writable)} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def folder_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the cache folder must not be used (untrusted, or not a folder), or None.

    A folder that does not exist yet is fine: attnviz makes it, mode 0700.
    """
    folder = cache_dir(environ)
    try:
        st = folder.stat()  # follows a link: ~/.cache/attnviz may point to another disk
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is a file, not a folder"
    return distrust(st, environ)


def untrusted(folder: Path, problem: str, fix: str) -> None:
    """Warn (once) that the cache in `folder` is not used for `problem`, and how to `fix` it."""
    warn(
        f"not using the attention cache in {folder}: {problem}; running without it ({fix}, "
        f"or set {SHARED_ENV}=1 if you trust everyone who can write it)",
        once=True,
    )


def fix(folder: Path, problem: str) -> str:
    """What the user can do about `problem` with `folder`."""
    if "writable by" in problem:
        return f"chmod go-w {folder}"
    return "set ATTNVIZ_CACHE_DIR to a folder of your own"


def unusable(folder: Path, reason: object) -> None:
    """Warn (once) that the cache in `folder` cannot be used, for `reason`."""
    warn(
        f"cannot use the attention cache in {folder} ({reason}); running without it "
        "(set ATTNVIZ_CACHE_DIR to a writable folder, or pass --no-cache)",
        once=True,
    )


@contextlib.contextmanager
def open_folder(
    *, create: bool, check: bool = True, environ: Mapping[str, str] | None = None
) -> Iterator[int | None]:
    """A descriptor of the checked cache folder, or None.

    None when it does not exist (and `create` is off), is not a folder, or (with
    `check`) is not to be trusted: a warning then, except for a folder that is missing.
    The folder itself may be a link (to another disk), checked where it points.
    """
    folder = cache_dir(environ)
    fd = None
    if os.open not in os.supports_dir_fd or not NOFOLLOW:  # no safe way to open inside it
        if check:
            unusable(folder, "this system cannot open files without following links")
        yield None
        return
    try:
        if create:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | DIRECTORY | CLOEXEC)
        problem = distrust(os.fstat(fd), environ) if check else None
        if problem:
            untrusted(folder, problem, fix(folder, problem))
            os.close(fd)
            fd = None
    except FileNotFoundError as exc:
        if create:
            unusable(folder, exc.strerror or exc)
    except (NotADirectoryError, FileExistsError):
        if check:
            unusable(folder, "it is a file, not a folder")
    except OSError as exc:
        if check:
            unusable(folder, exc.strerror or exc)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def open_subfolder(
    top: int,
    sub: str,
    *,
    create: bool,
    check: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Iterator[int | None]:
    """A descriptor of the folder `sub` in the folder `top`, never through a link; or None
    (a link, a file or an untrusted folder there: with `check`, a warning)."""
    where = cache_dir(environ) / sub
    inner = None
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(sub, 0o700, dir_fd=top)
        inner = os.open(sub, os.O_RDONLY | DIRECTORY | NOFOLLOW | CLOEXEC, dir_fd=top)
        problem = distrust(os.fstat(inner), environ) if check else None
        if problem:
            untrusted(where, problem, fix(where, problem))
            os.close(inner)
            inner = None
    except FileNotFoundError:
        pass
    except OSError as exc:
        if check:
            try:
                link = stat.S_ISLNK(os.lstat(sub, dir_fd=top).st_mode)
            except OSError:
                link = False
            if link:  # only this subfolder goes unused: the entries beside it are fine
                warn(
                    f"not using {where}: it is a symbolic link, never followed; remove it",
                    once=True,
                )
            elif isinstance(exc, NotADirectoryError):
                unusable(where, "it is a file, not a folder")
            else:
                unusable(where, exc.strerror or exc)
    try:
        yield inner
    finally:
        if inner is not None:
            os.close(inner)

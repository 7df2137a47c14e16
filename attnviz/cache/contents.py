"""What the cache's folder holds: its own files listed, the least recently used evicted,
`attnviz cache info` and `attnviz cache clear`. Only regular files named like the cache's
own are counted or removed, and unlinking never follows a link.

The dequantized weights of models converted from GGUF files have their own bound
(ATTNVIZ_WEIGHTS_MB): they neither count in the attention's nor are evicted for it."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from attnviz.cache.folder import fix, folder_problem, open_folder, open_subfolder, unusable
from attnviz.cache.names import (
    CONVERTED,
    CONVERTED_FILES,
    ENTRY,
    IDENTITY,
    MANIFEST,
    TEMP,
    TEMP_CONVERTED,
    TEMP_TOKENIZER,
    TOKENIZER,
    TOKENIZERS,
    VIEW,
    VIEWS,
    WEIGHTS,
)
from attnviz.cache.secret import SECRET
from attnviz.cache.settings import SHARED_ENV, cache_dir, limit_bytes, weights_limit_bytes
from attnviz.errors import AttnvizError

STALE_TEMP_S = 3600.0  # a temp file this old is a crashed write, not one in progress
MAX_CONVERTED = 256  # converted models' folders looked at (each is held open while listed)


@dataclass(frozen=True)
class CacheInfo:
    folder: Path
    entries: int
    bytes: int
    limit_bytes: int
    weights: int = 0  # GGUF models whose dequantized weights are kept
    weights_bytes: int = 0
    weights_limit_bytes: int = 0


class _File(NamedTuple):
    """One of the cache's own files: an entry (or converted tokenizer), or a temp file."""

    mtime_ns: int
    size: int
    where: str  # "" (the folder) or TOKENIZERS
    name: str
    entry: bool
    weights: bool = False  # a GGUF model's dequantized weights (their own bound)


@contextlib.contextmanager
def _listing(
    *, check: bool, environ: Mapping[str, str] | None = None
) -> Iterator[tuple[list[_File], Callable[[_File], bool]]]:
    """The cache's own files (regular files named like entries or their temp files, found
    with lstat; a link is never one) and a function that unlinks one, relative to its
    folder's descriptor: never through a link. It says False if the file was gone
    already, and raises OSError if it cannot."""
    with contextlib.ExitStack() as stack:
        folders: dict[str, int] = {}
        top = stack.enter_context(open_folder(create=False, check=check, environ=environ))
        if top is not None:
            folders[""] = top
            inner = stack.enter_context(
                open_subfolder(top, TOKENIZERS, create=False, check=check, environ=environ)
            )
            if inner is not None:
                folders[TOKENIZERS] = inner
            memos = stack.enter_context(
                open_subfolder(top, VIEWS, create=False, check=check, environ=environ)
            )
            if memos is not None:
                folders[VIEWS] = memos
            converted = stack.enter_context(
                open_subfolder(top, CONVERTED, create=False, check=check, environ=environ)
            )
            if converted is not None:
                for name in _converted_folders(converted):
                    fd = stack.enter_context(
                        open_subfolder(converted, name, create=False, check=check, environ=environ)
                    )
                    if fd is not None:
                        folders[f"{CONVERTED}/{name}"] = fd
        files: list[_File] = []
        for where, fd in folders.items():
            entry: re.Pattern[str] | _Named = ENTRY if where == "" else TOKENIZER
            temp = TEMP if where == "" else TEMP_TOKENIZER
            if where.startswith(CONVERTED):
                entry, temp = _NAMED, TEMP_CONVERTED
            elif where == VIEWS:
                entry, temp = VIEW, TEMP_CONVERTED
            with contextlib.suppress(OSError), os.scandir(fd) as items:
                for item in items:
                    is_entry = bool(entry.fullmatch(item.name))
                    if not is_entry and not temp.fullmatch(item.name):
                        continue
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed meanwhile by another attnviz
                    if stat.S_ISREG(st.st_mode):
                        weights = is_entry and item.name == WEIGHTS and where != ""
                        files.append(
                            _File(st.st_mtime_ns, st.st_size, where, item.name, is_entry, weights)
                        )

        def remove(file: _File) -> bool:
            try:
                os.unlink(file.name, dir_fd=folders[file.where])  # a link itself, if one now
            except FileNotFoundError:
                return False  # another attnviz got there first
            return True

        yield files, remove


class _Named:
    """Matches the file names of a converted model's folder, as a compiled pattern would."""

    @staticmethod
    def fullmatch(name: str) -> bool:
        return name in CONVERTED_FILES


_NAMED = _Named()


def _converted_folders(fd: int) -> list[str]:
    """The names of the converted models' folders (never a link), at most MAX_CONVERTED."""
    names: list[str] = []
    with contextlib.suppress(OSError), os.scandir(fd) as items:
        for item in items:
            if IDENTITY.fullmatch(item.name) and item.is_dir(follow_symlinks=False):
                names.append(item.name)
    return sorted(names)[:MAX_CONVERTED]


def evict(limit: int, *, keep: tuple[str, str]) -> None:
    """Remove least recently used entries until the total fits `limit`, and stale temp files.

    `keep` is the (subfolder, name) just written: removed last, only if it alone is too big.
    Dequantized weights are left alone (`evict_weights`).
    """
    with _listing(check=True) as (files, remove):
        now = time.time_ns()
        total = 0
        for file in files:
            if not file.entry:
                if now - file.mtime_ns > STALE_TEMP_S * 1e9:
                    _quietly(remove, file)
            elif not file.weights:
                total += file.size
        entries = sorted(
            (f for f in files if f.entry and not f.weights), key=lambda f: (f.mtime_ns, f.name)
        )
        _remove_oldest(entries, total, limit, lambda f: (f.where, f.name) == keep, remove)


def evict_weights(limit: int, *, keep: str) -> None:
    """Remove the least recently used dequantized weights until they fit `limit` together.

    A model's weights are as recent as its folder's manifest (touched each time the folder
    is used: the weights themselves are never touched, their signed stamp would change).
    `keep` is the subfolder (`gguf/<identity>`) just written: removed last, only if alone
    too big."""
    with _listing(check=True) as (files, remove):
        used = {f.where: f.mtime_ns for f in files if f.entry and f.name == MANIFEST}
        weights = sorted(
            (f for f in files if f.weights), key=lambda f: (used.get(f.where, f.mtime_ns), f.where)
        )
        total = sum(f.size for f in weights)
        _remove_oldest(weights, total, limit, lambda f: f.where == keep, remove)


def _remove_oldest(
    oldest_first: list[_File],
    total: int,
    limit: int,
    kept: Callable[[_File], bool],
    remove: Callable[[_File], bool],
) -> None:
    """Remove files, oldest first, until their `total` bytes fit `limit`; the one just
    written (`kept`) is removed last, only if it alone is too big."""
    written = None
    for file in oldest_first:
        if kept(file):
            written = file
            continue
        if total <= limit:
            break
        if _quietly(remove, file):
            total -= file.size
    if total > limit and written is not None:  # the new file alone is too big
        _quietly(remove, written)


def _quietly(remove: Callable[[_File], bool], file: _File) -> bool:
    try:
        return remove(file)
    except OSError as exc:
        unusable(cache_dir(), exc.strerror or exc)
        return False


def info(environ: Mapping[str, str] | None = None) -> CacheInfo:
    """Where the cache is, how many entries it holds, their bytes, and the bound; and the
    same of the dequantized GGUF weights kept."""
    entries = total = weights = weights_total = 0
    with _listing(check=False, environ=environ) as (files, _):
        for file in files:
            if file.weights:
                weights += 1
                weights_total += file.size
            elif file.entry:
                entries += 1
                total += file.size
    return CacheInfo(
        cache_dir(environ),
        entries,
        total,
        limit_bytes(environ),
        weights,
        weights_total,
        weights_limit_bytes(environ),
    )


def clear(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """Remove every entry (and leftover temp file) of the cache: (entries removed, bytes freed).

    Only regular files named like entries are removed (a link is never followed); other
    files in the folder are left alone, and so is a folder that is not to be trusted
    (AttnvizError, one line: nothing is removed). Entries that cannot be removed (a
    read-only folder) raise AttnvizError, one line, after the others are removed.
    The secret goes too (a new one is made with the next entry).
    """
    folder = cache_dir(environ)
    problem = folder_problem(environ)
    if problem and problem != "it is a file, not a folder":
        raise AttnvizError(
            f"not clearing the attention cache in {folder}: {problem}; nothing removed "
            f"({fix(folder, problem)}, or set {SHARED_ENV}=1 if you trust everyone who "
            "can write it)"
        )
    removed = freed = failed = 0
    reason = ""
    with _listing(check=False, environ=environ) as (files, remove):
        for file in files:
            try:
                if remove(file):
                    removed += file.entry
                    freed += file.size
            except OSError as exc:
                failed += 1
                reason = exc.strerror or str(exc)
        if failed:
            raise AttnvizError(
                f"cannot remove {failed} of the cache's {len(files)} files in "
                f"{folder} ({reason}); removed {removed}: check the folder's permissions"
            )
    with open_folder(create=False, check=False, environ=environ) as fd:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(SECRET, dir_fd=fd)  # a link itself, never what it points to
            _remove_converted_folders(fd, environ)
            with contextlib.suppress(OSError):
                os.rmdir(VIEWS, dir_fd=fd)  # only if emptied
    return removed, freed


def _remove_converted_folders(top: int, environ: Mapping[str, str] | None) -> None:
    """Remove the converted models' folders emptied by `clear` (rmdir: only empty ones go)."""
    with open_subfolder(top, CONVERTED, create=False, check=False, environ=environ) as fd:
        if fd is None:
            return
        for name in _converted_folders(fd):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
    with contextlib.suppress(OSError):
        os.rmdir(CONVERTED, dir_fd=top)

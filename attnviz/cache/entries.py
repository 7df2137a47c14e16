"""Cache entries: the attentions for a key loaded (checked, a bad one discarded with a
warning), stored signed (then the least recently used evicted), or discarded."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from attnviz.cache import views
from attnviz.cache.arrays import (
    PIECES,
    PieceLists,
    entry_mac,
    piece_arrays,
    pieces_from,
    read_entry,
)
from attnviz.cache.contents import evict
from attnviz.cache.files import write_at
from attnviz.cache.folder import open_folder, unusable
from attnviz.cache.names import entry_name
from attnviz.cache.notices import warn
from attnviz.cache.secret import checked_secret
from attnviz.cache.settings import cache_dir, limit_bytes
from attnviz.errors import PASS_THROUGH


def _lookup(
    key: str, expect: tuple[int, int, int] | None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """`read_entry` of the entry for `key` in the checked folder, or None on a miss; a bad
    entry (unreadable, malformed, forged, a link, a FIFO) is removed with a warning."""
    name = entry_name(key)
    with open_folder(create=False) as fd:
        if fd is None:
            return None
        secret = checked_secret(fd, create=False)
        if secret is None:
            return None  # no secret: nothing here can have been written by us
        try:
            found = read_entry(fd, key, secret, expect)
            views.drew_from_entry(str(cache_dir() / name))
            return found
        except (FileNotFoundError, NotADirectoryError):
            return None
        except PASS_THROUGH:
            raise
        except Exception as exc:  # any failure to read is a bad entry, never a crash
            _discard(fd, name, exc)
            return None


def load_analysed(
    key: str, *, text: str, pair: str | None, shape: tuple[int, int]
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The attentions and the tokenized input of `text` (and `pair`) for `key`, or None.

    The input comes as the keyword arguments of `Pieces`.
    For a lookup made before tokenizing: the entry brings its pieces, checked like the
    attentions (an entry that does not hold them, or holds ones that do not fit the
    text, is corrupt: removed with a warning, a miss). `shape` is (layers, heads).
    """
    found = _lookup(key, None)
    if found is None:
        return None
    attentions, ids, arrays = found
    try:
        if attentions.shape[:2] != shape:
            raise ValueError(f"attentions are {attentions.shape}, the model has {shape}")
        missing = [n for n in PIECES if n not in arrays]
        if missing:
            raise ValueError(f"the arrays {', '.join(missing)} are missing")
        pieces = pieces_from(arrays, ids, text, pair)
    except ValueError as exc:
        discard(key, str(exc))
        return None
    return attentions, pieces


def discard(key: str, reason: str) -> None:
    """Remove the entry for `key`, which its reader found unfit, with a warning."""
    name = entry_name(key)
    warn(f"cached attentions {cache_dir() / name} are unfit ({reason}); discarded, computing again")
    with open_folder(create=False) as fd:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)  # a link itself, never what it points to


def _discard(fd: int, name: str, exc: Exception) -> None:
    reason = getattr(exc, "strerror", None) or exc
    if "pickle" in str(reason):  # numpy's advice (allow_pickle) is not for us
        reason = "not an .npz archive of arrays"
    removable = True
    try:
        os.unlink(name, dir_fd=fd)  # a link itself, never what it points to
    except IsADirectoryError:  # a folder planted under an entry's name: left to the user
        removable = False
    except OSError:
        pass
    what = "discarded, computing again" if removable else "remove it (rm -r); computing without it"
    # An entry removed is not met again; a folder in its place would be, at every lookup.
    warn(f"cached attentions {cache_dir() / name} are unreadable ({reason}); {what}",
         once=not removable)  # fmt: skip


def load(
    key: str,
    *,
    expect_ids: Sequence[int] | None = None,
    expect_shape: tuple[int, int] | None = None,
) -> np.ndarray | None:
    """The cached (L, H, T, T) float32 attentions for `key`, or None on a miss.

    An entry whose ids differ from `expect_ids` is a miss. An entry of another shape
    than `expect_shape` (layers, heads) by `expect_ids`, whose weights are not
    attention (NaN, rows that do not sum to 1), or whose HMAC does not check out, is
    corrupt: like an unreadable one it is removed with a warning and is a miss too.
    """
    expect = None
    if expect_shape is not None and expect_ids is not None:
        expect = (*expect_shape, len(expect_ids))
    found = _lookup(key, expect)
    if found is None:
        return None
    attentions, ids, _ = found
    if expect_ids is not None and not np.array_equal(ids, np.asarray(expect_ids)):
        return None
    return attentions


def store(
    key: str, attentions: np.ndarray, ids: Sequence[int], pieces: PieceLists | None = None
) -> None:
    """Save `attentions` (L, H, T, T) for `key`, signed, then evict the least recently used.

    With `pieces` (the tokenized input, whose ids are `ids`) the entry also serves
    `load_analysed`.
    Never raises for a problem on disk: a failed write, or an untrusted folder, is one
    warning. An entry bigger than the whole limit is not kept.
    """
    name = entry_name(key)
    attentions = np.asarray(attentions, dtype=np.float32)  # (L, H, T, T)
    id_array = np.asarray(ids, dtype=np.int64)  # (T,)
    if attentions.ndim != 4 or id_array.shape != (attentions.shape[2],):
        raise ValueError(f"attentions {attentions.shape} and ids {id_array.shape} do not fit")
    limit = limit_bytes()
    if attentions.nbytes + id_array.nbytes > limit:
        return
    arrays = {"attentions": attentions, "ids": id_array}
    if pieces is not None:
        arrays.update(piece_arrays(pieces))
    with open_folder(create=True) as fd:
        if fd is None:
            return
        try:
            secret = checked_secret(fd, create=True)
            if secret is None:
                return
            signed = {**arrays, "mac": entry_mac(secret, key, arrays)}
            write_at(fd, name, lambda handle: np.savez(handle, **signed))  # type: ignore[arg-type]
        except IsADirectoryError:  # a folder under the entry's name: said when it was read
            return
        except OSError as exc:
            unusable(cache_dir(), exc.strerror or exc)
            return
    evict(limit, keep=("", name))

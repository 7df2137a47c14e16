"""A disk cache of computed attentions, so a repeated run skips torch altogether.

One entry is one `<key>.npz` holding `attentions` (L, H, T, T) float32 and the
input `ids` (T,) it was computed for, and with them the rest of the tokenized input
(`PIECES`: tokens, token types, offsets, word and sequence ids, pieces dropped), so
that a hit found from the text alone (`load_analysed`) needs no tokenizer. The key
(`cache_key`) is a SHA-256 over everything that changes the numbers: the model
folder's files (resolved path, size, mtime in ns), the text, pair, mask, dtype,
truncation and attnviz's version.

Where: `$ATTNVIZ_CACHE_DIR`, else `$XDG_CACHE_HOME/attnviz`, else
`~/.cache/attnviz`. Size: at most `$ATTNVIZ_CACHE_MB` mebibytes (1 MB here is
2**20 bytes, what `du -m` counts; 512 by default), least recently used out first;
a read counts as a use. Off with `--no-cache` or `ATTNVIZ_NO_CACHE=1`.

The cache is an optimisation, never a reason to fail: a corrupt entry is removed
and recomputed, an unusable folder means running without the cache; both with a
one-line `warning:` on stderr. Only the standard library and numpy are imported
here, so a cache hit never loads torch or transformers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import sys
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from attnviz import version as release
from attnviz.errors import PASS_THROUGH, AttnvizError
from attnviz.output import atomic_write


class PieceLists(Protocol):
    """What an entry keeps of a tokenized input (`attnviz.text.pieces.Pieces` has it)."""

    @property
    def tokens(self) -> list[str]: ...
    @property
    def type_ids(self) -> list[int]: ...
    @property
    def offsets(self) -> list[tuple[int, int]]: ...
    @property
    def word_ids(self) -> list[int | None]: ...
    @property
    def sequence_ids(self) -> list[int | None]: ...
    @property
    def dropped(self) -> int: ...


DEFAULT_LIMIT_MB = 512.0
MB = 2**20  # bytes in one ATTNVIZ_CACHE_MB unit
FORMAT = 2  # bump when the entry layout changes; part of every key
ROW_SUM_TOLERANCE = 1e-2  # a cached row may sum to 1 this far off (float16 attention)
STALE_TEMP_S = 3600.0  # a temp file this old is a crashed write, not one in progress

_ENTRY = re.compile(r"[0-9a-f]{64}\.npz")  # <key>.npz
_TEMP = re.compile(r"\.[0-9a-f]{64}\.npz\..+\.tmp")  # atomic_write's temp file for an entry
_OFF_VALUES = ("", "0", "false", "no", "off")

_warned: set[str] = set()  # messages already shown by warn(..., once=True)


@dataclass(frozen=True)
class CacheInfo:
    folder: Path
    entries: int
    bytes: int
    limit_bytes: int


def warn(message: str, *, once: bool = False) -> None:
    """Print `warning: <message>` on stderr (only the first time, if `once`)."""
    if once:
        if message in _warned:
            return
        _warned.add(message)
    print(f"warning: {message}", file=sys.stderr)


def cache_enabled(no_cache_flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """False with `--no-cache` or when ATTNVIZ_NO_CACHE is set to anything but 0/false/no/off."""
    env = os.environ if environ is None else environ
    if no_cache_flag:
        return False
    return env.get("ATTNVIZ_NO_CACHE", "").strip().lower() in _OFF_VALUES


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder (not created here)."""
    env = os.environ if environ is None else environ
    if env.get("ATTNVIZ_CACHE_DIR"):
        return Path(env["ATTNVIZ_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative path
        return Path(xdg) / "attnviz"
    return _home(env) / ".cache" / "attnviz"


def _home(env: Mapping[str, str]) -> Path:
    """$HOME when it is an absolute path, else the user's home from the password database.

    An empty HOME (HOME="") would otherwise put the cache in /.cache or ./.cache.
    """
    home = env.get("HOME", "")
    if home and Path(home).is_absolute():
        return Path(home)
    try:
        import pwd

        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        return Path.home()


def limit_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The size bound in bytes; a bad ATTNVIZ_CACHE_MB is a warning and the default."""
    env = os.environ if environ is None else environ
    raw = env.get("ATTNVIZ_CACHE_MB")
    if raw is None or not raw.strip():
        return int(DEFAULT_LIMIT_MB * MB)
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not math.isfinite(mb) or mb < 0:
        warn(
            f"ATTNVIZ_CACHE_MB={raw!r} is not a size in MB (a number >= 0, e.g. 512 or 0.5); "
            f"using {DEFAULT_LIMIT_MB:g}",
            once=True,
        )
        mb = DEFAULT_LIMIT_MB
    return int(mb * MB)


def cache_key(
    folder: Path,
    *,
    text: str,
    pair: str | None,
    causal: bool,
    dtype: str,
    truncate: bool,
    max_tokens: int | None = None,
) -> str:
    """A hex digest of everything that changes the attentions of `text` under the model in `folder`.

    The model is fingerprinted by every non-hidden regular file directly in `folder`
    (symlinks followed, as in a Hub snapshot): name, resolved path, size and mtime in ns.
    Raises OSError only if `folder` cannot be listed.
    """

    material = {
        "format": FORMAT,
        "version": release.__version__,  # read at call time: a new version never serves old numbers
        "files": _model_files(folder),
        "text": text,
        "pair": pair,
        "causal": causal,
        "dtype": dtype,
        "truncate": truncate,
        "max_tokens": max_tokens,  # the bound asked for (None: the model's), which can cut
    }
    blob = json.dumps(material, sort_keys=True)  # ASCII: lone surrogates in argv are fine
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _model_files(folder: Path) -> list[list[str | int]]:
    """Name, resolved path, size and mtime (ns) of every non-hidden regular file in `folder`."""
    files: list[list[str | int]] = []
    for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        try:
            st = entry.stat()  # follows symlinks
        except OSError:
            continue  # a dangling link: not a file the model can read either
        if not stat.S_ISREG(st.st_mode):
            continue
        files.append([entry.name, str(entry.resolve()), st.st_size, st.st_mtime_ns])
    return files


TOKENIZERS = "tokenizers"  # subfolder for tokenizers that transformers had to convert
_TOKENIZER = re.compile(r"[0-9a-f]{64}\.json")
_TEMP_TOKENIZER = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")


def tokenizer_path(folder: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the tokenizer.json converted for a model folder without one is kept.

    Keyed like the attentions on the folder's files and the attnviz version, so a later
    run reads it with the `tokenizers` library alone instead of importing transformers.
    Raises OSError only if `folder` cannot be listed.
    """

    material = {"format": FORMAT, "version": release.__version__, "files": _model_files(folder)}
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode("ascii")).hexdigest()
    return cache_dir(environ) / TOKENIZERS / f"{digest}.json"


# A converted tokenizer.json larger than this is not kept (real ones are 0.5 to 20 MB).
MAX_TOKENIZER_BYTES = 64 * MB


def load_tokenizer_json(path: Path) -> str | None:
    """The converted tokenizer kept at `path` (a regular file only), or None; a use for the LRU."""
    try:
        with os.fdopen(_open_regular(path), "rb") as handle:
            data = handle.read(MAX_TOKENIZER_BYTES + 1)
    except (OSError, ValueError):
        return None
    if len(data) > MAX_TOKENIZER_BYTES:
        return None
    _touch(path)
    return data.decode("utf-8")


def store_tokenizer_json(path: Path, text: str) -> None:
    """Keep a converted tokenizer at `path`, counted in the cache's size; a failure only warns."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "w") as handle:
            handle.write(text)
    except (OSError, AttnvizError) as exc:
        cause = exc.__context__ if isinstance(exc, AttnvizError) else exc
        _unusable(folder, getattr(cause, "strerror", None) or exc)
        return
    _touch(path)
    _evict(cache_dir(), limit_bytes(), keep=path)


def _entry_path(key: str) -> Path:
    if not _ENTRY.fullmatch(f"{key}.npz"):
        raise ValueError(f"not a cache key: {key!r}")
    return cache_dir() / f"{key}.npz"


def _touch(path: Path) -> None:
    """Mark `path` as just used (a fine-grained clock, so the LRU order has no ties)."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(path, ns=(now, now))


def _open_regular(path: Path) -> int:
    """A read-only descriptor of `path` when it is a regular file (not a link, FIFO or device).

    Opened without blocking and without following a link, then checked with fstat: a
    FIFO planted as an entry would otherwise block the read forever.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _member(archive: zipfile.ZipFile, name: str, shape: tuple[int, ...] | None) -> np.ndarray:
    """The array `name`.npy of an entry, its header checked before its data is read.

    `shape` is the one expected (None: any that fits the cache's size limit); a header
    that claims another, or more bytes than the member holds, is refused before a
    single byte of data is decompressed.
    """
    info = archive.getinfo(f"{name}.npy")
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            header = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            header = np.lib.format.read_array_header_2_0(member)
        else:
            raise ValueError(f"{name} has .npy format {version}")
        claimed, _, dtype = header
        size = math.prod(claimed) * dtype.itemsize  # Python ints: a lying shape cannot wrap
        if dtype.hasobject or (shape is not None and tuple(claimed) != shape):
            raise ValueError(f"{name} is {dtype} {tuple(claimed)}, expected {shape}")
        if size > limit_bytes() or size > info.file_size:
            raise ValueError(f"{name} claims {size} bytes in a member of {info.file_size}")
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _read(
    path: Path, expect: tuple[int, int, int] | None = None, *, pieces: bool = False
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The (attentions, ids, arrays of PIECES) in an entry; ValueError if it is not well formed.

    `expect` is (layers, heads, pieces): an entry of another shape is refused from its
    header. The weights are checked as attention: finite, in 0..1, rows summing to 1.
    The arrays of PIECES are read only with `pieces` (their headers checked for size).
    """
    with os.fdopen(_open_regular(path), "rb") as handle, zipfile.ZipFile(handle) as archive:
        names = archive.namelist()
        if "attentions.npy" not in names or "ids.npy" not in names:
            raise ValueError("the arrays 'attentions' and 'ids' are missing")
        L, H, T = expect if expect is not None else (None, None, None)
        ids = _member(archive, "ids", (T,) if T is not None else None)  # (T,)
        if ids.ndim != 1:
            raise ValueError(f"ids are {ids.dtype} {ids.shape}")
        T = ids.shape[0]
        want = (L, H, T, T) if L is not None and H is not None else None
        attentions = _member(archive, "attentions", want)  # (L, H, T, T)
        arrays = {}
        if pieces:
            missing = [n for n in PIECES if f"{n}.npy" not in names]
            if missing:
                raise ValueError(f"the arrays {', '.join(missing)} are missing")
            arrays = {n: _member(archive, n, None) for n in PIECES}
    if attentions.dtype != np.float32 or attentions.ndim != 4:
        raise ValueError(f"attentions are {attentions.dtype} {attentions.shape}")
    if attentions.shape[2] != attentions.shape[3]:
        raise ValueError(f"attentions are not square: {attentions.shape}")
    if ids.dtype.kind not in "iu" or ids.shape[0] != attentions.shape[2]:
        raise ValueError(f"ids {ids.dtype} {ids.shape} do not fit attentions {attentions.shape}")
    if attentions.size and not _is_attention(attentions):
        raise ValueError("its weights are not attention (non-finite, or rows not summing to 1)")
    return attentions, ids, arrays


def _is_attention(attentions: np.ndarray) -> bool:
    """Finite weights in 0..1 whose rows sum to 1 (to float16's precision)."""
    rows = attentions.sum(axis=-1, dtype=np.float64)  # (L, H, T)
    if not np.isfinite(rows).all() or np.abs(rows - 1).max() > ROW_SUM_TOLERANCE:
        return False
    return bool(attentions.min() >= 0)


# The tokenized input beside the attentions: name -> (shape after T, what it holds).
PIECES: dict[str, tuple[tuple[int, ...] | None, str]] = {
    "tokens": ((), "U"),  # the vocabulary pieces
    "type_ids": ((), "i"),
    "offsets": ((2,), "i"),  # character spans (start, end) in the text or the pair
    "word_ids": ((), "i"),  # -1 for None (a special token)
    "sequence_ids": ((), "i"),  # 0 text, 1 pair, -1 None
    "dropped": (None, "i"),  # () : pieces cut off by --truncate
}  # fmt: skip


def _piece_arrays(pieces: PieceLists) -> dict[str, np.ndarray]:
    def none_as(values: Sequence[int | None]) -> np.ndarray:
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)

    return {
        "tokens": np.array(pieces.tokens, dtype=str),
        "type_ids": np.array(pieces.type_ids, dtype=np.int64),
        "offsets": np.array(pieces.offsets, dtype=np.int64).reshape(-1, 2),
        "word_ids": none_as(pieces.word_ids),
        "sequence_ids": none_as(pieces.sequence_ids),
        "dropped": np.array(pieces.dropped, dtype=np.int64),
    }


def _pieces_from(
    arrays: dict[str, np.ndarray], ids: np.ndarray, text: str, pair: str | None
) -> dict[str, Any]:
    """The tokenized input an entry holds, as the keyword arguments of `Pieces`, every array
    checked first (an entry may be hostile)."""
    T = ids.shape[0]
    for name, (tail, kind) in PIECES.items():
        array = arrays[name]
        shape = () if tail is None else (T, *tail)
        if array.shape != shape or array.dtype.kind not in (kind + "u" if kind == "i" else kind):
            raise ValueError(f"{name} are {array.dtype} {array.shape}, expected {kind} {shape}")
    sequence_ids, word_ids, offsets = (arrays[n] for n in ("sequence_ids", "word_ids", "offsets"))
    if not np.isin(sequence_ids, (-1, 0) if pair is None else (-1, 0, 1)).all():
        raise ValueError("sequence ids outside -1, 0, 1")
    if ((word_ids < 0) != (sequence_ids < 0)).any() or word_ids.max(initial=0) > T:
        raise ValueError("word ids do not fit the pieces")
    sizes = np.where(sequence_ids == 1, len(pair or ""), len(text))  # (T,)
    starts, ends = offsets[:, 0], offsets[:, 1]
    if not ((starts >= 0) & (starts <= ends) & (ends <= sizes)).all():
        raise ValueError("offsets outside the text")
    if not 0 <= int(arrays["dropped"]) <= 2**31 or (arrays["type_ids"] < 0).any():
        raise ValueError("bad token types or dropped count")
    return dict(
        text=text,
        pair=pair,
        tokens=[str(t) for t in arrays["tokens"]],
        ids=ids.tolist(),
        type_ids=arrays["type_ids"].tolist(),
        offsets=[(int(a), int(b)) for a, b in offsets],
        word_ids=[None if w < 0 else w for w in word_ids.tolist()],
        sequence_ids=[None if q < 0 else q for q in sequence_ids.tolist()],
        dropped=int(arrays["dropped"]),
    )


def load_analysed(
    key: str, *, text: str, pair: str | None, shape: tuple[int, int]
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The attentions and the tokenized input of `text` (and `pair`) for `key`, or None.

    The input comes as the keyword arguments of `Pieces`.
    For a lookup made before tokenizing: the entry brings its pieces, checked like the
    attentions (an entry that does not hold them, or holds ones that do not fit the
    text, is corrupt: removed with a warning, a miss). `shape` is (layers, heads).
    """
    path = _entry_path(key)
    try:
        attentions, ids, arrays = _read(path, None, pieces=True)
        if attentions.shape[:2] != shape:
            raise ValueError(f"attentions are {attentions.shape}, the model has {shape}")
        pieces = _pieces_from(arrays, ids, text, pair)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PASS_THROUGH:
        raise
    except Exception as exc:  # any failure to read is a bad entry, never a crash
        _discard(path, exc)
        return None
    _touch(path)
    return attentions, pieces


def discard(key: str, reason: str) -> None:
    """Remove the entry for `key`, which its reader found unfit, with a warning."""
    path = _entry_path(key)
    warn(f"cached attentions {path} are unfit ({reason}); discarded, computing again")
    with contextlib.suppress(OSError):
        path.unlink()


def _discard(path: Path, exc: Exception) -> None:
    reason = getattr(exc, "strerror", None) or exc
    if "pickle" in str(reason):  # numpy's advice (allow_pickle) is not for us
        reason = "not an .npz archive of arrays"
    warn(f"cached attentions {path} are unreadable ({reason}); discarded, computing again")
    with contextlib.suppress(OSError):
        path.unlink()


def load(
    key: str,
    *,
    expect_ids: Sequence[int] | None = None,
    expect_shape: tuple[int, int] | None = None,
) -> np.ndarray | None:
    """The cached (L, H, T, T) float32 attentions for `key`, or None on a miss.

    An entry whose ids differ from `expect_ids` is a miss. An entry of another shape
    than `expect_shape` (layers, heads) by `expect_ids`, or whose weights are not
    attention (NaN, rows that do not sum to 1), is corrupt: like an unreadable one it
    is removed with a warning and is a miss too.
    """
    path = _entry_path(key)
    expect = None
    if expect_shape is not None and expect_ids is not None:
        expect = (*expect_shape, len(expect_ids))
    try:
        attentions, ids, _ = _read(path, expect)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PASS_THROUGH:
        raise
    except Exception as exc:  # any failure to read is a bad entry, never a crash
        _discard(path, exc)
        return None
    if expect_ids is not None and not np.array_equal(ids, np.asarray(expect_ids)):
        return None
    _touch(path)
    return attentions


def _unusable(folder: Path, reason: object) -> None:
    warn(
        f"cannot use the attention cache in {folder} ({reason}); running without it "
        "(set ATTNVIZ_CACHE_DIR to a writable folder, or pass --no-cache)",
        once=True,
    )


def store(
    key: str, attentions: np.ndarray, ids: Sequence[int], pieces: PieceLists | None = None
) -> None:
    """Save `attentions` (L, H, T, T) for `key`, then evict the least recently used.

    With `pieces` (the tokenized input, whose ids are `ids`) the entry also serves
    `load_analysed`.
    Never raises for a problem on disk: a failed write is one warning. An entry
    bigger than the whole limit is not kept.
    """
    path = _entry_path(key)
    folder = path.parent
    attentions = np.asarray(attentions, dtype=np.float32)  # (L, H, T, T)
    id_array = np.asarray(ids, dtype=np.int64)  # (T,)
    if attentions.ndim != 4 or id_array.shape != (attentions.shape[2],):
        raise ValueError(f"attentions {attentions.shape} and ids {id_array.shape} do not fit")
    limit = limit_bytes()
    if attentions.nbytes + id_array.nbytes > limit:
        return
    try:
        if folder.exists() and not folder.is_dir():
            _unusable(folder, "it is a file, not a folder")
            return
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as handle:
            arrays = {"attentions": attentions, "ids": id_array}
            if pieces is not None:
                arrays.update(_piece_arrays(pieces))
            np.savez(handle, **arrays)  # type: ignore[arg-type]
    except (OSError, AttnvizError) as exc:
        cause = exc.__context__ if isinstance(exc, AttnvizError) else exc  # atomic_write's OSError
        _unusable(folder, getattr(cause, "strerror", None) or exc)
        return
    _touch(path)
    _evict(folder, limit, keep=path)


def _scan(folder: Path) -> tuple[list[tuple[int, str, int, Path]], list[tuple[float, int, Path]]]:
    """Our entries as (mtime_ns, name, size, path) and our temp files as (mtime, size, path).

    Entries are the attention files and the converted tokenizers in `tokenizers/`: both
    count towards the size limit and are evicted least recently used first.
    """
    entries: list[tuple[int, str, int, Path]] = []
    temps: list[tuple[float, int, Path]] = []
    listing: list[tuple[os.DirEntry[str], re.Pattern[str], re.Pattern[str]]] = []
    for where, entry, temp in (
        (folder, _ENTRY, _TEMP),
        (folder / TOKENIZERS, _TOKENIZER, _TEMP_TOKENIZER),
    ):
        with contextlib.suppress(OSError):
            listing += [(item, entry, temp) for item in os.scandir(where)]
    for item, entry, temp in listing:
        is_entry = bool(entry.fullmatch(item.name))
        if not is_entry and not temp.fullmatch(item.name):
            continue
        try:
            if not item.is_file(follow_symlinks=False):
                continue
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile by another attnviz
        if is_entry:
            entries.append((st.st_mtime_ns, item.name, st.st_size, Path(item.path)))
        else:
            temps.append((st.st_mtime, st.st_size, Path(item.path)))
    return entries, temps


def _remove(path: Path, *, strict: bool = False) -> bool:
    """Remove `path`; False if it was gone. A failure warns, or with `strict` raises OSError."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False  # another attnviz got there first
    except OSError as exc:
        if strict:
            raise
        _unusable(path.parent, exc.strerror or exc)
        return False
    return True


def _evict(folder: Path, limit: int, *, keep: Path) -> None:
    """Remove least recently used entries until the total fits `limit`, and stale temp files."""
    entries, temps = _scan(folder)
    now = time.time()
    for mtime, _, temp in temps:
        if now - mtime > STALE_TEMP_S:
            _remove(temp)
    total = sum(size for _, _, size, _ in entries)
    for _, _, size, path in sorted(entries):  # oldest use first
        if total <= limit:
            break
        if path == keep:
            continue
        if _remove(path):
            total -= size
    if total > limit:  # the new entry alone is too big (npz overhead over the estimate)
        _remove(keep)


def info(environ: Mapping[str, str] | None = None) -> CacheInfo:
    """Where the cache is, how many entries it holds, their bytes, and the bound."""
    folder = cache_dir(environ)
    entries, _ = _scan(folder)
    total = sum(size for _, _, size, _ in entries)
    return CacheInfo(folder, len(entries), total, limit_bytes(environ))


def clear(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """Remove every entry (and leftover temp file) of the cache: (entries removed, bytes freed).

    Other files in the folder are left alone. Entries that cannot be removed (a
    read-only folder) raise AttnvizError, one line, after the others are removed.
    """
    folder = cache_dir(environ)
    entries, temps = _scan(folder)
    removed = freed = failed = 0
    reason = ""
    for size, path, is_entry in [(e[2], e[3], True) for e in entries] + [
        (t[1], t[2], False) for t in temps
    ]:
        try:
            if _remove(path, strict=True):
                removed += is_entry
                freed += size
        except OSError as exc:
            failed += 1
            reason = exc.strerror or str(exc)
    if failed:
        raise AttnvizError(
            f"cannot remove {failed} of the cache's {len(entries) + len(temps)} files in "
            f"{folder} ({reason}); removed {removed}: check the folder's permissions"
        )
    return removed, freed

"""A disk cache of computed attentions, so a repeated run skips torch altogether.

One entry is one `<key>.npz` holding `attentions` (L, H, T, T) float32 and the
input `ids` (T,) it was computed for, and with them the rest of the tokenized input
(`PIECES`: tokens, token types, offsets, word and sequence ids, pieces dropped), so
that a hit found from the text alone (`load_analysed`) needs no tokenizer, and `mac`:
an HMAC-SHA256 of the key and every array, made with the cache's secret.

The key (`cache_key`) is a SHA-256 over everything that changes the numbers: the
*content* of the model folder's files (`_fingerprint`: small files, the config and
the tokenizer files whole; a weight file by its size, its header and 16 samples
spread over it), the text, pair, mask, dtype, truncation and attnviz's version. A
weight file rewritten with the same size and its old mtime restored is a new key.

Trust nothing not checked (a cache folder may be shared, or may have been):
- the folder must be owned by the user and writable by nobody else, unless
  `ATTNVIZ_CACHE_SHARED=1` says the user trusts everyone who can write it; otherwise
  it is not used (one warning), and `attnviz cache clear` refuses to touch it;
- no symbolic link inside it is ever followed: entries are opened with O_NOFOLLOW
  relative to the folder's descriptor, and eviction and `clear` unlink only regular
  files named like entries (unlinking never follows a link);
- an entry is shown only if its `mac` checks out with the secret in `secret.key`, a
  0600 file of the user's in the folder (0640 in a shared one): another user cannot
  forge an entry, nor copy one made for another text or model under this key.

Where: `$ATTNVIZ_CACHE_DIR`, else `$XDG_CACHE_HOME/attnviz`, else
`~/.cache/attnviz` (made mode 0700). Size: at most `$ATTNVIZ_CACHE_MB` mebibytes
(1 MB here is 2**20 bytes, what `du -m` counts; 512 by default), least recently used
out first; a read counts as a use. Off with `--no-cache` or `ATTNVIZ_NO_CACHE=1`.

The cache is an optimisation, never a reason to fail: a corrupt or forged entry is
removed and recomputed, an unusable or untrusted folder means running without the
cache; both with a one-line `warning:` on stderr. Only the standard library and numpy
are imported here, so a cache hit never loads torch or transformers.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import math
import os
import re
import stat
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple, Protocol

import numpy as np

from attnviz import version as release
from attnviz.errors import PASS_THROUGH, AttnvizError


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
FORMAT = 3  # bump when the entry layout or the key changes; part of every key (3: mac, content)
ROW_SUM_TOLERANCE = 1e-2  # a cached row may sum to 1 this far off (float16 attention)
STALE_TEMP_S = 3600.0  # a temp file this old is a crashed write, not one in progress
SHARED_ENV = "ATTNVIZ_CACHE_SHARED"  # set: a folder others can write is used on purpose
SECRET = "secret.key"  # the HMAC key of the folder's entries
SECRET_BYTES = 32

# How a model file is fingerprinted for the key (see `_fingerprint`).
WHOLE_FILE_BYTES = 4 * MB  # a file up to this size is hashed whole
SAMPLES = 16  # a bigger one: its head (a safetensors header whole), then 16 slices
SAMPLE_BYTES = 64 * 1024  # of 64 KiB, the first at its start and the last at its end
HEAD_BYTES = MB
MAX_SAFETENSORS_HEADER = 100 * MB  # the format's own bound
# Read whole up to MAX_TOKENIZER_BYTES whatever their size: what the tokenizer reads.
_WHOLE_NAMES = frozenset(
    (
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
    )
)

_ENTRY = re.compile(r"[0-9a-f]{64}\.npz")  # <key>.npz
_TEMP = re.compile(r"\.[0-9a-f]{64}\.npz\..+\.tmp")  # a temp file of an entry being written
_OFF_VALUES = ("", "0", "false", "no", "off")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_warned: set[str] = set()  # messages already shown by warn(..., once=True)
_digests: dict[tuple[str, int, int, int, int, int], str] = {}  # _fingerprint's, this process


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


def shared(environ: Mapping[str, str] | None = None) -> bool:
    """True when ATTNVIZ_CACHE_SHARED is set (to anything but 0/false/no/off)."""
    env = os.environ if environ is None else environ
    return env.get(SHARED_ENV, "").strip().lower() not in _OFF_VALUES


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


# --- whom the folder belongs to -------------------------------------------------------------


def _distrust(st: os.stat_result, environ: Mapping[str, str] | None = None) -> str | None:
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
    return _distrust(st, environ)


def _untrusted(folder: Path, problem: str, fix: str) -> None:
    warn(
        f"not using the attention cache in {folder}: {problem}; running without it ({fix}, "
        f"or set {SHARED_ENV}=1 if you trust everyone who can write it)",
        once=True,
    )


def _fix(folder: Path, problem: str) -> str:
    if "writable by" in problem:
        return f"chmod go-w {folder}"
    return "set ATTNVIZ_CACHE_DIR to a folder of your own"


def _unusable(folder: Path, reason: object) -> None:
    warn(
        f"cannot use the attention cache in {folder} ({reason}); running without it "
        "(set ATTNVIZ_CACHE_DIR to a writable folder, or pass --no-cache)",
        once=True,
    )


@contextlib.contextmanager
def _folder(
    *, create: bool, check: bool = True, environ: Mapping[str, str] | None = None
) -> Iterator[int | None]:
    """A descriptor of the checked cache folder, or None.

    None when it does not exist (and `create` is off), is not a folder, or (with
    `check`) is not to be trusted: a warning then, except for a folder that is missing.
    The folder itself may be a link (to another disk), checked where it points.
    """
    folder = cache_dir(environ)
    fd = None
    if os.open not in os.supports_dir_fd or not _NOFOLLOW:  # no safe way to open inside it
        if check:
            _unusable(folder, "this system cannot open files without following links")
        yield None
        return
    try:
        if create:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        problem = _distrust(os.fstat(fd), environ) if check else None
        if problem:
            _untrusted(folder, problem, _fix(folder, problem))
            os.close(fd)
            fd = None
    except FileNotFoundError as exc:
        if create:
            _unusable(folder, exc.strerror or exc)
    except (NotADirectoryError, FileExistsError):
        if check:
            _unusable(folder, "it is a file, not a folder")
    except OSError as exc:
        if check:
            _unusable(folder, exc.strerror or exc)
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def _subfolder(
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
        inner = os.open(sub, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=top)
        problem = _distrust(os.fstat(inner), environ) if check else None
        if problem:
            _untrusted(where, problem, _fix(where, problem))
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
            if link:
                _untrusted(where, "it is a symbolic link", f"remove {where}")
            elif isinstance(exc, NotADirectoryError):
                _unusable(where, "it is a file, not a folder")
            else:
                _unusable(where, exc.strerror or exc)
    try:
        yield inner
    finally:
        if inner is not None:
            os.close(inner)


def _secret(fd: int, *, create: bool) -> bytes | None:
    """The folder's HMAC key from SECRET (made now with `create`); None if there is none.

    The file must be a regular file (never a link) of `SECRET_BYTES` bytes, the user's
    own and readable by nobody else (in a shared folder: by nobody outside its group).
    Raises ValueError for one that is not.
    """
    for _ in range(3):  # another attnviz may be making it right now
        try:
            handle = _open_regular(SECRET, fd)
        except FileNotFoundError:
            if not create:
                return None
            _make_secret(fd)
            continue
        with os.fdopen(handle, "rb") as file:
            st = os.fstat(file.fileno())
            data = file.read(SECRET_BYTES + 1)
        problem = _distrust(st)
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
    out = os.open(
        temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=fd
    )
    try:
        with os.fdopen(out, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(os.urandom(SECRET_BYTES))
        with contextlib.suppress(FileExistsError):
            os.link(temp, SECRET, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)


def _checked_secret(fd: int, *, create: bool) -> bytes | None:
    """`_secret`, a bad one being a warning (and None): the cache is then not used."""
    try:
        return _secret(fd, create=create)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        folder = cache_dir()
        _untrusted(
            folder, f"its {SECRET} cannot be trusted ({reason})", "run `attnviz cache clear`"
        )
        return None


# --- the key: what the numbers depend on ----------------------------------------------------


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

    The model is fingerprinted by the content of every non-hidden regular file directly
    in `folder` (symlinks followed, as in a Hub snapshot): see `_fingerprint`. Two
    folders with the same files share their entries.
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
    """Name, size and content digest of every non-hidden regular file in `folder`."""
    files: list[list[str | int]] = []
    for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        found = _fingerprint(entry)
        if found is not None:
            files.append([entry.name, *found])
    return files


def _fingerprint(path: Path) -> tuple[int, str] | None:
    """(size, digest) of the regular file at `path` (a link followed), or None if not one.

    The digest covers the whole file when it is small (`WHOLE_FILE_BYTES`) or a config
    or tokenizer file (up to `MAX_TOKENIZER_BYTES`); a bigger one (the weights) by its
    head (for a safetensors file its whole header: every tensor's name, dtype, shape and
    offsets), `SAMPLES` slices spread evenly to its end, and its size: about 2 MB read,
    a millisecond or two, so a cache hit stays fast; and any rewrite that changes the
    header or the numbers (a fine-tune, a conversion, another checkpoint) changes it.
    A file that cannot be read counts by its size alone: the model cannot read it either.
    Memoised in this process by (path, device, inode, size, mtime, ctime).
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)  # a FIFO must not block
    except OSError:
        try:
            st = path.stat()
        except OSError:
            return None  # a dangling link: not a file the model can read either
        return (st.st_size, "unreadable") if stat.S_ISREG(st.st_mode) else None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        memo = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if memo not in _digests:
            _digests[memo] = _digest(fd, path.name, st.st_size)
        return st.st_size, _digests[memo]
    except OSError:
        return st.st_size, "unreadable"
    finally:
        os.close(fd)


def _digest(fd: int, name: str, size: int) -> str:
    digest = hashlib.sha256()
    whole = (
        WHOLE_FILE_BYTES if name not in _WHOLE_NAMES else max(WHOLE_FILE_BYTES, MAX_TOKENIZER_BYTES)
    )
    if size <= whole:
        digest.update(b"whole\0")
        offset = 0
        while offset <= whole:  # a file that grows while read stops at the bound
            chunk = os.pread(fd, MB, offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
        return digest.hexdigest()
    digest.update(b"sampled\0%d\0" % size)
    head = os.pread(fd, HEAD_BYTES, 0)
    if name.endswith(".safetensors") and len(head) >= 8:
        length = 8 + int.from_bytes(head[:8], "little")
        if len(head) < length <= min(size, 8 + MAX_SAFETENSORS_HEADER):
            head += os.pread(fd, length - len(head), len(head))
    digest.update(head)
    for i in range(SAMPLES):
        digest.update(os.pread(fd, SAMPLE_BYTES, (size - SAMPLE_BYTES) * i // (SAMPLES - 1)))
    return digest.hexdigest()


# --- converted tokenizers -------------------------------------------------------------------

TOKENIZERS = "tokenizers"  # subfolder for tokenizers that transformers had to convert
_TOKENIZER = re.compile(r"[0-9a-f]{64}\.json")
_TEMP_TOKENIZER = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")
_TOKENIZER_MAC = b"attnviz-mac "  # the file's first line: this, the hex HMAC, a newline


def tokenizer_path(folder: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the tokenizer.json converted for a model folder without one is kept.

    Keyed like the attentions on the content of the folder's files and the attnviz
    version, so a later run reads it with the `tokenizers` library alone instead of
    importing transformers. Raises OSError only if `folder` cannot be listed.
    """

    material = {"format": FORMAT, "version": release.__version__, "files": _model_files(folder)}
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode("ascii")).hexdigest()
    return cache_dir(environ) / TOKENIZERS / f"{digest}.json"


# A converted tokenizer.json larger than this is not kept (real ones are 0.5 to 20 MB).
MAX_TOKENIZER_BYTES = 64 * MB


def _tokenizer_mac(secret: bytes, name: str, data: bytes) -> bytes:
    mac = hmac.new(secret, b"attnviz tokenizer\0%d\0" % FORMAT, hashlib.sha256)
    mac.update(name.encode("ascii", "replace") + b"\0")
    mac.update(data)
    return mac.hexdigest().encode("ascii")


def load_tokenizer_json(path: Path) -> str | None:
    """The converted tokenizer kept as `path`'s name in the cache, or None; a use for the LRU.

    Only a regular file (never through a link) whose HMAC checks out: another is a miss.
    """
    name = path.name
    with _folder(create=False) as top:
        secret = _checked_secret(top, create=False) if top is not None else None
        if top is None or secret is None:
            return None
        with _subfolder(top, TOKENIZERS, create=False) as fd:
            if fd is None:
                return None
            try:
                with os.fdopen(_open_regular(name, fd), "rb") as handle:
                    data = handle.read(len(_TOKENIZER_MAC) + 65 + MAX_TOKENIZER_BYTES + 1)
                    first, _, body = data.partition(b"\n")
                    mac = first.removeprefix(_TOKENIZER_MAC)
                    if len(body) > MAX_TOKENIZER_BYTES or not hmac.compare_digest(
                        mac, _tokenizer_mac(secret, name, body)
                    ):
                        return None
                    _touch(handle.fileno())
                return body.decode("utf-8")
            except (OSError, ValueError):
                return None


def store_tokenizer_json(path: Path, text: str) -> None:
    """Keep a converted tokenizer as `path`'s name in the cache, counted in the cache's
    size, signed like an entry; a failure only warns."""
    name = path.name
    data = text.encode("utf-8")
    with _folder(create=True) as top:
        secret = _checked_secret(top, create=True) if top is not None else None
        if top is None or secret is None:
            return
        mac = _tokenizer_mac(secret, name, data)
        with _subfolder(top, TOKENIZERS, create=True) as fd:
            if fd is None:
                return
            try:
                _write_at(fd, name, lambda out: out.write(_TOKENIZER_MAC + mac + b"\n" + data))
            except OSError as exc:
                _unusable(cache_dir() / TOKENIZERS, exc.strerror or exc)
                return
    _evict(limit_bytes(), keep=(TOKENIZERS, name))


# --- reading and writing inside the folder, never through a link ----------------------------


def _entry_name(key: str) -> str:
    name = f"{key}.npz"
    if not _ENTRY.fullmatch(name):
        raise ValueError(f"not a cache key: {key!r}")
    return name


def _touch(fd: int) -> None:
    """Mark the open file as just used (a fine-grained clock, so the LRU order has no ties)."""
    now = time.time_ns()
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(fd, ns=(now, now))


def _open_regular(name: str | Path, dir_fd: int | None = None) -> int:
    """A read-only descriptor of `name` when it is a regular file (not a link, FIFO or device).

    Opened without blocking and without following a link (relative to `dir_fd`), then
    checked with fstat: a FIFO planted as an entry would otherwise block the read
    forever. A link is a ValueError.
    """
    flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
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


def _write_at(fd: int, name: str, write: Callable[[IO[bytes]], object]) -> None:
    """Write `name` in the folder `fd` atomically: a new temp file (O_EXCL, no link
    followed) renamed over it; a failure leaves nothing. Private (0600) unless shared."""
    mode = (0o666 & ~_umask()) if shared() else 0o600
    temp = f".{name}.attnviz-{os.getpid()}-{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    out = os.open(temp, flags, 0o600, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            _touch(handle.fileno())
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)  # replaces a link, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mac(secret: bytes, key: str, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """HMAC-SHA256 of the key and every array (name, dtype, shape, bytes), as (32,) uint8."""
    mac = hmac.new(secret, b"attnviz entry\0%d\0%s\0" % (FORMAT, key.encode("ascii")), "sha256")
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        mac.update(f"{name}\0{array.dtype.str}\0{array.shape}\0{array.nbytes}\0".encode())
        mac.update(array.reshape(-1).view(np.uint8).data)
    return np.frombuffer(mac.digest(), dtype=np.uint8)


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


class Forged(ValueError):
    """An entry whose HMAC does not check out."""


def _read(
    fd: int, key: str, secret: bytes, expect: tuple[int, int, int] | None = None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The (attentions, ids, arrays of PIECES) in the entry for `key` in the folder `fd`.

    ValueError if it is not well formed, `Forged` if its HMAC is not the one `secret`
    gives for `key` and its arrays (checked before anything is shown). `expect` is
    (layers, heads, pieces): an entry of another shape is refused from its header. The
    weights are checked as attention: finite, in 0..1, rows summing to 1. The arrays of
    PIECES (if there are) come in the dict, their headers checked for size.
    """
    name = _entry_name(key)
    with os.fdopen(_open_regular(name, fd), "rb") as handle, zipfile.ZipFile(handle) as archive:
        names = {n.removesuffix(".npy") for n in archive.namelist()}
        if not {"attentions", "ids", "mac"} <= names:
            raise ValueError("the arrays 'attentions', 'ids' and 'mac' are not all there")
        unknown = names - {"attentions", "ids", "mac", *PIECES}
        if unknown:
            raise ValueError(f"it holds arrays attnviz never writes: {', '.join(sorted(unknown))}")
        mac = _member(archive, "mac", (32,))
        L, H, T = expect if expect is not None else (None, None, None)
        ids = _member(archive, "ids", (T,) if T is not None else None)  # (T,)
        if ids.ndim != 1:
            raise ValueError(f"ids are {ids.dtype} {ids.shape}")
        T = ids.shape[0]
        want = (L, H, T, T) if L is not None and H is not None else None
        attentions = _member(archive, "attentions", want)  # (L, H, T, T)
        arrays = {n: _member(archive, n, None) for n in PIECES if n in names}
        signed = {"attentions": attentions, "ids": ids, **arrays}
        if mac.dtype != np.uint8 or not hmac.compare_digest(
            mac.tobytes(), _mac(secret, key, signed).tobytes()
        ):
            raise Forged("its integrity check failed: written by someone else, or changed since")
        _touch(handle.fileno())
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


def _lookup(
    key: str, expect: tuple[int, int, int] | None
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """`_read` of the entry for `key` in the checked folder, or None on a miss; a bad
    entry (unreadable, malformed, forged, a link, a FIFO) is removed with a warning."""
    name = _entry_name(key)
    with _folder(create=False) as fd:
        if fd is None:
            return None
        secret = _checked_secret(fd, create=False)
        if secret is None:
            return None  # no secret: nothing here can have been written by us
        try:
            return _read(fd, key, secret, expect)
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
        pieces = _pieces_from(arrays, ids, text, pair)
    except ValueError as exc:
        discard(key, str(exc))
        return None
    return attentions, pieces


def discard(key: str, reason: str) -> None:
    """Remove the entry for `key`, which its reader found unfit, with a warning."""
    name = _entry_name(key)
    warn(f"cached attentions {cache_dir() / name} are unfit ({reason}); discarded, computing again")
    with _folder(create=False) as fd:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)  # a link itself, never what it points to


def _discard(fd: int, name: str, exc: Exception) -> None:
    reason = getattr(exc, "strerror", None) or exc
    if "pickle" in str(reason):  # numpy's advice (allow_pickle) is not for us
        reason = "not an .npz archive of arrays"
    warn(
        f"cached attentions {cache_dir() / name} are unreadable ({reason}); "
        "discarded, computing again"
    )
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=fd)  # a link itself, never what it points to


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
    name = _entry_name(key)
    attentions = np.asarray(attentions, dtype=np.float32)  # (L, H, T, T)
    id_array = np.asarray(ids, dtype=np.int64)  # (T,)
    if attentions.ndim != 4 or id_array.shape != (attentions.shape[2],):
        raise ValueError(f"attentions {attentions.shape} and ids {id_array.shape} do not fit")
    limit = limit_bytes()
    if attentions.nbytes + id_array.nbytes > limit:
        return
    arrays = {"attentions": attentions, "ids": id_array}
    if pieces is not None:
        arrays.update(_piece_arrays(pieces))
    with _folder(create=True) as fd:
        if fd is None:
            return
        try:
            secret = _checked_secret(fd, create=True)
            if secret is None:
                return
            signed = {**arrays, "mac": _mac(secret, key, arrays)}
            _write_at(fd, name, lambda handle: np.savez(handle, **signed))  # type: ignore[arg-type]
        except OSError as exc:
            _unusable(cache_dir(), exc.strerror or exc)
            return
    _evict(limit, keep=("", name))


# --- what the folder holds: size, eviction, clearing ----------------------------------------


class _File(NamedTuple):
    """One of the cache's own files: an entry (or converted tokenizer), or a temp file."""

    mtime_ns: int
    size: int
    where: str  # "" (the folder) or TOKENIZERS
    name: str
    entry: bool


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
        top = stack.enter_context(_folder(create=False, check=check, environ=environ))
        if top is not None:
            folders[""] = top
            inner = stack.enter_context(
                _subfolder(top, TOKENIZERS, create=False, check=check, environ=environ)
            )
            if inner is not None:
                folders[TOKENIZERS] = inner
        files: list[_File] = []
        for where, fd in folders.items():
            entry, temp = (_ENTRY, _TEMP) if where == "" else (_TOKENIZER, _TEMP_TOKENIZER)
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
                        files.append(_File(st.st_mtime_ns, st.st_size, where, item.name, is_entry))

        def remove(file: _File) -> bool:
            try:
                os.unlink(file.name, dir_fd=folders[file.where])  # a link itself, if one now
            except FileNotFoundError:
                return False  # another attnviz got there first
            return True

        yield files, remove


def _evict(limit: int, *, keep: tuple[str, str]) -> None:
    """Remove least recently used entries until the total fits `limit`, and stale temp files."""
    with _listing(check=True) as (files, remove):
        now = time.time_ns()
        total = 0
        for file in files:
            if not file.entry:
                if now - file.mtime_ns > STALE_TEMP_S * 1e9:
                    _quietly(remove, file)
            else:
                total += file.size
        kept = None
        for file in sorted((f for f in files if f.entry), key=lambda f: (f.mtime_ns, f.name)):
            if (file.where, file.name) == keep:
                kept = file
                continue
            if total <= limit:
                break
            if _quietly(remove, file):
                total -= file.size
        if total > limit and kept is not None:  # the new entry alone is too big
            _quietly(remove, kept)


def _quietly(remove: Callable[[_File], bool], file: _File) -> bool:
    try:
        return remove(file)
    except OSError as exc:
        _unusable(cache_dir(), exc.strerror or exc)
        return False


def info(environ: Mapping[str, str] | None = None) -> CacheInfo:
    """Where the cache is, how many entries it holds, their bytes, and the bound."""
    entries = total = 0
    with _listing(check=False, environ=environ) as (files, _):
        for file in files:
            if file.entry:
                entries += 1
                total += file.size
    return CacheInfo(cache_dir(environ), entries, total, limit_bytes(environ))


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
            f"({_fix(folder, problem)}, or set {SHARED_ENV}=1 if you trust everyone who "
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
    with _folder(create=False, check=False, environ=environ) as fd:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(SECRET, dir_fd=fd)  # a link itself, never what it points to
    return removed, freed

"""Rendered views, replayed: a cached `attnviz show` prints what the same command printed
before, without importing numpy, typer or rich.

A memo is one file `views/<key>` in the cache's folder. Its key is a SHA-256 over what can
change what the command prints: attnviz's version, the interpreter, the arguments, the
working folder, the whole environment (but `_`, `OLDPWD`, `SHLVL`), which of stdin, stdout
and stderr are terminals and their sizes. It holds an HMAC (the cache's secret) over a JSON
header, the files the view was drawn from as they were (path, device, inode, size, mtime,
ctime: the model's folder and the files the attention key fingerprints, the attention
entry, a GGUF file converted), every `sys.path` folder (an install or uninstall changes
one) and attnviz's own source files, then the exact bytes printed on stdout.

It is replayed only when all of that still matches exactly; anything else (no memo, a
changed or missing file, a bad HMAC, an oversized or odd file) falls through silently to
the normal run, which may write the memo again. Only `show` with TEXT and the options
`SAFE_VALUED`/`SAFE_FLAGS` is memoised (no --out, --load, --debug, --no-cache, stdin), only
a run that read its attentions from the cache and exited 0. What it printed on stderr (a
note: the text fits the vocabulary badly, a truncation) is kept and replayed too, in the
order it came; a run that printed a warning (the cache's state, not the view's) is not
memoised.

Only the standard library is imported at module level; the cache's own modules used here
import nothing heavier.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

FORMAT = 2  # bump when the memo's layout or key changes
_DOMAIN = b"attnviz view\0%d\0" % FORMAT
_LEFT_OUT_ENV = frozenset(("_", "OLDPWD", "SHLVL"))

# `show`'s options a memo may be made for: none writes or reads a file, none reads stdin.
SAFE_VALUED = frozenset(
    ("--layer", "-l", "--head", "--units", "-u", "--model", "-m", "--query", "--exclude", "-x",
     "--pair", "--mask", "--max-tokens", "--dtype", "--lang")
)  # fmt: skip
SAFE_FLAGS = frozenset(("--json", "--truncate", "--no-bos", "--quiet", "-q"))

# What this run drew from (filled by the cache as it reads; see `used`, `drew_from_entry`).
_used: list[str] = []
_state: dict[str, Any] = {
    "hit": False, "shown": False, "replayed": False, "stdout": None, "stderr": None,
}  # fmt: skip


def used(path: str) -> None:
    """Record that this run's view depends on the file at `path` (a model file fingerprinted)."""
    _used.append(os.path.abspath(path))


def drew_from_entry(path: str) -> None:
    """Record that this run's attentions came from the cache entry at `path`."""
    _used.append(os.path.abspath(path))
    _state["hit"] = True


def shown() -> None:
    """`show` drew its view on stdout: this run may be memoised."""
    _state["shown"] = True


def eligible(argv: Sequence[str]) -> bool:
    """Whether `argv` is an `attnviz show TEXT [options]` that a memo may stand for."""
    if len(argv) < 3 or argv[1] != "show":
        return False
    texts = 0
    args = iter(argv[2:])
    for arg in args:
        if arg in SAFE_FLAGS:
            continue
        if arg in SAFE_VALUED:
            value = next(args, None)
            if value is None or (value.startswith("-") and not value.lstrip("-").isdigit()):
                return False
            continue
        if arg.startswith("-") or not arg:
            return False  # another option (--out, --load, --debug, ...), '--', '-', '--x=y'
        texts += 1
    return texts == 1


def memo_key(argv: Sequence[str]) -> str | None:
    """The memo's key for this process and `argv`, or None if it cannot be made."""
    from attnviz.version import __version__

    ttys = []
    for fd in (0, 1, 2):
        tty = os.isatty(fd)
        size = None
        if tty:
            try:
                size = list(os.get_terminal_size(fd))
            except OSError:
                return None
        ttys.append([tty, size])
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    material = {
        "format": FORMAT,
        "version": __version__,
        "executable": sys.executable,
        "interpreter": [list(getattr(sys, "orig_argv", [])), list(sys.flags)],  # -X utf8, -I
        "stdout": [getattr(sys.stdout, "encoding", None), getattr(sys.stdout, "errors", None)],
        "argv": list(argv[1:]),
        "cwd": cwd,
        "env": sorted([k, v] for k, v in os.environ.items() if k not in _LEFT_OUT_ENV),
        "ttys": ttys,
    }
    blob = json.dumps(material, sort_keys=True)  # ASCII: lone surrogates are escaped
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _stat(path: str) -> list[Any]:
    """[path, device, inode, size, mtime, ctime] of `path` (a link followed); [path] if none."""
    try:
        st = os.stat(path)
    except OSError:
        return [path]
    return [path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _package() -> list[Any]:
    """attnviz's own source: its folder, the newest mtime of its folders and .py files, and
    how many there are (an edit, a file added or removed changes it)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest = count = 0
    folders = [root]
    while folders:
        folder = folders.pop()
        newest = max(newest, os.stat(folder).st_mtime_ns)
        with os.scandir(folder) as items:
            for item in items:
                if item.name == "__pycache__":
                    continue
                if item.is_dir(follow_symlinks=False):
                    folders.append(item.path)
                elif item.name.endswith(".py"):
                    newest = max(newest, item.stat(follow_symlinks=False).st_mtime_ns)
                    count += 1
    return [root, newest, count]


def _environment() -> dict[str, Any]:
    """What of the installation the memo depends on: `sys.path` and attnviz's source."""
    return {"path": [_stat(p or ".") for p in sys.path], "package": _package()}


def _mac(secret: bytes, key: str, body: bytes) -> str:
    return hmac.new(secret, _DOMAIN + key.encode("ascii") + b"\0" + body, "sha256").hexdigest()


def _read(key: str) -> list[tuple[int, bytes]] | None:
    """What the memo for `key` printed, (stream 1 or 2, bytes) in order, if it is sound and
    everything it depends on is as it was; else None."""
    from attnviz.cache.files import open_regular, touch
    from attnviz.cache.folder import open_folder, open_subfolder
    from attnviz.cache.names import VIEWS
    from attnviz.cache.secret import checked_secret
    from attnviz.limits import MAX_VIEW_BYTES

    with open_folder(create=False) as top:
        if top is None:
            return None
        secret = checked_secret(top, create=False)
        if secret is None:
            return None
        with open_subfolder(top, VIEWS, create=False) as fd:
            if fd is None:
                return None
            try:
                handle = open_regular(key, fd)
            except (OSError, ValueError):
                return None
            with os.fdopen(handle, "rb") as file:
                if os.fstat(file.fileno()).st_size > MAX_VIEW_BYTES:
                    return None
                data = file.read(MAX_VIEW_BYTES + 1)
                mac, _, body = data.partition(b"\n")
                if len(data) > MAX_VIEW_BYTES or not hmac.compare_digest(
                    mac, _mac(secret, key, body).encode("ascii")
                ):
                    return None
                line, newline, printed = body.partition(b"\n")
                header = json.loads(line)
                if not newline or not isinstance(header, dict) or header.get("key") != key:
                    return None
                parts = _parts(header.get("parts"), printed)
                if parts is None:
                    return None
                files = header.get("files")
                if not isinstance(files, list) or not files:
                    return None
                if any(not isinstance(f, list) or not f or _stat(f[0]) != f for f in files):
                    return None
                if header.get("environment") != _environment():
                    return None
                touch(file.fileno())  # a use: kept longer when the cache evicts
    return parts


def _parts(listed: object, printed: bytes) -> list[tuple[int, bytes]] | None:
    """`printed` cut as `listed` ([stream, length], ...) says, or None if they disagree."""
    if not isinstance(listed, list):
        return None
    parts, at = [], 0
    for item in listed:
        if not (isinstance(item, list) and len(item) == 2 and item[0] in (1, 2)):
            return None
        size = item[1]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return None
        parts.append((int(item[0]), printed[at : at + size]))
        at += size
    return parts if at == len(printed) else None


def replay(argv: Sequence[str]) -> bool:
    """Print the memo of this `argv` and say True; or False (nothing printed): run it."""
    try:
        if not eligible(argv):
            return False
        from attnviz.cache.settings import cache_enabled

        if not cache_enabled(False):
            return False
        key = memo_key(argv)
        parts = None if key is None else _read(key)
        out = getattr(_state["stdout"] or sys.stdout, "buffer", None)
        err = getattr(_state["stderr"] or sys.stderr, "buffer", None)
        if parts is None or out is None or err is None:
            return False
    except Exception:  # anything odd: the normal run
        return False
    try:
        for stream, data in parts:
            target = out if stream == 1 else err
            target.write(data)
            target.flush()
    except BrokenPipeError:  # as the normal run: quietly, code 141
        with contextlib.suppress(Exception):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None
    _state["replayed"] = True
    return True


class _Tee:
    """A text stream passing everything to `real`, keeping a copy in `log` (shared by
    stdout's and stderr's tees: what they printed, in order, as (stream, text))."""

    def __init__(self, real: Any, stream: int, log: list[tuple[int, str]]) -> None:
        self._real = real
        self._stream = stream
        self._log = log
        self.spoiled = False  # written some other way (its binary buffer): not memoised

    def write(self, text: str) -> int:
        if text:
            self._log.append((self._stream, text))
        return int(self._real.write(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":
            self.spoiled = True
        return getattr(self._real, name)


@contextlib.contextmanager
def recording(argv: Sequence[str]) -> Iterator[None]:
    """Run the command (a `replay` first, within), then memoise what it printed if it may
    be (see the module's doc). stdout and stderr are watched from the start: a warning the
    replay's checks print (once) bars the memo too.

    Never fails the command: a memo that cannot be written is not written."""
    if not eligible(argv):
        yield
        return
    real_out, real_err = sys.stdout, sys.stderr
    log: list[tuple[int, str]] = []
    out, err = _Tee(real_out, 1, log), _Tee(real_err, 2, log)
    sys.stdout, sys.stderr = out, err
    _state["stdout"], _state["stderr"] = real_out, real_err
    code: object = 0
    key = None
    try:
        with contextlib.suppress(Exception):
            from attnviz.cache.settings import cache_enabled

            if cache_enabled(False):
                key = memo_key(argv)
        yield
    except SystemExit as exc:
        code = exc.code
        raise
    except BaseException:
        code = 1
        raise
    finally:
        sys.stdout, sys.stderr = real_out, real_err
        warned = any(stream == 2 and "warning:" in text for stream, text in log)
        clean = not (warned or err.spoiled or out.spoiled or _state["replayed"])
        if key and code in (0, None) and _state["hit"] and _state["shown"] and clean:
            with contextlib.suppress(Exception):
                real_out.flush()
                real_err.flush()
                _write(key, _encoded(log, {1: real_out, 2: real_err}))


def _encoded(log: list[tuple[int, str]], streams: dict[int, Any]) -> list[tuple[int, bytes]]:
    """The log's texts as the bytes each stream wrote them (its encoding and error mode),
    runs on one stream joined."""
    parts: list[tuple[int, bytes]] = []
    for stream, text in log:
        real = streams[stream]
        data = text.encode(real.encoding, real.errors or "strict")
        if parts and parts[-1][0] == stream:
            parts[-1] = (stream, parts[-1][1] + data)
        else:
            parts.append((stream, data))
    return parts


def _write(key: str, parts: list[tuple[int, bytes]]) -> None:
    """Write the memo for `key`, signed, then evict the least recently used."""
    from attnviz.cache.contents import evict
    from attnviz.cache.files import write_at
    from attnviz.cache.folder import open_folder, open_subfolder
    from attnviz.cache.names import VIEWS
    from attnviz.cache.secret import checked_secret
    from attnviz.cache.settings import limit_bytes
    from attnviz.limits import MAX_VIEW_BYTES

    files = [_stat(path) for path in dict.fromkeys(_used)]
    files += [_stat(path) for path in _converted_from(_used)]
    if not files or any(len(f) == 1 for f in files):
        return  # a file gone already: nothing to check a replay against
    header = {
        "key": key,
        "files": files,
        "environment": _environment(),
        "parts": [[stream, len(data)] for stream, data in parts],
    }
    printed = b"".join(data for _, data in parts)
    body = json.dumps(header, sort_keys=True).encode("ascii") + b"\n" + printed
    with open_folder(create=False) as top:
        if top is None:
            return
        secret = checked_secret(top, create=False)
        if secret is None:
            return
        data = _mac(secret, key, body).encode("ascii") + b"\n" + body
        if len(data) > min(MAX_VIEW_BYTES, limit_bytes()):
            return
        with open_subfolder(top, VIEWS, create=True) as fd:
            if fd is None:
                return
            write_at(fd, key, lambda handle: handle.write(data))
    evict(limit_bytes(), keep=(VIEWS, key))


def _converted_from(paths: Sequence[str]) -> list[str]:
    """The GGUF files the model folders among `paths` were converted from (their
    `gguf.json` says which); a folder whose file cannot be told is a missing file."""
    found = []
    for folder in dict.fromkeys(os.path.dirname(p) for p in paths):
        described = os.path.join(folder, "gguf.json")
        if os.path.exists(described):
            try:
                with open(described, encoding="utf-8") as file:
                    found.append(str(json.load(file)["gguf"]))
            except (OSError, ValueError, KeyError, TypeError):
                found.append(described + "\0unreadable")
    return found

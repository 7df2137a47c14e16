"""Fuzzing the attention cache's folder: hostile states, then what attnviz does in them.

Each example builds a cache folder holding genuine entries, then makes it hostile: its
mode and owner, planted entries (links to a file or a folder outside, dangling links,
FIFOs, folders, hard links, forged archives, entries signed with another secret, random
bytes), a bad secret, a `tokenizers` that is a link or a file; then runs a sequence of
loads, stores, evictions, `info` and `clear`. Whatever the state:

- nothing outside the cache is ever read through a link, changed or removed;
- a load gives the genuine numbers of its key or a miss, never another entry's;
- a folder not to be trusted (owned by someone else, or writable by others, without
  ATTNVIZ_CACHE_SHARED=1) is left exactly as it was;
- every failure is a `warning:` line, or for `clear` one AttnvizError line.

`make test` runs a short, derandomised profile; `make fuzz` the long one
(ATTNVIZ_FUZZ=long, ATTNVIZ_FUZZ_EXAMPLES cases, 400 by default).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnviz.cache import contents, entries, names, notices, tokenizers
from attnviz.cache.arrays import entry_mac
from attnviz.cache.secret import SECRET, SECRET_BYTES
from attnviz.cache.settings import MB, SHARED_ENV
from attnviz.errors import AttnvizError

LONG = os.environ.get("ATTNVIZ_FUZZ") == "long"
EXAMPLES = int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", "400" if LONG else "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
)
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
OTHER_UID = 65534
KEYS = [f"{n:064x}" for n in range(1, 5)]
T = 5

PLANTS = [
    "genuine",
    "forged",  # a valid archive of other numbers, with another entry's mac
    "foreign",  # signed with another secret (another user's cache)
    "link-file",  # -> a file outside
    "link-dir",  # -> a folder outside
    "dangling",
    "fifo",
    "folder",
    "hardlink",  # a second name of a file outside
    "random",
    "empty",
]
SECRETS = ["ok", "missing", "link", "short", "readable", "fifo", "folder", "other-owner"]
TOKENIZERS = ["absent", "ok", "link", "file", "writable", "other-owner"]
MODES = [0o700, 0o750, 0o755, 0o770, 0o775, 0o777, 0o707, 0o1777]
OPS = ["load", "load-analysed", "store", "evict", "info", "clear", "tok-load", "tok-store"]

_STATE = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(MODES),
        "other_owner": st.booleans() if ROOT else st.just(False),
        "shared": st.booleans(),
        "plants": st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(PLANTS)), max_size=5),
        "secret": st.sampled_from(SECRETS),
        "tokenizers": st.sampled_from(TOKENIZERS),
        "ops": st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(KEYS)), max_size=7),
    }
)


def _truth(key: str) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(int(key, 16))
    att = rng.random((2, 2, T, T), dtype=np.float32)  # (L, H, T, T)
    att /= att.sum(-1, keepdims=True)
    return att, list(range(10, 10 + T))  # the same ids for every key: a swap would fit


class _Pieces:
    def __init__(self) -> None:
        self.tokens = [f"t{i}" for i in range(T)]
        self.type_ids = [0] * T
        self.offsets = [(i, i + 1) for i in range(T)]
        self.word_ids: list[int | None] = list(range(T))
        self.sequence_ids: list[int | None] = [0] * T
        self.dropped = 0


def _snapshot(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under `folder`, links not followed: mode, owner and content digest."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st_ = path.lstat()
        if stat.S_ISREG(st_.st_mode):
            data = path.read_bytes()
        elif stat.S_ISLNK(st_.st_mode):
            data = os.fsencode(os.readlink(path))
        else:
            data = b""
        found[str(path)] = (st_.st_mode, st_.st_uid, hashlib.sha256(data).hexdigest())
    return found


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _plant(folder: Path, outside: Path, key: str, kind: str) -> None:
    path = folder / f"{key}.npz"
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if kind == "genuine":
        entries.store(key, *_truth(key), _Pieces())
        return
    att, ids = _truth(key)
    other = np.roll(att, 1, axis=-1)  # still attention, not this key's
    arrays = {"attentions": other, "ids": np.asarray(ids, np.int64)}
    if kind == "forged":
        np.savez(path, **arrays, mac=entry_mac(b"\0" * 32, KEYS[0], arrays))
    elif kind == "foreign":
        np.savez(path, **arrays, mac=entry_mac(os.urandom(32), key, arrays))
    elif kind == "link-file":
        path.symlink_to(outside / "passwd")
    elif kind == "link-dir":
        path.symlink_to(outside)
    elif kind == "dangling":
        path.symlink_to(outside / "nothing-here")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "hardlink":
        os.link(outside / "passwd", path)
    elif kind == "random":
        path.write_bytes(os.urandom(300))
    else:
        path.write_bytes(b"")


def _make_secret(folder: Path, outside: Path, how: str) -> None:
    secret = folder / SECRET
    if how == "ok":
        return
    if secret.exists() or secret.is_symlink():
        secret.unlink()
    if how == "link":
        secret.symlink_to(outside / "passwd")
    elif how == "short":
        secret.write_bytes(b"1234")
    elif how == "readable":
        secret.write_bytes(os.urandom(SECRET_BYTES))
        secret.chmod(0o644)
    elif how == "fifo":
        os.mkfifo(secret)
    elif how == "folder":
        secret.mkdir()
    elif how == "other-owner" and ROOT:
        secret.write_bytes(os.urandom(SECRET_BYTES))
        secret.chmod(0o600)
        os.chown(secret, OTHER_UID, -1)


def _make_tokenizers(folder: Path, outside: Path, how: str) -> None:
    sub = folder / names.TOKENIZERS
    if how == "absent":
        return
    if how == "link":
        sub.symlink_to(outside)
    elif how == "file":
        sub.write_text("a file where the folder goes")
    else:
        sub.mkdir(mode=0o700)
        (sub / ("cd" * 32 + ".json")).write_text('{"model": "planted, unsigned"}')
        if how == "writable":
            sub.chmod(0o777)
        elif how == "other-owner" and ROOT:
            os.chown(sub, OTHER_UID, -1)


def _untrusted(state: dict) -> bool:
    if state["shared"]:
        return False
    return bool(state["mode"] & 0o022) or state["other_owner"]


@FUZZ
@given(state=_STATE)
def test_a_hostile_cache_folder_harms_nothing_and_shows_nothing_forged(state: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="attnviz-fuzz-cache-") as tmp:
        root = Path(tmp)
        folder, outside = root / "cache", root / "outside"
        outside.mkdir()
        (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
        (outside / ("cd" * 32 + ".json")).write_text("the user's own, named like a tokenizer")
        (outside / f"{KEYS[0]}.npz").write_bytes(b"the user's own, named like an entry")
        env = {
            "ATTNVIZ_CACHE_DIR": str(folder),
            "ATTNVIZ_CACHE_MB": None,
            "ATTNVIZ_NO_CACHE": None,
            SHARED_ENV: None,
        }
        with _environment(**env):
            notices.warned.clear()
            entries.store(KEYS[-1], *_truth(KEYS[-1]), _Pieces())  # a genuine one, and the secret
            for key, kind in state["plants"]:
                _plant(folder, outside, key, kind)
            _make_secret(folder, outside, state["secret"])
            _make_tokenizers(folder, outside, state["tokenizers"])
            folder.chmod(state["mode"])
            if state["other_owner"]:
                os.chown(folder, OTHER_UID, -1)
        outside_before = _snapshot(outside)
        folder_before = _snapshot(folder)
        shared = "1" if state["shared"] else None
        stderr = io.StringIO()
        with (
            _environment(**{**env, SHARED_ENV: shared}),
            contextlib.redirect_stderr(stderr),
        ):
            notices.warned.clear()
            for op, key in state["ops"]:
                _run(op, key, folder)
        for line in stderr.getvalue().splitlines():
            assert line.startswith("warning: "), stderr.getvalue()
        assert _snapshot(outside) == outside_before, state
        if _untrusted(state):
            assert _snapshot(folder) == folder_before, state
        if ROOT:
            os.chown(folder, 0, -1)
        folder.chmod(0o700)


def _run(op: str, key: str, folder: Path) -> None:
    att, ids = _truth(key)
    tokenizer = folder / names.TOKENIZERS / ("cd" * 32 + ".json")
    if op == "load":
        got = entries.load(key, expect_ids=ids, expect_shape=(2, 2))
        assert got is None or np.array_equal(got, att), "a forged entry was shown"
    elif op == "load-analysed":
        text = "".join(f"{i}" for i in range(T))
        hit = entries.load_analysed(key, text=text, pair=None, shape=(2, 2))
        assert hit is None or np.array_equal(hit[0], att), "a forged entry was shown"
    elif op == "store":
        entries.store(key, att, ids, _Pieces())
    elif op == "evict":
        with _environment(ATTNVIZ_CACHE_MB=repr(1.5 * 2000 / MB)):
            entries.store(key, att, ids)
    elif op == "info":
        state = contents.info()
        assert state.entries >= 0 and state.bytes >= 0
    elif op == "clear":
        try:
            contents.clear()
        except AttnvizError as exc:
            assert "\n" not in str(exc)
    elif op == "tok-load":
        text = tokenizers.load_tokenizer_json(tokenizer)
        assert text is None or text == '{"model": "ours"}', "a planted tokenizer was read"
    else:
        tokenizers.store_tokenizer_json(tokenizer, '{"model": "ours"}')

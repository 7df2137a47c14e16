"""The cache key: a SHA-256 over everything that changes the numbers, the model by the
*content* of its folder's files.

A small file, the config and the tokenizer files are hashed whole; a weight file by its
size, its head (a safetensors header whole) and 16 samples spread over it. A weight file
rewritten with the same size and its old mtime restored is a new key.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from attnviz import version as release
from attnviz.cache import views
from attnviz.cache.files import CLOEXEC, NONBLOCK
from attnviz.cache.names import MANIFEST
from attnviz.cache.settings import MB

FORMAT = 3  # bump when the entry layout or the key changes; part of every key (3: mac, content)

# How a model file is fingerprinted for the key (see `_fingerprint`).
WHOLE_FILE_BYTES = 4 * MB  # a file up to this size is hashed whole
SAMPLES = 16  # a bigger one: its head (a safetensors header whole), then 16 slices
SAMPLE_BYTES = 64 * 1024  # of 64 KiB, the first at its start and the last at its end
HEAD_BYTES = MB
MAX_SAFETENSORS_HEADER = 100 * MB  # the format's own bound
# A converted tokenizer.json larger than this is not kept (real ones are 0.5 to 20 MB);
# the files below are hashed whole up to this size whatever their size: what the tokenizer reads.
MAX_TOKENIZER_BYTES = 64 * MB
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

_digests: dict[tuple[str, int, int, int, int, int], str] = {}  # _fingerprint's, this process


def cache_key(
    folder: Path,
    *,
    text: str,
    pair: str | None,
    causal: bool,
    dtype: str,
    truncate: bool,
    max_tokens: int | None = None,
    bos: bool = False,
    engine: str = "attnviz",
) -> str:
    """A hex digest of everything that changes the attentions of `text` under the model in `folder`.

    The model is fingerprinted by the content of every non-hidden regular file directly
    in `folder` (symlinks followed, as in a Hub snapshot): see `_fingerprint`. Two
    folders with the same files share their entries.
    `engine` is what computes the weights ("attnviz", or "transformers", whose version is
    then part of the key too).
    Raises OSError only if `folder` cannot be listed.
    """

    material = {
        "format": FORMAT,
        "version": release.__version__,  # read at call time: a new version never serves old numbers
        "files": model_files(folder),
        "text": text,
        "pair": pair,
        "causal": causal,
        "dtype": dtype,
        "truncate": truncate,
        "max_tokens": max_tokens,  # the bound asked for (None: the model's), which can cut
        "bos": bos,  # a decoder read with its start token in front (see pipeline.prepare)
        "engine": engine,  # attnviz's own modules or transformers' eager model
    }
    if engine != "attnviz":
        from importlib.metadata import version

        material["engine_version"] = version(engine)
    blob = json.dumps(material, sort_keys=True)  # ASCII: lone surrogates in argv are fine
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def model_files(folder: Path) -> list[list[str | int]]:
    """Name, size and content digest of every non-hidden regular file in `folder`.

    A converted GGUF folder's manifest is left out: it is signed again when the weights are
    kept (after the first run's entry was keyed), and says nothing the files themselves do not.
    """
    files: list[list[str | int]] = []
    views.used(str(folder))  # a file added or removed changes the folder's mtime
    for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name == MANIFEST:
            continue
        found = _fingerprint(entry)
        if found is not None:
            files.append([entry.name, *found])
            views.used(str(entry))  # a memoised view depends on it
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
        fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC)  # a FIFO must not block
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

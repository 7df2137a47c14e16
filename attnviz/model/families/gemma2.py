"""Gemma 2: Llama with four norms a layer (gains of 1 + weight), scaled embeddings, soft-capping."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from attnviz.model.families.llama import GGUF_BLOCK as LLAMA_BLOCK
from attnviz.model.families.llama import LLAMA
from attnviz.model.families.llama import NAMES as LLAMA_NAMES

if TYPE_CHECKING:
    import numpy as np

# Gemma's post_attention_layernorm normalises the attention's output (Llama's the
# feed-forward's input, which Gemma calls pre_feedforward_layernorm).
NAMES = [
    *(pair for pair in LLAMA_NAMES if "post_attention_layernorm" not in pair[0]),
    ("layers.{i}.post_attention_layernorm.", "layers.{i}.attention_out_norm."),
    ("layers.{i}.pre_feedforward_layernorm.", "layers.{i}.norm2."),
    ("layers.{i}.post_feedforward_layernorm.", "layers.{i}.ff_out_norm."),
]
# Four norms a layer: before and after attention, before and after the MLP.
GGUF_BLOCK = {
    **LLAMA_BLOCK,
    "ffn_norm": "pre_feedforward_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}


def gguf_undo(gguf_name: str, values: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """llama.cpp's converter stores every RMSNorm weight as 1 + w (Gemma computes x * (1 + w));
    take the 1 off, as transformers' loader does."""
    return values - 1.0 if gguf_name.endswith("norm.weight") else values


GEMMA2 = replace(
    LLAMA,
    name="Gemma 2",
    names=NAMES,
    ignored=r"^(rotary_emb\.)",
    class_name="Gemma2ForCausalLM",
    gguf_block=GGUF_BLOCK,
    gguf_undo=gguf_undo,
    output_norm="attention_out_norm",
)

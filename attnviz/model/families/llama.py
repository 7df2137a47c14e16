"""Llama: rotary positions, RMSNorm, a SwiGLU feed-forward; the parent of the decoders here."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from attnviz.model.families.kinds import DecoderFamily
from attnviz.model.gguf.metadata import BadGguf

if TYPE_CHECKING:
    import numpy as np

NAMES = [
    ("embed_tokens.", "tokens."),
    ("layers.{i}.input_layernorm.", "layers.{i}.norm1."),
    ("layers.{i}.self_attn.q_proj.", "layers.{i}.attention.q_proj."),
    ("layers.{i}.self_attn.k_proj.", "layers.{i}.attention.k_proj."),
    ("layers.{i}.self_attn.v_proj.", "layers.{i}.attention.v_proj."),
    ("layers.{i}.self_attn.o_proj.", "layers.{i}.attention.out_proj."),
    ("layers.{i}.self_attn.q_norm.", "layers.{i}.attention.q_norm."),  # Qwen3
    ("layers.{i}.self_attn.k_norm.", "layers.{i}.attention.k_norm."),
    ("layers.{i}.post_attention_layernorm.", "layers.{i}.norm2."),
    ("layers.{i}.mlp.gate_proj.", "layers.{i}.ff_gate."),
    ("layers.{i}.mlp.up_proj.", "layers.{i}.ff_in."),
    ("layers.{i}.mlp.down_proj.", "layers.{i}.ff_out."),
    ("norm.", "final_norm."),
]
IGNORED = r"^(rotary_emb\.|layers\.\d+\.self_attn\.rotary_emb\.)"
# A GGUF tensor's name inside a block -> transformers' name inside `model.layers.N.`
GGUF_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GGUF_TOP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def gguf_undo(gguf_name: str, values: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """Q and K as transformers holds them: llama.cpp's converter reorders their rows within
    each head (from rotating halves to rotating pairs); put them back."""
    if not re.search(r"\.attn_[qk]\.(weight|bias)$", gguf_name):
        return values
    heads = config["num_attention_heads"]
    if ".attn_k." in gguf_name:
        heads = config["num_key_value_heads"]
    rows = values.shape[0]
    if rows % (2 * heads):
        raise BadGguf(f"{gguf_name} has {rows} rows, not two per rotary pair of {heads} heads")
    # (heads, 2, hs/2, C) stored as (heads, hs/2, 2, C): swap the two middle axes back
    paired = values.reshape(heads, rows // heads // 2, 2, *values.shape[1:])
    return paired.swapaxes(1, 2).reshape(values.shape)


LLAMA = DecoderFamily(
    "Llama",
    "model.",
    NAMES,
    IGNORED,
    class_name="LlamaForCausalLM",
    gguf_block=GGUF_BLOCK,
    gguf_top=GGUF_TOP,
    gguf_undo=gguf_undo,
)

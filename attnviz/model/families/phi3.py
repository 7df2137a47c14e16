"""Phi-3: Llama with q, k, v fused in qkv_proj and gate, up in gate_up_proj."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.llama import LLAMA

# Phi-3 keeps q, k and v in one qkv_proj, and the MLP's gate and up in one gate_up_proj.
GGUF_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_qkv": "self_attn.qkv_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_up": "mlp.gate_up_proj",
    "ffn_down": "mlp.down_proj",
}
PHI3 = replace(LLAMA, name="Phi-3", class_name="Phi3ForCausalLM", gguf_block=GGUF_BLOCK)

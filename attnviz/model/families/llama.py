"""Llama: rotary positions, RMSNorm, a SwiGLU feed-forward; the parent of the decoders here."""

from __future__ import annotations

from attnviz.model.families.kinds import DecoderFamily

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
LLAMA = DecoderFamily(
    "Llama", "model.", NAMES, IGNORED, class_name="LlamaForCausalLM", gguf_block=GGUF_BLOCK
)

"""GPT-2: learned positions, LayerNorm, Conv1D weights and one fused c_attn."""

from __future__ import annotations

from attnviz.model.families.kinds import DecoderFamily

# Checkpoint names -> this project's, `{i}` a layer number. The fused c_attn is split into
# q, k, v (and the Conv1D weights transposed) by attnviz.model.weights before renaming.
NAMES = [
    ("wte.", "tokens."),
    ("wpe.", "positions."),
    ("h.{i}.ln_1.", "layers.{i}.norm1."),
    ("h.{i}.attn.q_attn.", "layers.{i}.attention.q_proj."),
    ("h.{i}.attn.k_attn.", "layers.{i}.attention.k_proj."),
    ("h.{i}.attn.v_attn.", "layers.{i}.attention.v_proj."),
    ("h.{i}.attn.c_proj.", "layers.{i}.attention.out_proj."),
    ("h.{i}.ln_2.", "layers.{i}.norm2."),
    ("h.{i}.mlp.c_fc.", "layers.{i}.ff_in."),
    ("h.{i}.mlp.c_proj.", "layers.{i}.ff_out."),
    ("ln_f.", "final_norm."),
]
GGUF_BLOCK = {
    "attn_norm": "ln_1",
    "attn_qkv": "attn.c_attn",
    "attn_output": "attn.c_proj",
    "ffn_norm": "ln_2",
    "ffn_up": "mlp.c_fc",
    "ffn_down": "mlp.c_proj",
}
GPT2 = DecoderFamily(
    "GPT-2",
    "transformer.",
    NAMES,
    r"^(h\.\d+\.attn\.(bias|masked_bias)$)",
    class_name="GPT2LMHeadModel",
    gguf_block=GGUF_BLOCK,
)

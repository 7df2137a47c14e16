"""GPT-2: learned positions, LayerNorm, Conv1D weights and one fused c_attn."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import DecoderConfig, check_activation
from attnviz.model.families.kinds import DecoderFamily
from attnviz.model.families.reader import DecoderReader

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
# GPT-2 keeps its linear layers as Conv1D, weight (in, out): the transpose of nn.Linear's;
# and q, k, v in one c_attn of 3C outputs, split here into the three projections.
CONV1D = r"^h\.\d+\.(attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$"
FUSED = r"^(h\.\d+\.attn\.)c_attn\.(weight|bias)$"


def split(name: str, value: Any, decoder: DecoderConfig | None = None) -> list[tuple[str, Any]]:
    """One GPT-2 entry as nn.Linear entries: c_attn split in three, Conv1D weights transposed.

    `value` is a tensor, a shape (a list, for counting parameters) or a name (for messages).
    """
    fused = re.match(FUSED, name)
    if fused:
        prefix, kind = fused[1], fused[2]
        return [
            (f"{prefix}{part}_attn.{kind}", _third(value, i, kind == "weight"))
            for i, part in enumerate("qkv")
        ]
    if re.match(CONV1D, name):
        return [(name, _transposed(value))]
    return [(name, value)]


def _transposed(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return type(value)(reversed(value))
    return value.t() if value.ndim == 2 else value


def _third(value: Any, i: int, weight: bool) -> Any:
    """Part i of q, k, v in c_attn (weight (C, 3C) -> (C, C) rows; bias (3C,) -> (C,))."""
    if isinstance(value, str):
        return value
    if weight:
        value = _transposed(value)  # (3C, C)
    if isinstance(value, list | tuple):
        return type(value)([value[0] // 3, *value[1:]])
    rows = value.shape[0] // 3
    return value[i * rows : (i + 1) * rows]


def stored_name(hf: str) -> str:
    """The checkpoint's name of a q, k or v projection: one c_attn holds all three."""
    return re.sub(r"\.[qkv]_attn\.", ".c_attn.", hf)


def stored_shape(
    key: str, ours: tuple[int, ...], decoder: DecoderConfig | None = None
) -> tuple[int, ...]:
    """The shape stored for `key`: c_attn fused and every Conv1D weight transposed."""
    if key.endswith("c_attn.weight") and len(ours) == 2:
        return (ours[1], 3 * ours[0])  # Conv1D (in, out) of q, k and v side by side
    if key.endswith("c_attn.bias") and len(ours) == 1:
        return (3 * ours[0],)
    if re.search(CONV1D, key.split("transformer.", 1)[-1]):
        return ours[::-1]
    return ours


GGUF_TOP = {
    "token_embd.weight": "transformer.wte.weight",
    "position_embd.weight": "transformer.wpe.weight",
    "output_norm.weight": "transformer.ln_f.weight",
    "output_norm.bias": "transformer.ln_f.bias",
    "output.weight": "lm_head.weight",
}
# GPT-2 keeps these as Conv1D, (in, out): GGUF stores them (out, in), as nn.Linear does.
GGUF_TRANSPOSED = ("attn_qkv", "attn_output", "ffn_up", "ffn_down")


def gguf_undo(gguf_name: str, values: Any, config: dict[str, Any]) -> Any:
    """A Conv1D weight as transformers holds it: (out, in) -> (in, out)."""
    found = re.fullmatch(r"blk\.\d+\.(\w+)\.weight", gguf_name)
    return values.T.copy() if found and found[1] in GGUF_TRANSPOSED else values


class Gpt2Reader(DecoderReader):
    """GPT-2's config.json: its own keys (n_embd, n_layer, ...), or the names transformers
    also accepts for them."""

    defaults: ClassVar[dict[str, Any]] = {
        "vocab_size": 50257,
        "n_positions": 1024,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
    }
    aliases: ClassVar[dict[str, str]] = {
        "n_embd": "hidden_size",
        "n_layer": "num_hidden_layers",
        "n_head": "num_attention_heads",
        "n_positions": "max_position_embeddings",
    }

    def read(self) -> DecoderConfig:
        raw, where = self.raw, self.where
        layers = self.size("n_layer", 12, "layers")
        heads = self.size("n_head", 12, "heads")
        hidden = self.size("n_embd", 768, "hidden")
        if hidden % heads:
            raise AttnvizError(
                f"{where} has n_embd={hidden}, not divisible by n_head={heads}: the config is "
                "corrupt"
            )
        inner = self.size("n_inner", 4 * hidden, "intermediate")
        act = check_activation(
            raw.get("activation_function", "gelu_new"), "activation_function", where
        )
        eps = self.number("layer_norm_epsilon", 1e-5)
        if not eps < 1:
            raise AttnvizError(f"{where} has layer_norm_epsilon={eps}; expected a small number")
        # reorder_and_upcast_attn computes the same scores in float32: so does attnviz.
        self.flag("reorder_and_upcast_attn", False)
        return DecoderConfig(
            vocab_size=self.size("vocab_size", 50257, "vocab"),
            hidden_size=hidden,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=heads,
            head_size=hidden // heads,
            intermediate_size=inner,
            max_positions=self.size("n_positions", 1024, "positions"),
            norm_eps=eps,
            hidden_act=act,
            qkv_bias=True,
            out_bias=True,
            mlp_bias=True,
            tie_word_embeddings=self.flag("tie_word_embeddings", True),
            scale_attn_weights=self.flag("scale_attn_weights", True),
            scale_by_inverse_layer=self.flag("scale_attn_by_inverse_layer_idx", False),
            learned_positions=True,
            norm="layer",
            gated_mlp=False,
        )


GPT2 = DecoderFamily(
    "GPT-2",
    "transformer.",
    NAMES,
    r"^(h\.\d+\.attn\.(bias|masked_bias)$)",
    Gpt2Reader,
    class_name="GPT2LMHeadModel",
    gguf_block=GGUF_BLOCK,
    gguf_top=GGUF_TOP,
    gguf_layers="transformer.h.",
    gguf_undo=gguf_undo,
    split=split,
    stored_name=stored_name,
    stored_shape=stored_shape,
)

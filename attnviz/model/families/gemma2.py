"""Gemma 2: Llama with four norms a layer (gains of 1 + weight), scaled embeddings, soft-capping."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import DecoderConfig, conflict
from attnviz.model.families.llama import GGUF_BLOCK as LLAMA_BLOCK
from attnviz.model.families.llama import LLAMA, LlamaReader
from attnviz.model.families.llama import NAMES as LLAMA_NAMES
from attnviz.model.rope_config import positive

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


class Gemma2Reader(LlamaReader):
    """Gemma 2's config.json: Llama's, with hidden_activation, tied embeddings, soft-capping
    (50 on the scores and 30 on the logits when left out, none when null), the scale
    query_pre_attn_scalar ** -0.5, and a window in every second layer."""

    defaults: ClassVar[dict[str, Any]] = {
        "vocab_size": 256000,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
        "sliding_window": 4096,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
    }
    activation_key: ClassVar[str] = "hidden_activation"

    def read(self) -> DecoderConfig:
        return replace(
            super().read(),
            softcap=self.softcap(),
            final_softcap=self.final_softcap(),
            query_pre_attn_scalar=self.number("query_pre_attn_scalar", 256),
            rms_offset=True,
            embed_scale=True,
            post_norms=True,
        )

    def mlp_bias(self) -> bool:
        return False

    def softcap(self) -> float | None:
        """attn_logit_softcapping, on the scores."""
        return self.cap("attn_logit_softcapping")

    def final_softcap(self) -> float | None:
        """final_logit_softcapping, on the logits."""
        return self.cap("final_logit_softcapping")

    def cap(self, key: str) -> float | None:
        """A soft-capping: the config's, else the family's default (none when null)."""
        cap = self.raw.get(key, self.defaults.get(key))
        return None if cap is None else positive(cap, key, self.where)

    def windows(self, layers: int) -> tuple[int | None, ...]:
        """A window (sliding_window, 4096 when left out) in the sliding layers: those
        `layer_types` names, else those `sliding_types` counts."""
        types = self.layer_types(layers)
        if self.flag("use_bidirectional_attention", False):
            raise AttnvizError(
                f"{self.where} has use_bidirectional_attention=true (an embedding model that "
                "sees both ways); attnviz computes Gemma as a causal decoder: set it to false"
            )
        types = self.sliding_types(layers, types)
        if "sliding_attention" not in types:
            return ()
        if "sliding_window" in self.raw and self.raw["sliding_window"] is None:
            conflict(self.where, ("layer_types", types), ("sliding_window", None))
        window = self.size("sliding_window", None, "window")
        return tuple(window if t == "sliding_attention" else None for t in types)

    def sliding_types(self, layers: int, types: list[str] | None) -> list[str]:
        """Each layer's kind: `layer_types`, else all but every second layer slide."""
        if types is not None:
            return types
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]


GEMMA2 = replace(
    LLAMA,
    name="Gemma 2",
    reader=Gemma2Reader,
    names=NAMES,
    ignored=r"^(rotary_emb\.)",
    class_name="Gemma2ForCausalLM",
    gguf_block=GGUF_BLOCK,
    gguf_undo=gguf_undo,
    output_norm="attention_out_norm",
)

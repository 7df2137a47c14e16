"""Qwen2: Llama with q, k and v biases and windows from max_window_layers on."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from attnviz.model.config import conflict
from attnviz.model.families.llama import LLAMA, LlamaReader


class Qwen2Reader(LlamaReader):
    """Qwen2's config.json: Llama's, with q, k and v biases always (none on o_proj) and a
    window only with use_sliding_window."""

    defaults: ClassVar[dict[str, Any]] = {
        **LlamaReader.defaults,
        "vocab_size": 151936,
        "intermediate_size": 22016,
        "num_key_value_heads": 32,
        "max_position_embeddings": 32768,
        "sliding_window": 4096,
        "max_window_layers": 28,
    }

    def attention_bias(self) -> tuple[bool, bool]:
        return True, False  # Qwen2's o_proj has no bias

    def mlp_bias(self) -> bool:
        return False

    def windows(self, layers: int) -> tuple[int | None, ...]:
        """As transformers reads them: only with use_sliding_window, in the layers
        `layer_types` names, else from max_window_layers (28 when left out) on."""
        types = self.layer_types(layers)
        if types is not None and "sliding_attention" in types:
            # Sliding layers with no window to slide: transformers 5 fails on them.
            if self.raw.get("sliding_window", 4096) is None:
                conflict(self.where, ("layer_types", types), ("sliding_window", None))
            if not self.flag("use_sliding_window", False):
                conflict(self.where, ("layer_types", types), ("use_sliding_window", False))
        if "sliding_window" in self.raw and self.raw["sliding_window"] is None:
            return ()
        if not self.flag("use_sliding_window", False):
            return ()
        window = self.size("sliding_window", None, "window")
        first = self.size("max_window_layers", layers, "layers", low=0)
        counted = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
        if types is not None and types != counted:
            named = (
                "max_window_layers"
                if "max_window_layers" in self.raw
                else "max_window_layers (default)"
            )
            conflict(self.where, ("layer_types", types), (named, first))
        return tuple(window if t == "sliding_attention" else None for t in counted)


# llama.cpp stores Qwen's Q and K rows as transformers does: nothing to undo.
QWEN2 = replace(
    LLAMA, name="Qwen2", class_name="Qwen2ForCausalLM", gguf_undo=None, reader=Qwen2Reader
)

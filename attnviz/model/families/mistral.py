"""Mistral: Llama with one sliding window in every layer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import shown
from attnviz.model.families.llama import LLAMA, LlamaReader


class MistralReader(LlamaReader):
    """Mistral's config.json: Llama's, with a window (4096 when left out, none when null)."""

    defaults: ClassVar[dict[str, Any]] = {
        **LlamaReader.defaults,
        "intermediate_size": 14336,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
    }

    def attention_bias(self) -> tuple[bool, bool]:
        return False, False  # transformers reads no attention_bias for Mistral

    def mlp_bias(self) -> bool:
        return False

    def windows(self, layers: int) -> tuple[int | None, ...]:
        """One window in every layer: Ministral's alternating layers are refused."""
        if "sliding_window" in self.raw and self.raw["sliding_window"] is None:
            return ()
        window = self.size("sliding_window", None, "window")
        types = self.raw.get("layer_types")  # transformers 5: each layer's kind
        if types is not None and types != ["sliding_attention"] * layers:
            raise AttnvizError(
                f"{self.where} has layer_types={shown(types)}: a Mistral whose layers alternate "
                "between a window and full attention (as Ministral's do), which attnviz does not "
                "compute; it computes Mistral with one window in every layer"
            )
        return (window,) * layers


MISTRAL = replace(LLAMA, name="Mistral", class_name="MistralForCausalLM", reader=MistralReader)

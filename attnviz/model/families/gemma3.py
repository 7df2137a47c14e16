"""Gemma 3: Gemma 2 with QK-norm and a local rotary base for its sliding layers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import conflict, shown, whole
from attnviz.model.families.gemma2 import GEMMA2, Gemma2Reader
from attnviz.model.families.reader import LIMITS
from attnviz.model.rope_config import Rope, read_gemma3_rope


class Gemma3Reader(Gemma2Reader):
    """Gemma 3's config.json: Gemma 2's, with QK-norm, two rotary settings (the sliding
    layers' own), no soft-capping, and a window in all but every `sliding_window_pattern`-th
    layer (6 when left out)."""

    defaults: ClassVar[dict[str, Any]] = {
        **Gemma2Reader.defaults,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
    }
    qk_norm: ClassVar[bool] = True

    def rope(self, head_dim: int) -> tuple[Rope, Rope | None]:
        return read_gemma3_rope(self.raw, self.where)

    def softcap(self) -> float | None:
        """None: transformers 5 stores Gemma 3's attn_logit_softcapping but never applies it
        (nor does Gemma 3's own code set one): rather than guess, a config that sets it is
        refused."""
        cap = self.raw.get("attn_logit_softcapping")
        if cap is None:
            return None
        raise AttnvizError(
            f"{self.where} has attn_logit_softcapping={shown(cap)}; transformers ignores it in "
            "Gemma 3 and Gemma 3 models have none, so attnviz does not guess: set it to null"
        )

    def sliding_types(self, layers: int, types: list[str] | None) -> list[str]:
        """Each layer's kind: `layer_types`, else all but every `sliding_window_pattern`-th
        layer slide; both given must agree."""
        key = "sliding_window_pattern"
        pattern = self.raw.get(key)
        if pattern is not None and not whole(pattern, 1, LIMITS["layers"]):
            raise AttnvizError(
                f"{self.where} has {key}={shown(pattern)}; expected a whole number from 1 to "
                f"{LIMITS['layers']} (every how many layers one sees the whole prefix)"
            )
        every = 6 if pattern is None else pattern
        counted = [
            "sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)
        ]
        if types is None:
            return counted
        if pattern is not None and types != counted:
            conflict(self.where, ("layer_types", types), (key, pattern))
        return types


class Gemma3MultimodalReader(Gemma3Reader):
    """A multimodal Gemma 3's config.json: the language model's settings are its text_config
    (Gemma3TextConfig's defaults when left out); its vision_config is not read, since text
    never passes through the vision tower."""

    def __init__(self, raw: dict[str, Any], where: str, name: str) -> None:
        text = raw.get("text_config")
        kind = text.get("model_type", "gemma3_text") if isinstance(text, dict) else None
        if text is not None and (not isinstance(text, dict) or kind != "gemma3_text"):
            raise AttnvizError(
                f"{where} has text_config={shown(text, 60)}; a Gemma 3 config keeps the "
                "language model's settings there as an object of model_type gemma3_text: the "
                "config is corrupt"
            )
        super().__init__(text or {}, where, name)


GEMMA3 = replace(GEMMA2, name="Gemma 3", class_name="Gemma3ForCausalLM", reader=Gemma3Reader)
# A multimodal Gemma 3 (Gemma3ForConditionalGeneration) keeps its language model under one
# of these (transformers 5, then 4); its vision tower only reads images, so it is left out.
PREFIXES = ("model.language_model.", "language_model.model.")
GEMMA3_MULTIMODAL = replace(GEMMA3, prefixes=PREFIXES, reader=Gemma3MultimodalReader)

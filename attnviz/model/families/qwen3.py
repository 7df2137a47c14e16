"""Qwen3: Qwen2 with an RMSNorm over each head's q and k (QK-norm changes α only)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from attnviz.model.families.llama import LlamaReader
from attnviz.model.families.qwen2 import QWEN2, Qwen2Reader


class Qwen3Reader(Qwen2Reader):
    """Qwen3's config.json: Qwen2's, with QK-norm, a head_dim of its own and attention_bias."""

    defaults: ClassVar[dict[str, Any]] = {**Qwen2Reader.defaults, "head_dim": 128}
    qk_norm: ClassVar[bool] = True

    def attention_bias(self) -> tuple[bool, bool]:
        return LlamaReader.attention_bias(self)  # read, as Llama's is (Qwen2 has them always)


QWEN3 = replace(QWEN2, name="Qwen3", class_name="Qwen3ForCausalLM", reader=Qwen3Reader)

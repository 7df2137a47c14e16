"""Qwen3: Qwen2 with an RMSNorm over each head's q and k (QK-norm changes α only)."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.qwen2 import QWEN2

QWEN3 = replace(QWEN2, name="Qwen3", class_name="Qwen3ForCausalLM")

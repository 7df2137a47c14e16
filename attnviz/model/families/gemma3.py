"""Gemma 3: Gemma 2 with QK-norm and a local rotary base for its sliding layers."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.gemma2 import GEMMA2

GEMMA3 = replace(GEMMA2, name="Gemma 3", class_name="Gemma3ForCausalLM")
# A multimodal Gemma 3 (Gemma3ForConditionalGeneration) keeps its language model under one
# of these (transformers 5, then 4); its vision tower only reads images, so it is left out.
PREFIXES = ("model.language_model.", "language_model.model.")
GEMMA3_MULTIMODAL = replace(GEMMA3, prefixes=PREFIXES)

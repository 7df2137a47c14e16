"""Mistral: Llama with one sliding window in every layer."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.llama import LLAMA

MISTRAL = replace(LLAMA, name="Mistral", class_name="MistralForCausalLM")

"""Qwen2: Llama with q, k and v biases and windows from max_window_layers on."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.llama import LLAMA

QWEN2 = replace(LLAMA, name="Qwen2", class_name="Qwen2ForCausalLM")

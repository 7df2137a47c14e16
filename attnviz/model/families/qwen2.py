"""Qwen2: Llama with q, k and v biases and windows from max_window_layers on."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.llama import LLAMA

# llama.cpp stores Qwen's Q and K rows as transformers does: nothing to undo.
QWEN2 = replace(LLAMA, name="Qwen2", class_name="Qwen2ForCausalLM", gguf_undo=None)

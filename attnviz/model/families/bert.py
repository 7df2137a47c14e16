"""BERT: the encoder every BERT-shaped family here builds on."""

from __future__ import annotations

from typing import Any

from attnviz.model.families.kinds import Family

# HF BertModel names and this project's names, `{i}` standing for a layer number.
EMBEDDINGS = [
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.token_type_embeddings.", "embeddings.token_type."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
]
NAMES = [
    *EMBEDDINGS,
    ("encoder.layer.{i}.attention.self.query.", "layers.{i}.attention.q_proj."),
    ("encoder.layer.{i}.attention.self.key.", "layers.{i}.attention.k_proj."),
    ("encoder.layer.{i}.attention.self.value.", "layers.{i}.attention.v_proj."),
    ("encoder.layer.{i}.attention.output.dense.", "layers.{i}.attention.out_proj."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "layers.{i}.attention_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "layers.{i}.ff_in."),
    ("encoder.layer.{i}.output.dense.", "layers.{i}.ff_out."),
    ("encoder.layer.{i}.output.LayerNorm.", "layers.{i}.ff_norm."),
]
# config.json keys of the BERT-shaped families, by `ModelShape` field.
KEYS = {
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "hidden": "hidden_size",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "positions": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "activation": "hidden_act",
    "layer_norm_eps": "layer_norm_eps",
}
# Defaults of transformers' config classes, for keys an old config.json leaves out.
DEFAULTS: dict[str, Any] = {
    "layers": 12,
    "heads": 12,
    "hidden": 768,
    "intermediate": 3072,
    "vocab": 30522,
    "positions": 512,
    "type_vocab_size": 2,
    "activation": "gelu",
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
}

BERT = Family("BERT", "bert.", NAMES, dict(KEYS), dict(DEFAULTS))

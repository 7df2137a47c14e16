"""ALBERT: factorised embeddings and one layer whose weights every layer uses."""

from __future__ import annotations

from attnviz.model.families.bert import DEFAULTS, EMBEDDINGS, KEYS
from attnviz.model.families.kinds import Family

# ALBERT: one layer (group 0, inner layer 0) whose weights every layer uses.
LAYER = "encoder.albert_layer_groups.0.albert_layers.0."
NAMES = [
    *EMBEDDINGS,
    ("encoder.embedding_hidden_mapping_in.", "embeddings.project."),
    (LAYER + "attention.query.", "layers.0.attention.q_proj."),
    (LAYER + "attention.key.", "layers.0.attention.k_proj."),
    (LAYER + "attention.value.", "layers.0.attention.v_proj."),
    (LAYER + "attention.dense.", "layers.0.attention.out_proj."),
    (LAYER + "attention.LayerNorm.", "layers.0.attention_norm."),
    (LAYER + "ffn.", "layers.0.ff_in."),
    (LAYER + "ffn_output.", "layers.0.ff_out."),
    (LAYER + "full_layer_layer_norm.", "layers.0.ff_norm."),
]

ALBERT = Family(
    "ALBERT",
    "albert.",
    NAMES,
    keys={**KEYS, "embedding_size": "embedding_size"},
    defaults={
        **DEFAULTS,
        "vocab": 30000,
        "hidden": 4096,
        "heads": 64,
        "intermediate": 16384,
        "activation": "gelu_new",
        "embedding_size": 128,
    },
    projection="always",
    shared_layers=True,
)

"""DistilBERT: no token types, its own config keys and layer names."""

from __future__ import annotations

from attnviz.model.families.bert import DEFAULTS
from attnviz.model.families.kinds import Family

# DistilBERT: no token types, its own layer names.
NAMES = [
    ("embeddings.word_embeddings.", "embeddings.word."),
    ("embeddings.position_embeddings.", "embeddings.position."),
    ("embeddings.LayerNorm.", "embeddings.norm."),
    ("transformer.layer.{i}.attention.q_lin.", "layers.{i}.attention.q_proj."),
    ("transformer.layer.{i}.attention.k_lin.", "layers.{i}.attention.k_proj."),
    ("transformer.layer.{i}.attention.v_lin.", "layers.{i}.attention.v_proj."),
    ("transformer.layer.{i}.attention.out_lin.", "layers.{i}.attention.out_proj."),
    ("transformer.layer.{i}.sa_layer_norm.", "layers.{i}.attention_norm."),
    ("transformer.layer.{i}.ffn.lin1.", "layers.{i}.ff_in."),
    ("transformer.layer.{i}.ffn.lin2.", "layers.{i}.ff_out."),
    ("transformer.layer.{i}.output_layer_norm.", "layers.{i}.ff_norm."),
]
DISTILBERT = Family(
    "DistilBERT",
    "distilbert.",
    NAMES,
    keys={
        "layers": "n_layers",
        "heads": "n_heads",
        "hidden": "dim",
        "intermediate": "hidden_dim",
        "vocab": "vocab_size",
        "positions": "max_position_embeddings",
        "activation": "activation",
    },
    defaults={**DEFAULTS, "layers": 6, "type_vocab_size": 0},
    aliases={
        "hidden": "hidden_size",
        "heads": "num_attention_heads",
        "layers": "num_hidden_layers",
    },
)

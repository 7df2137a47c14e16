"""ELECTRA: BERT with narrower embeddings and a projection up to the hidden size."""

from __future__ import annotations

from attnviz.model.families.bert import DEFAULTS, KEYS
from attnviz.model.families.bert import NAMES as BERT_NAMES
from attnviz.model.families.kinds import Family

NAMES = [*BERT_NAMES, ("embeddings_project.", "embeddings.project.")]
ELECTRA = Family(
    "ELECTRA",
    "electra.",
    NAMES,
    keys={**KEYS, "embedding_size": "embedding_size"},
    defaults={**DEFAULTS, "hidden": 256, "heads": 4, "intermediate": 1024, "embedding_size": 128},
    projection="if narrower",
)

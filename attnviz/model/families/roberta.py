"""RoBERTa and XLM-RoBERTa: BERT whose positions count from pad_token_id + 1."""

from __future__ import annotations

from attnviz.model.families.bert import DEFAULTS, KEYS, NAMES
from attnviz.model.families.kinds import Family

ROBERTA = Family(
    "RoBERTa",
    "roberta.",
    NAMES,
    dict(KEYS),
    {**DEFAULTS, "vocab": 50265, "pad_token_id": 1},
    pad_positions=True,
)
XLM_ROBERTA = Family(
    "XLM-RoBERTa",
    "roberta.",
    NAMES,
    dict(KEYS),
    {**DEFAULTS, "pad_token_id": 1},
    pad_positions=True,
)

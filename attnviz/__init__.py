"""attnviz: look inside transformer attention, from Python or the command line.

    >>> import attnviz
    >>> a = attnviz.analyse("João pensou: O trem estava cheio, mas ele conseguiu uma cadeira.")
    >>> a.attentions.shape                     # (layers, heads, pieces, pieces)
    >>> view = a.view(layer=3, head=7)          # one head, in words; .matrix, .labels, .title
    >>> view.save("head.png")                   # or a.figure("heads", layer=3)
    >>> a.rollout().sources()                   # what each token draws most from
    >>> a.find("ele", "João").best(3)           # the heads that link two words
    >>> a.row("ele", layer=3, head=7)           # one query's keys, largest first
    >>> attnviz.head_stats(["one sentence", "another"]).sorted("prev", top=5)
    >>> attnviz.head_roles("sample_sentences/pronouns-en.jsonl").best(3)  # a head's role, checked
    >>> attnviz.model_info().shape.layers           # what `attnviz info` prints, as data
    >>> g = attnviz.generate("Once upon a time", model="./smollm2")  # a decoder writes
    >>> g.continuation, g.steps_view(layer=-1)       # each new token's attention; g.lens()
    >>> attnviz.from_attentions(out.attentions, tokens)  # attention computed elsewhere
    >>> attnviz.ablate("Mary met John, and he", target="Mary", foil="John", model="gemma-3-270m")

Importing this package is cheap: the names below are loaded on first use, and
torch, transformers and matplotlib only when a call needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from attnviz.version import __version__

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.api import (
        ablate,
        analyse,
        analyse_long,
        generate,
        head_stats,
        is_encoder_decoder,
        model_info,
        partial_head_stats,
        prepare,
        prepare_encdec,
        sample_sentences,
    )
    from attnviz.arrays import from_attentions
    from attnviz.cluster import head_roles_on_dask, head_stats_on_dask
    from attnviz.details import ModelDetails
    from attnviz.encdec import EncdecInput
    from attnviz.errors import AttnvizError, BadInput
    from attnviz.generation import Generation
    from attnviz.inputs import ModelInfo
    from attnviz.loading import load_attentions
    from attnviz.measures.ablation import Ablation
    from attnviz.measures.explain import Explanation
    from attnviz.measures.find import HeadLink, HeadLinks
    from attnviz.measures.long import LongResult
    from attnviz.measures.query import QueryRow
    from attnviz.measures.roles import HeadRole, HeadRoles
    from attnviz.measures.stats import HeadRecord, HeadStats
    from attnviz.measures.views import AttentionView, HeadsView, RolloutView
    from attnviz.partials import RolesPartial, StatsPartial, merge_partials
    from attnviz.prepared import Prepared
    from attnviz.roles import head_roles, partial_head_roles
    from attnviz.text.pieces import Word

# Public name -> the module that defines it.
_EXPORTS = {
    "ablate": "attnviz.api",
    "Ablation": "attnviz.measures.ablation",
    "analyse": "attnviz.api",
    "analyse_long": "attnviz.api",
    "LongResult": "attnviz.measures.long",
    "prepare": "attnviz.api",
    "prepare_encdec": "attnviz.api",
    "is_encoder_decoder": "attnviz.api",
    "EncdecInput": "attnviz.encdec",
    "head_stats": "attnviz.api",
    "head_roles": "attnviz.roles",
    "partial_head_stats": "attnviz.api",
    "partial_head_roles": "attnviz.roles",
    "merge_partials": "attnviz.partials",
    "StatsPartial": "attnviz.partials",
    "RolesPartial": "attnviz.partials",
    "head_stats_on_dask": "attnviz.cluster",
    "head_roles_on_dask": "attnviz.cluster",
    "HeadRoles": "attnviz.measures.roles",
    "HeadRole": "attnviz.measures.roles",
    "generate": "attnviz.api",
    "Generation": "attnviz.generation",
    "from_attentions": "attnviz.arrays",
    "load_attentions": "attnviz.loading",
    "Analysis": "attnviz.analysis",
    "Prepared": "attnviz.prepared",
    "ModelInfo": "attnviz.inputs",
    "ModelDetails": "attnviz.details",
    "model_info": "attnviz.api",
    "models_at_hand": "attnviz.model.at_hand",
    "ModelsAtHand": "attnviz.model.at_hand",
    "ModelAtHand": "attnviz.model.at_hand",
    "sample_sentences": "attnviz.api",
    "AttentionView": "attnviz.measures.views",
    "HeadsView": "attnviz.measures.views",
    "RolloutView": "attnviz.measures.views",
    "Explanation": "attnviz.measures.explain",
    "HeadLink": "attnviz.measures.find",
    "HeadLinks": "attnviz.measures.find",
    "QueryRow": "attnviz.measures.query",
    "HeadStats": "attnviz.measures.stats",
    "HeadRecord": "attnviz.measures.stats",
    "Word": "attnviz.text.pieces",
    "AttnvizError": "attnviz.errors",
    "BadInput": "attnviz.errors",
}

__all__ = [
    "Ablation",
    "Analysis",
    "AttentionView",
    "AttnvizError",
    "BadInput",
    "EncdecInput",
    "Explanation",
    "Generation",
    "HeadLink",
    "HeadLinks",
    "HeadRecord",
    "HeadRole",
    "HeadRoles",
    "HeadStats",
    "HeadsView",
    "LongResult",
    "ModelAtHand",
    "ModelDetails",
    "ModelInfo",
    "ModelsAtHand",
    "Prepared",
    "QueryRow",
    "RolesPartial",
    "RolloutView",
    "StatsPartial",
    "Word",
    "__version__",
    "ablate",
    "analyse",
    "analyse_long",
    "from_attentions",
    "generate",
    "head_roles",
    "head_roles_on_dask",
    "head_stats",
    "head_stats_on_dask",
    "is_encoder_decoder",
    "load_attentions",
    "merge_partials",
    "model_info",
    "models_at_hand",
    "partial_head_roles",
    "partial_head_stats",
    "prepare",
    "prepare_encdec",
    "sample_sentences",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'attnviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

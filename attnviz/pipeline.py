"""From text to attention weights: locate the model, tokenize, run the encoder.

`prepare` does the cheap part (find the model, read its config, tokenize) so the
CLI can reject bad input before torch is imported; `compute` runs the encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import AttnvizError
from attnviz.tokenize import Pieces, load_tokenizer, tokenize
from attnviz.weights import ModelSource, locate, read_config


@dataclass(frozen=True)
class Prepared:
    """A tokenized input and the model it is for; no weights loaded yet."""

    model: ModelSource
    config: dict[str, Any]
    pieces: Pieces

    @property
    def num_layers(self) -> int:
        return int(self.config.get("num_hidden_layers", 12))

    @property
    def num_heads(self) -> int:
        return int(self.config.get("num_attention_heads", 12))


@dataclass(frozen=True)
class Analysis:
    """The attention of one input, over the model's own pieces (special tokens included)."""

    model: ModelSource
    pieces: Pieces
    attentions: np.ndarray  # (L, H, T, T) float32; rows are queries and sum to 1
    causal: bool = False  # computed with a causal mask: a what-if, not the real model


def prepare(
    text: str, *, model: str | None = None, pair: str | None = None, truncate: bool = False
) -> Prepared:
    """Find the model and tokenize `text` (and `pair`) for it, without importing torch."""
    source = locate(model)
    config = read_config(source.folder)
    tokenizer = load_tokenizer(source.folder)
    limit = int(config.get("max_position_embeddings", 512))
    pieces = tokenize(tokenizer, text, pair=pair, max_positions=limit, truncate=truncate)
    vocab_size = int(config.get("vocab_size", 30522))
    if max(pieces.ids) >= vocab_size:
        raise AttnvizError(
            f"the tokenizer in {source.folder} gives id {max(pieces.ids)} but the model's "
            f"vocabulary has {vocab_size} entries: the tokenizer files and the weights do not "
            "belong together"
        )
    return Prepared(source, config, pieces)


def compute(prepared: Prepared, *, causal: bool = False) -> Analysis:
    """Run the prepared input through the from-scratch encoder (with a causal mask if asked)."""
    import torch

    from attnviz.weights import load_encoder

    encoder = load_encoder(prepared.model.folder, prepared.config)
    input_ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    type_ids = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    with torch.inference_mode():
        out = encoder(input_ids, type_ids, causal=causal)
    attentions = out.attentions[:, 0].float().numpy()  # (L, H, T, T)
    return Analysis(prepared.model, prepared.pieces, attentions, causal)


def analyse(
    text: str,
    *,
    model: str | None = None,
    pair: str | None = None,
    truncate: bool = False,
    causal: bool = False,
) -> Analysis:
    """Every attention weight of `text` under `model` (the embedded default if None)."""
    return compute(prepare(text, model=model, pair=pair, truncate=truncate), causal=causal)

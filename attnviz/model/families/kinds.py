"""What a family's file declares: an encoder's config keys and names, a decoder's config
reader, checkpoint layout, GGUF names, weight splitters and norm facts, an encoder-decoder's
config keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnviz.model.config import DecoderConfig
from attnviz.model.families.reader import DecoderReader

# One checkpoint entry as this project's entries (a fused weight split, a Conv1D transposed):
# (name, value, the decoder's config) -> [(name, value)], value a tensor, a shape or a name.
Splitter = Callable[[str, Any, DecoderConfig | None], list[tuple[str, Any]]]


@dataclass(frozen=True)
class DecoderFamily:
    """One decoder family's facts, each read by the shared code that needs it.

    `reader` reads the family's config.json (`describe`).
    `prefix`, `names` and `ignored`: where a *ForCausalLM checkpoint keeps the decoder, its
    names -> this project's (`{i}` a layer number), and what is not the decoder.
    `gguf_block`: a GGUF tensor's name inside a block -> transformers' inside a layer (empty:
    no GGUF support); `class_name` the transformers class a GGUF file is read as.
    `input_norm` / `output_norm`: the layer's norm before attention, and the norm on the
    attention's output before the residual (Gemma), which the decoder measures read.
    `split`, `stored_name`, `stored_shape`: the family's fused or transposed weights.
    """

    name: str  # as shown to users: "Phi-3"
    prefix: str
    names: list[tuple[str, str]]
    ignored: str
    reader: type[DecoderReader]
    class_name: str = ""
    gguf_block: dict[str, str] = field(default_factory=dict)
    gguf_top: dict[str, str] = field(default_factory=dict)  # tensors outside the blocks
    gguf_layers: str = "model.layers."  # where transformers keeps the blocks
    # What llama.cpp's converter did to a tensor, undone: (GGUF name, values, config) -> values.
    gguf_undo: Callable[[str, Any, dict[str, Any]], Any] | None = None
    prefixes: tuple[str, ...] = ()  # other prefixes a checkpoint may use (multimodal Gemma 3)
    input_norm: str = "norm1"
    output_norm: str | None = None
    # The weight splitters: `split` before renaming; `stored_name` and `stored_shape` say how
    # the checkpoint stores one of ours (transformers' name; our shape), for messages.
    split: Splitter | None = None
    stored_name: Callable[[str], str] | None = None
    stored_shape: Callable[[str, tuple[int, ...], DecoderConfig | None], tuple[int, ...]] | None = (
        None
    )

    def describe(self, raw: dict[str, Any], where: str) -> DecoderConfig:
        """The decoder `raw` (the config.json `where`) describes, checked by the family's
        reader before anything is allocated."""
        return self.reader(raw, where, self.name).read()


@dataclass(frozen=True)
class Family:
    """One model family: its display name, config keys, state-dict names and quirks."""

    name: str  # as shown to users: "RoBERTa"
    prefix: str  # where a *For* checkpoint keeps the encoder: "roberta."
    names: list[tuple[str, str]]  # checkpoint name templates -> this project's
    keys: dict[str, str]
    defaults: dict[str, Any]
    pad_positions: bool = False  # RoBERTa: positions count from pad_token_id + 1
    projection: str = "never"  # "never", "if narrower" (ELECTRA), "always" (ALBERT)
    shared_layers: bool = False  # ALBERT
    # Other keys transformers reads for a field (its config class's attribute_map): DistilBERT
    # takes hidden_size for dim. Two that disagree are refused, naming both.
    aliases: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Seq2seqFamily:
    """One encoder-decoder family, which transformers computes (`attnviz.model.seq2seq`).

    `keys`: where its config.json keeps each size, by `Seq2seqShape` field (a decoder_layers
    left out is the encoder's). `positions`: max_position_embeddings when left out, which
    bounds a source and a target (None: relative positions, bounded as a decoder's text is).
    """

    name: str  # as shown to users: "BART"
    class_name: str  # what AutoModelForSeq2SeqLM computes it with, whatever config.json says
    keys: dict[str, str]
    positions: int | None = 1024

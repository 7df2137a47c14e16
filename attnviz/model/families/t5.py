"""T5 and mT5: encoder-decoders with relative positions (transformers computes them)."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.kinds import Seq2seqFamily

KEYS = {
    "encoder_layers": "num_layers",
    "decoder_layers": "num_decoder_layers",
    "encoder_heads": "num_heads",
    "decoder_heads": "num_heads",
    "hidden": "d_model",
    "vocab": "vocab_size",
}
# Relative positions: no table bounds a source, so attnviz bounds it as a decoder's text.
T5 = Seq2seqFamily("T5", "T5ForConditionalGeneration", KEYS, positions=None)
MT5 = replace(T5, name="mT5", class_name="MT5ForConditionalGeneration")

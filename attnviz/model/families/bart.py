"""BART: an encoder-decoder with learned positions (transformers computes it).

mBART is left out: its decoder starts from the target's language code, which transformers
moves to the front of the labels, not from decoder_start_token_id.
"""

from __future__ import annotations

from attnviz.model.families.kinds import Seq2seqFamily

KEYS = {
    "encoder_layers": "encoder_layers",
    "decoder_layers": "decoder_layers",
    "encoder_heads": "encoder_attention_heads",
    "decoder_heads": "decoder_attention_heads",
    "hidden": "d_model",
    "vocab": "vocab_size",
}
BART = Seq2seqFamily("BART", "BartForConditionalGeneration", KEYS)

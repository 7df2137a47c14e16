"""An encoder-decoder (T5, mT5, BART, Marian, Pegasus) run by transformers' eager model: its three
stacks of attention, and its own greedy output.

attnviz does not re-implement these models: transformers' eager attention
(`attn_implementation="eager"`) returns every weight with `output_attentions=True`, one
tensor per layer, (batch, heads, queries, keys). Three stacks come back:

- `encoder`: the source's pieces attending to each other, (L_enc, H, S, S);
- `decoder`: the target's pieces attending to the target before them (causal), (L_dec, H, T, T);
- `cross`: each target piece (a query) attending to the source's pieces (keys), (L_dec, H, T, S).

The decoder reads `decoder_input_ids`: the model's `decoder_start_token_id` and then the
target's ids, as transformers' own forward shifts `labels` one place right
(`attnviz.text.target`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from attnviz.model.hf_engine import quiet_transformers

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_GENERATE", "Stacks", "generate_greedy", "load_seq2seq", "run_stacks"]

MAX_GENERATE = 256  # --generate: new tokens at most


class Stacks(NamedTuple):
    """The three stacks of an encoder-decoder's attention, float32, rows summing to 1."""

    encoder: np.ndarray  # (L_enc, H, S, S)
    decoder: np.ndarray  # (L_dec, H, T, T), causal
    cross: np.ndarray  # (L_dec, H, T, S): target queries x source keys


def load_seq2seq(folder: Path, dtype: str = "float32") -> Any:
    """transformers' eager encoder-decoder with its LM head (for `generate`), from local files
    only, in eval mode.

    The weight files are checked as transformers' engine checks them (`hf_engine.
    check_weights`: regular files, sound safetensors headers, a bound on their size; a torch
    file read weights-only), remote code is never run, a config that asks for more weights
    than the checkpoint holds is refused before any is allocated, and so is a checkpoint
    that lacks weights (transformers would draw them at random). Its config was read and bounded
    by `seq2seq_config.describe_seq2seq` before."""
    from transformers import AutoModelForSeq2SeqLM

    from attnviz.model.hf_engine import load_checked

    return load_checked(folder, AutoModelForSeq2SeqLM, dtype, "an encoder-decoder")


def run_stacks(model: Any, source_ids: list[int], target_ids: list[int]) -> Stacks:
    """The three stacks for the source ids and the decoder's input ids (start token first)."""
    import torch

    src = torch.tensor([source_ids])  # (1, S)
    tgt = torch.tensor([target_ids])  # (1, T)
    with torch.inference_mode(), quiet_transformers():
        out = model(
            input_ids=src,
            attention_mask=torch.ones_like(src),  # (1, S): one sentence, nothing padded
            decoder_input_ids=tgt,
            output_attentions=True,
            use_cache=False,
            return_dict=True,
        )
    encoder = torch.stack(out.encoder_attentions)[:, 0]  # (L_enc, H, S, S)
    decoder = torch.stack(out.decoder_attentions)[:, 0]  # (L_dec, H, T, T)
    cross = torch.stack(out.cross_attentions)[:, 0]  # (L_dec, H, T, S)
    return Stacks(
        encoder.float().numpy(),
        decoder.float().numpy(),
        cross.float().numpy(),
    )


def generate_greedy(model: Any, source_ids: list[int], max_new: int) -> list[int]:
    """The model's own greedy output for the source: transformers' `generate` with one beam
    and no sampling (the generation config's other rules, such as a forced first token or
    banned ids, stay the model's), at most `max_new` new tokens, stopping at the end token.
    Returns the decoder's input ids: the start token, then each token written."""
    import torch
    from transformers import DynamicCache, EncoderDecoderCache

    src = torch.tensor([source_ids])  # (1, S)
    # A cache that grows a layer at a time: the one transformers builds from T5's config is
    # sized by the encoder's layers, and fails when the decoder has more.
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    with torch.inference_mode(), quiet_transformers():
        out = model.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),  # (1, S)
            max_new_tokens=max_new,
            do_sample=False,
            num_beams=1,
            cache=cache,
        )
    return [int(i) for i in out[0].tolist()]

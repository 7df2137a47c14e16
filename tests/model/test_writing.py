"""A decoder writes as transformers' own does: the same tokens, logits and attention.

Tiny random checkpoints of every decoder family (tests/conftest.py), with their LM head
tied to the embedding or their own; transformers' eager *ForCausalLM and its `generate`
are the reference. The key/value cache must change nothing: each step's attention row
equals the row of the full sequence read at once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.model.lens import logit_lens
from attnviz.model.weights import load_encoder
from attnviz.model.writing import write
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import TinyFactory

PROMPT = "John thought: the train was full, but he"
N = 12

# (family, config overrides): every decoder family, tied and untied heads, windows.
CASES = {
    "gpt2 (tied)": ("gpt2", {}),
    "gpt2 untied": ("gpt2", {"tie_word_embeddings": False}),
    "llama (untied)": ("llama", {}),
    "llama tied": ("llama", {"tie_word_embeddings": True}),
    "mistral, window 6": ("mistral", {"sliding_window": 6}),
    "qwen2, window 5 in layer 1": (
        "qwen2",
        {"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1},
    ),
}


def _reference(folder: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def _prompt(folder: Path) -> list[int]:
    return tokenize(load_tokenizer(folder), PROMPT, max_positions=128).ids


@pytest.mark.slow  # builds transformers' model and runs its generate
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_writing_equals_transformers_generate(tiny_decoder: TinyFactory, case: str) -> None:
    family, overrides = CASES[case]
    folder = tiny_decoder(family, arch="lm", **overrides)
    ids = _prompt(folder)
    reference = _reference(folder)
    eos = reference.generation_config.eos_token_id
    eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    decoder = load_encoder(folder)
    ours = write(decoder, ids, max_new=N, eos_ids=eos_ids, keep_logits=True)
    with torch.inference_mode():
        theirs = reference.generate(
            torch.tensor([ids]),
            max_new_tokens=N,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=2,
        )
    new = theirs.sequences[0, len(ids) :].tolist()
    assert ours.ids == new
    assert len(new) > 1
    for step, logits in enumerate(ours.logits):
        assert float((logits - theirs.logits[step][0]).abs().max()) <= 1e-4

    # Each step's row is the full sequence's row for the query that wrote the token.
    sequence = torch.tensor([ids + ours.ids])
    with torch.inference_mode():
        full = torch.stack(reference(sequence, output_attentions=True).attentions)[:, 0]
    P = len(ids)
    assert ours.prompt_attention is not None
    assert float((ours.prompt_attention - full[:, :, :P, :P]).abs().max()) <= 1e-5
    for step, row in enumerate(ours.rows):
        query = P - 1 + step
        assert row.shape == (full.shape[0], full.shape[1], 1, query + 1)
        assert float((row[:, :, 0] - full[:, :, query, : query + 1]).abs().max()) <= 1e-5


@pytest.mark.slow  # writes checkpoints or runs several generations
def test_a_tied_head_is_the_embedding_and_an_untied_one_is_loaded(
    tiny_decoder: TinyFactory,
) -> None:
    tied = load_encoder(tiny_decoder("gpt2", arch="lm"))
    assert tied.lm_head is None and tied.can_write
    untied = load_encoder(tiny_decoder("llama", arch="lm"))
    assert untied.lm_head is not None and untied.can_write
    assert not torch.equal(untied.lm_head.weight, untied.tokens.weight)
    bare = load_encoder(tiny_decoder("llama"))  # LlamaModel: no lm_head.weight saved
    assert not bare.can_write


def test_a_wrong_shaped_lm_head_is_refused_by_name(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    from attnviz.errors import AttnvizError

    folder = tiny_decoder("llama", arch="lm")
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    state = load_file(copy / "model.safetensors")
    state["lm_head.weight"] = state["lm_head.weight"][:, :10].contiguous()
    save_file(state, copy / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(AttnvizError, match=r"wrong shape: lm_head\.weight"):
        load_encoder(copy)


@pytest.mark.slow  # writes checkpoints or runs several generations
def test_sampling_with_a_seed_repeats_and_top_k_1_is_greedy(tiny_decoder: TinyFactory) -> None:
    folder = tiny_decoder("llama", arch="lm")
    ids = _prompt(folder)
    decoder = load_encoder(folder)
    greedy = write(decoder, ids, max_new=N).ids
    first = write(decoder, ids, max_new=N, sample=True, temperature=1.5, seed=7).ids
    again = write(decoder, ids, max_new=N, sample=True, temperature=1.5, seed=7).ids
    other = write(decoder, ids, max_new=N, sample=True, temperature=1.5, seed=8).ids
    assert first == again
    assert first != other  # 12 draws at temperature 1.5 over a 400-token vocabulary
    assert write(decoder, ids, max_new=N, sample=True, top_k=1, seed=3).ids == greedy


def test_writing_stops_after_an_end_token(tiny_decoder: TinyFactory) -> None:
    folder = tiny_decoder("gpt2", arch="lm")
    ids = _prompt(folder)
    decoder = load_encoder(folder)
    greedy = write(decoder, ids, max_new=N).ids
    stop_at = greedy[3]  # pretend the fourth token is the end
    stopped = write(decoder, ids, max_new=N, eos_ids=[stop_at])
    assert stopped.ids == greedy[: greedy.index(stop_at) + 1]
    assert stopped.stopped_at_eos


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_the_lens_at_the_last_layer_is_the_models_own_guess(
    tiny_decoder: TinyFactory, family: str
) -> None:
    folder = tiny_decoder(family, arch="lm")
    ids = _prompt(folder)
    decoder = load_encoder(folder)
    top, p = logit_lens(decoder, ids)
    assert top.shape == p.shape == (decoder.config.num_layers, len(ids))
    with torch.inference_mode():
        logits = decoder.logits(decoder(torch.tensor([ids])).hidden_states)[0]  # (T, V)
    assert top[-1].tolist() == logits.argmax(-1).tolist()
    assert np.allclose(p[-1].numpy(), torch.softmax(logits, -1).max(-1).values.numpy(), atol=1e-6)
    assert bool(((p > 0) & (p <= 1)).all())


@pytest.mark.slow  # writes checkpoints or runs several generations
def test_the_lens_equals_transformers_hidden_states_read_by_its_own_head(
    tiny_decoder: TinyFactory,
) -> None:
    folder = tiny_decoder("llama", arch="lm", num_hidden_layers=4)
    ids = _prompt(folder)
    reference = _reference(folder)
    with torch.inference_mode():
        states = reference(torch.tensor([ids]), output_hidden_states=True).hidden_states
        # hidden_states[l + 1] is layer l's output; the last one already went through the norm
        theirs = [
            reference.lm_head(reference.model.norm(h) if layer < 3 else h)[0].argmax(-1)
            for layer, h in enumerate(states[1:])
        ]
    top, _ = logit_lens(load_encoder(folder), ids)
    assert top.tolist() == [t.tolist() for t in theirs]
    assert top[0].tolist() != top[-1].tolist()  # the layers do guess differently

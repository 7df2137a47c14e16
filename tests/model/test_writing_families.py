"""A decoder of the newer families writes as transformers' own does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnviz.model.weights import load_encoder
from attnviz.model.writing import write
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.model.test_decoder_families import write_checkpoint

PROMPT = "John thought: the train was full, but he"
N = 10
LM = {
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
}


@pytest.mark.slow  # builds transformers' model and runs its generate
@pytest.mark.parametrize("family", list(LM))
@pytest.mark.parametrize("tied", [False, True])
def test_greedy_writing_equals_transformers_on_the_new_families(
    tmp_path: Path, family: str, tied: bool
) -> None:
    from transformers import AutoModelForCausalLM

    folder = write_checkpoint(
        tmp_path / family, family, LM[family], tie_word_embeddings=tied,
        **({"final_logit_softcapping": 2.0} if family == "gemma2" else {}),
    )  # fmt: skip
    ids = tokenize(load_tokenizer(folder), PROMPT, max_positions=128).ids
    reference = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    ours = write(load_encoder(folder), ids, max_new=N, eos_ids=[1], keep_logits=True)
    with torch.inference_mode():
        theirs = reference.generate(
            torch.tensor([ids]), max_new_tokens=N, do_sample=False, output_logits=True,
            return_dict_in_generate=True, eos_token_id=1, pad_token_id=2,
        )  # fmt: skip
        full = reference(torch.cat([theirs.sequences[:, :-1]], 1), output_attentions=True)
    assert ours.ids == theirs.sequences[0, len(ids) :].tolist()
    for step, logits in enumerate(ours.logits):
        assert float((logits - theirs.logits[step][0]).abs().max()) <= 1e-4
    attentions = torch.stack(full.attentions)[:, 0]
    P = len(ids)
    for step, row in enumerate(ours.rows):
        q = P - 1 + step
        assert float((row[:, :, 0] - attentions[:, :, q, : q + 1]).abs().max()) <= 1e-5

"""The from-scratch encoder gives transformers' own attention weights, to within 1e-5.

The reference is transformers' BertModel with eager attention and
`output_attentions=True`, loaded from the same checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertModel

from attnviz import analyse
from attnviz.model.weights import load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import FAMILY_TYPES, SENTENCES, TinyFactory

TOLERANCE = 1e-5


def _reference(folder: Path) -> BertModel:
    return BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()


def _max_diff(ours: torch.Tensor, theirs: tuple[torch.Tensor, ...]) -> float:
    return (ours - torch.stack(theirs)).abs().max().item()


@pytest.fixture(scope="module")
def reference(embedded_folder: Path) -> BertModel:
    return _reference(embedded_folder)


@pytest.mark.parametrize("sentence", SENTENCES)
def test_default_model_matches_transformers_on_every_layer_and_head(
    sentence: str, reference: BertModel
) -> None:
    analysis = analyse(sentence)
    ids = torch.tensor([analysis.pieces.ids])
    with torch.inference_mode():
        ref = reference(ids, output_attentions=True)
    theirs = torch.stack(ref.attentions)[:, 0]  # (L, H, T, T)
    assert analysis.attentions.shape == tuple(theirs.shape) == (6, 12, len(ids[0]), len(ids[0]))
    assert (torch.from_numpy(analysis.attentions.copy()) - theirs).abs().max().item() <= TOLERANCE


@pytest.mark.slow  # a 512-piece input
def test_512_piece_input_matches_and_rows_sum_to_one(reference: BertModel) -> None:
    text = " ".join(["O trem estava cheio, mas ele conseguiu uma cadeira livre."] * 60)
    analysis = analyse(text, truncate=True)
    assert len(analysis.pieces) == 512 and analysis.pieces.dropped > 0
    ids = torch.tensor([analysis.pieces.ids])
    with torch.inference_mode():
        ref = reference(ids, output_attentions=True)
    assert (
        _max_diff(torch.from_numpy(analysis.attentions.copy())[:, None], ref.attentions)
        <= TOLERANCE
    )
    sums = analysis.attentions.sum(-1)
    assert abs(sums - 1).max() < 1e-5


@pytest.mark.slow  # the default model over every sentence, batched and one by one
def test_padded_batch_equals_one_sentence_at_a_time(embedded_folder: Path) -> None:
    encoder = load_encoder(embedded_folder)
    tokenizer = load_tokenizer(embedded_folder)
    encoded = [tokenize(tokenizer, s, max_positions=512).ids for s in SENTENCES]
    width = max(map(len, encoded))
    ids = torch.tensor([e + [0] * (width - len(e)) for e in encoded])  # (B, T) right-padded
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    with torch.inference_mode():
        batch = encoder(ids, attention_mask=mask)
        for b, e in enumerate(encoded):
            single = encoder(torch.tensor([e]))
            n = len(e)
            diff = (batch.attentions[:, b, :, :n, :n] - single.attentions[:, 0]).abs().max()
            assert diff.item() <= TOLERANCE
            assert torch.all(batch.attentions[:, b, :, :n, n:] == 0)  # nobody attends to padding
            hidden = (batch.hidden_states[b, :n] - single.hidden_states[0]).abs().max()
            assert hidden.item() <= 1e-4


def test_padded_batch_matches_transformers_with_its_attention_mask(
    embedded_folder: Path, reference: BertModel
) -> None:
    encoder = load_encoder(embedded_folder)
    tokenizer = load_tokenizer(embedded_folder)
    encoded = [tokenize(tokenizer, s, max_positions=512).ids for s in SENTENCES[:2]]
    width = max(map(len, encoded))
    ids = torch.tensor([e + [0] * (width - len(e)) for e in encoded])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    with torch.inference_mode():
        ours = encoder(ids, attention_mask=mask)
        ref = reference(ids, attention_mask=mask, output_attentions=True)
    for b, e in enumerate(encoded):
        n = len(e)  # compare real query rows; pad rows are arbitrary in both
        diff = (ours.attentions[:, b, :, :n] - torch.stack(ref.attentions)[:, b, :, :n]).abs()
        assert diff.max().item() <= TOLERANCE


@pytest.mark.parametrize(
    "variant",
    [
        dict(fmt="safetensors"),
        dict(fmt="safetensors", arch="mlm"),
        dict(fmt="safetensors", arch="classifier"),
        dict(fmt="safetensors", arch="qa"),
        dict(fmt="bin"),
        dict(fmt="bin", arch="mlm"),
        dict(fmt="safetensors", legacy=True),
        dict(fmt="safetensors", hidden_act="gelu_new"),
        dict(fmt="safetensors", hidden_act="relu", num_attention_heads=8, num_hidden_layers=3),
    ],
    ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()),
)
def test_tiny_checkpoints_match_transformers(tiny_bert: TinyFactory, variant: dict) -> None:
    folder = tiny_bert(**variant)
    reference = _reference(folder)
    if variant.get("legacy"):  # transformers 5 no longer reads gamma/beta: the same weights, clean
        reference = _reference(tiny_bert(**{k: v for k, v in variant.items() if k != "legacy"}))
    analysis = analyse(
        "O banco negou o empréstimo porque ele estava sem fundos.", model=str(folder)
    )
    with torch.inference_mode():
        ref = reference(torch.tensor([analysis.pieces.ids]), output_attentions=True)
    diff = _max_diff(torch.from_numpy(analysis.attentions.copy())[:, None], ref.attentions)
    assert diff <= TOLERANCE


@pytest.mark.parametrize("family", FAMILY_TYPES)
def test_every_family_through_the_pipeline_matches_transformers(
    tiny_model: TinyFactory, family: str
) -> None:
    """`analyse` on a sentence pair: tokenizer, token types and encoder of each family."""
    from transformers import AutoModel

    folder = tiny_model(family)
    analysis = analyse(
        "O banco negou o empréstimo.", pair="Ele estava sem fundos!", model=str(folder)
    )
    reference = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    ids = torch.tensor([analysis.pieces.ids])
    types = (
        {}
        if family == "distilbert"
        else {"token_type_ids": torch.tensor([analysis.pieces.type_ids])}
    )
    with torch.inference_mode():
        ref = reference(ids, output_attentions=True, **types)
    assert (
        _max_diff(torch.from_numpy(analysis.attentions.copy())[:, None], ref.attentions)
        <= TOLERANCE
    )

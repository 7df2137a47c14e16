"""The from-scratch multi-head attention against PyTorch's own implementations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnviz.model.attention import MultiHeadAttention
from attnviz.model.config import EncoderConfig
from attnviz.model.encoder import Embeddings, Encoder

B, T, C, NH = 2, 7, 24, 4


def _pair(bias: bool = True) -> tuple[MultiHeadAttention, torch.nn.MultiheadAttention]:
    """Ours and torch's, holding the same weights."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(C, NH, bias=bias).eval()
    ref = torch.nn.MultiheadAttention(C, NH, bias=bias, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
        )
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(
                torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias])
            )
            ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ours, ref


@pytest.mark.parametrize("bias", [True, False])
def test_matches_torch_multihead_attention_without_mask(bias: bool) -> None:
    ours, ref = _pair(bias)
    x = torch.randn(B, T, C)
    out, weights = ours(x, x, x)
    ref_out, ref_weights = ref(x, x, x, need_weights=True, average_attn_weights=False)
    assert weights.shape == (B, NH, T, T)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=0)


def test_matches_torch_with_padding_and_causal_masks() -> None:
    ours, ref = _pair()
    x = torch.randn(B, T, C)
    padding = torch.zeros(B, T, dtype=torch.bool)
    padding[1, 5:] = True  # the second sentence has two pad keys
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True hides the future
    mask = padding[:, None, None, :] | causal  # (B, 1, T, T)
    out, weights = ours(x, x, x, mask=mask)
    ref_out, ref_weights = ref(
        x,
        x,
        x,
        key_padding_mask=padding,
        attn_mask=causal,
        need_weights=True,
        average_attn_weights=False,
    )
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=0)
    assert torch.all(weights.masked_select(mask.expand_as(weights)) == 0)


def test_cross_attention_shapes_match_sdpa() -> None:
    """Queries and keys of different lengths; outputs equal torch's fused kernel."""
    ours, _ = _pair()
    q, kv = torch.randn(B, 3, C), torch.randn(B, T, C)
    out, weights = ours(q, kv, kv)
    assert out.shape == (B, 3, C) and weights.shape == (B, NH, 3, T)
    split = lambda t: t.view(B, -1, NH, C // NH).transpose(1, 2)  # noqa: E731
    heads = F.scaled_dot_product_attention(
        split(ours.q_proj(q)), split(ours.k_proj(kv)), split(ours.v_proj(kv))
    )
    expected = ours.out_proj(heads.transpose(1, 2).reshape(B, 3, C))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_rows_sum_to_one_and_hidden_rows_are_zero_not_nan() -> None:
    ours, _ = _pair()
    x = torch.randn(1, T, C)
    mask = torch.zeros(1, 1, T, T, dtype=torch.bool)
    mask[..., 2, :] = True  # query 2 may see nothing
    _, weights = ours(x, x, x, mask=mask)
    assert not torch.isnan(weights).any()
    sums = weights.sum(-1)
    assert torch.all(sums[..., 2] == 0)
    keep = [i for i in range(T) if i != 2]
    torch.testing.assert_close(sums[..., keep], torch.ones_like(sums[..., keep]))


def test_rejects_width_not_divisible_by_heads() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_hidden_rows_are_zero_not_nan_in_half_precision(dtype: torch.dtype) -> None:
    ours, _ = _pair()
    ours = ours.to(dtype)
    x = torch.randn(1, T, C, dtype=dtype)
    mask = torch.zeros(1, 1, T, T, dtype=torch.bool)
    mask[..., 4, :] = True  # query 4 may see nothing
    out, weights = ours(x, x, x, mask=mask)
    assert weights.dtype == dtype
    assert not torch.isnan(weights).any() and not torch.isnan(out).any()
    assert torch.all(weights[..., 4, :] == 0)


def _config(**changes: object) -> EncoderConfig:
    settings: dict = dict(
        vocab_size=10,
        hidden_size=8,
        num_layers=3,
        num_heads=2,
        intermediate_size=12,
        max_positions=16,
    )
    return EncoderConfig(**{**settings, **changes})


def test_roberta_positions_count_after_the_padding_index() -> None:
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    ids = torch.tensor([[0, 5, 6, 2, 1, 1], [0, 7, 2, 1, 1, 1]])  # (2, 6), right-padded with 1
    ours = Embeddings(_config(pad_position=1)).positions(ids)
    theirs = RobertaEmbeddings.create_position_ids_from_input_ids(ids, padding_idx=1)
    assert ours.tolist() == theirs.tolist() == [[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1]]
    assert Embeddings(_config()).positions(ids).tolist() == [[0, 1, 2, 3, 4, 5]]


def test_factorised_embeddings_project_up_and_shared_layers_fill_every_slot() -> None:
    encoder = Encoder(_config(embedding_size=4, project_embeddings=True, shared_layers=True))
    assert encoder.embeddings.word.weight.shape == (10, 4)  # (vocab, E)
    assert all(layer is encoder.layers[0] for layer in encoder.layers)
    out = encoder(torch.tensor([[1, 2, 3]]), keep_inputs=True)
    assert out.attentions.shape == (3, 1, 2, 3, 3) and out.layer_inputs.shape == (3, 1, 3, 8)
    own = sum(p.numel() for p in encoder.layers[0].parameters())
    assert sum(p.numel() for p in encoder.parameters()) == own + sum(
        p.numel() for p in encoder.embeddings.parameters()
    )


def test_without_token_types_the_type_ids_are_ignored() -> None:
    encoder = Encoder(_config(type_vocab_size=0)).eval()
    assert encoder.embeddings.token_type is None
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.inference_mode():
        plain = encoder(ids).attentions
        typed = encoder(ids, torch.tensor([[0, 0, 1, 1]])).attentions
    assert torch.equal(plain, typed)


def test_fused_projections_give_the_same_attention_and_keep_the_weights() -> None:
    """One Q/K/V matmul (the fast path) computes what three separate ones do."""
    torch.manual_seed(0)
    encoder = Encoder(_config()).eval()
    ids = torch.tensor([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])  # (2, 5)
    real = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # (2, 5)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    separate = encoder(ids, attention_mask=real, causal=True).attentions
    encoder.fuse_projections()
    fused = encoder(ids, attention_mask=real, causal=True).attentions
    torch.testing.assert_close(fused, separate, atol=1e-6, rtol=0)
    after = encoder.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)


def test_the_loaded_encoder_is_differentiable_like_transformers(embedded_folder) -> None:
    """Outside inference mode the fast paths step aside: gradients reach W_Q and match BERT's."""
    from transformers import BertModel

    from attnviz.model.weights import load_encoder

    ids = torch.tensor([[101, 1037, 3899, 2001, 102]])  # (1, 5)
    ours = load_encoder(embedded_folder)
    out = ours(ids)
    out.attentions[2, 0, 3].sum().backward()
    reference = BertModel.from_pretrained(str(embedded_folder), attn_implementation="eager")
    theirs = reference(ids, output_attentions=True)
    theirs.attentions[2][0, 3].sum().backward()
    ours_grad = ours.layers[2].attention.q_proj.weight.grad
    theirs_grad = reference.encoder.layer[2].attention.self.query.weight.grad
    assert ours_grad is not None and theirs_grad is not None
    torch.testing.assert_close(ours_grad, theirs_grad, atol=1e-5, rtol=1e-4)


def test_fused_projections_follow_moves_and_edits(embedded_folder) -> None:
    """After .double() or .to(), and after editing q_proj, the forward uses the new weights."""
    from attnviz.model.weights import load_encoder

    ids = torch.tensor([[101, 1037, 3899, 2001, 102]])  # (1, 5)
    encoder = load_encoder(embedded_folder)
    with torch.inference_mode():
        before = encoder(ids).attentions
    encoder = encoder.double().float()
    with torch.no_grad():
        encoder.layers[0].attention.q_proj.weight.mul_(2.0)
    with torch.inference_mode():
        after = encoder(ids).attentions
    reference = Encoder(encoder.config).eval()
    reference.load_state_dict(encoder.state_dict())
    with torch.inference_mode():
        expected = reference(ids).attentions  # never fused: three separate projections
    torch.testing.assert_close(after, expected, atol=1e-6, rtol=0)
    assert not torch.allclose(after[0], before[0], atol=1e-3)

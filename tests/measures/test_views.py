"""Views: layer and head selection, head mean, word merging."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.errors import BadInput
from attnviz.limits import resolve_index
from attnviz.measures.select import merge_words, select


def _random_attention(L: int = 3, H: int = 4, T: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(L, H, T, T))
    weights = np.exp(scores)
    return weights / weights.sum(-1, keepdims=True)  # (L, H, T, T), rows sum to 1


def test_negative_indices_count_from_the_end() -> None:
    assert resolve_index(-1, 6, "layer") == 5
    assert resolve_index(-6, 6, "layer") == 0
    assert resolve_index(3, 6, "layer") == 3


@pytest.mark.parametrize("value", [6, -7, 100])
def test_out_of_range_says_the_valid_range(value: int) -> None:
    with pytest.raises(
        BadInput, match=r"layer .* out of range: this model has 6 layers, use 0\.\.5"
    ):
        resolve_index(value, 6, "layer")


def test_select_head_and_mean_over_heads() -> None:
    attentions = _random_attention()
    assert np.array_equal(select(attentions, -1, 2), attentions[2, 2])
    np.testing.assert_allclose(select(attentions, 1, None), attentions[1].mean(0))
    np.testing.assert_allclose(select(attentions, 1, None).sum(-1), 1.0)


def test_merge_words_sums_keys_and_averages_queries() -> None:
    A = np.array(
        [
            [0.1, 0.2, 0.3, 0.4],
            [0.4, 0.3, 0.2, 0.1],
            [0.25, 0.25, 0.25, 0.25],
            [0.0, 0.5, 0.5, 0.0],
        ]
    )
    merged = merge_words(A, [[0], [1, 2], [3]])
    expected = np.array(
        [
            [0.1, 0.5, 0.4],
            [(0.4 + 0.25) / 2, (0.5 + 0.5) / 2, (0.1 + 0.25) / 2],
            [0.0, 1.0, 0.0],
        ]
    )
    np.testing.assert_allclose(merged, expected)


def test_merge_words_keeps_rows_summing_to_one_across_heads() -> None:
    attentions = _random_attention(T=9)
    merged = merge_words(attentions, [[0], [1, 2, 3], [4], [5, 6], [7], [8]])
    assert merged.shape == (3, 4, 6, 6)
    np.testing.assert_allclose(merged.sum(-1), 1.0)


def test_merge_words_rejects_pieces_in_two_words() -> None:
    with pytest.raises(ValueError, match="exactly one word"):
        merge_words(np.eye(3), [[0, 1], [1, 2]])

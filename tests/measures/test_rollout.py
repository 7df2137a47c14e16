"""Attention rollout: the chained layers, the top sources, and their terminal list."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console, RenderableType

from attnviz.errors import BadInput
from attnviz.measures.rollout import rollout, top_sources
from attnviz.measures.select import merge_words
from attnviz.render.stats import SourcesTable

# Two layers, one head, three tokens; rows are queries.
A0 = np.array(
    [
        [0.0, 1.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0],
    ]
)
A1 = np.array(
    [
        [1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.0, 1.0, 0.0],
    ]
)
# Â = 0.5·A + 0.5·I (rows already sum to 1), worked out by hand:
HAT0 = np.array(
    [
        [0.5, 0.5, 0.0],
        [0.5, 0.5, 0.0],
        [0.0, 0.0, 1.0],
    ]
)
HAT1 = np.array(
    [
        [1.0, 0.0, 0.0],
        [0.0, 0.5, 0.5],
        [0.0, 0.5, 0.5],
    ]
)
# R = Â1 · Â0: row 1 = 0.5·(0.5, 0.5, 0) + 0.5·(0, 0, 1). (Â0 · Â1 would give row 0 =
# (0.5, 0.25, 0.25), so the order of the product is checked too.)
ROLLED = np.array(
    [
        [0.5, 0.5, 0.0],
        [0.25, 0.25, 0.5],
        [0.25, 0.25, 0.5],
    ]
)
ATTENTIONS = np.stack([A0, A1])[:, None]  # (L=2, H=1, T=3, T=3)


def softmax_rows(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(size=shape) * 2
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def test_rollout_matches_the_hand_computation() -> None:
    np.testing.assert_allclose(rollout(ATTENTIONS), ROLLED, atol=1e-12)


def test_upto_zero_is_the_first_layer_mixed_with_the_identity() -> None:
    np.testing.assert_allclose(rollout(ATTENTIONS, upto=0), HAT0, atol=1e-12)
    np.testing.assert_allclose(rollout(ATTENTIONS, upto=1), ROLLED, atol=1e-12)


def test_negative_upto_counts_from_the_last_layer() -> None:
    np.testing.assert_allclose(rollout(ATTENTIONS, upto=-1), ROLLED, atol=1e-12)
    np.testing.assert_allclose(rollout(ATTENTIONS, upto=-2), HAT0, atol=1e-12)


@pytest.mark.parametrize("upto", [2, -3])
def test_upto_out_of_range_is_a_user_error(upto: int) -> None:
    with pytest.raises(BadInput, match="layer"):
        rollout(ATTENTIONS, upto=upto)


def test_heads_are_averaged_before_mixing() -> None:
    # Layer 0 has two heads: the identity and the swap of tokens 0 and 1.
    swap = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=float)
    two_heads = np.stack([np.eye(3), swap])[None]  # (1, 2, 3, 3)
    # mean = [[.5, .5, 0], [.5, .5, 0], [0, 0, 1]]; Â = 0.5·mean + 0.5·I:
    expected = np.array([[0.75, 0.25, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(rollout(two_heads), expected, atol=1e-12)


def test_rows_sum_to_one_on_a_deep_random_model() -> None:
    attentions = softmax_rows((6, 12, 17, 17)).astype(np.float32)
    rolled = rollout(attentions)
    assert rolled.shape == (17, 17)
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-9)
    assert (rolled >= 0).all()


def test_a_masked_all_zero_row_stays_finite_and_passes_the_token_through() -> None:
    attentions = ATTENTIONS.copy()
    attentions[0, 0, 1] = 0.0  # token 1 saw nothing in layer 0
    first = rollout(attentions, upto=0)
    assert np.isfinite(first).all()
    np.testing.assert_allclose(first[1], [0.0, 1.0, 0.0])
    rolled = rollout(attentions)
    assert np.isfinite(rolled).all()
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-12)


def test_a_nan_row_counts_as_masked() -> None:
    attentions = ATTENTIONS.copy()
    attentions[0, 0, 2] = np.nan
    rolled = rollout(attentions)
    assert np.isfinite(rolled).all()
    np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-12)


def test_rollout_then_word_merge_keeps_rows_summing_to_one() -> None:
    rolled = rollout(softmax_rows((3, 2, 5, 5), seed=3))
    words = merge_words(rolled, [[0], [1, 2], [3], [4]])
    assert words.shape == (4, 4)
    np.testing.assert_allclose(words.sum(axis=-1), 1.0, atol=1e-12)


def test_wrong_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match="L, H, T, T"):
        rollout(np.ones((2, 3, 3)))


# ---------------------------------------------------------------- top sources


def test_top_sources_are_largest_first_with_ties_to_the_lower_index() -> None:
    sources = top_sources(ROLLED, 2)
    assert sources[0] == [(0, 0.5), (1, 0.5)]
    assert sources[1] == [(2, 0.5), (0, 0.25)]
    assert all(isinstance(j, int) and isinstance(s, float) for row in sources for j, s in row)


def test_top_sources_with_k_above_the_token_count_lists_every_token() -> None:
    sources = top_sources(ROLLED, 10)
    assert [len(row) for row in sources] == [3, 3, 3]
    assert [j for j, _ in sources[2]] == [2, 0, 1]


@pytest.mark.parametrize("k", [0, -1])
def test_top_sources_needs_at_least_one(k: int) -> None:
    with pytest.raises(BadInput, match="at least 1"):
        top_sources(ROLLED, k)


# ---------------------------------------------------------------- SourcesTable

LABELS = [
    "[CLS]", "João", "pensou", ":", "O", "trem", "estava", "cheio", ",",
    "mas", "ele", "conseguiu", "uma", "cadeira", "livre", ".", "[SEP]",
]  # fmt: skip
TRICKY = [
    "東京の大学院生たちです",
    "👍🏽",
    "new\nline",
    "\u202eevil",
    "a-very-long-token-label-indeed",
]


def render(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(renderable, crop=False)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def widest(text: str) -> int:
    return max(cell_len(line) for line in text.splitlines())


def test_sources_table_lists_each_token_with_its_top_inputs() -> None:
    rolled = rollout(softmax_rows((6, 12, len(LABELS), len(LABELS))))
    sources = top_sources(rolled, 3)
    text = render(SourcesTable(LABELS, sources, title="rollout · layer 5"), 80)
    assert widest(text) <= 80
    assert "rollout · layer 5" in text
    lines = text.splitlines()
    row = next(line for line in lines if line.lstrip().startswith("7 cheio"))
    j, share = sources[7][0]
    assert f"{j} {LABELS[j]} {share:.2f}" in row


@pytest.mark.parametrize("width", [80, 40, 24, 12])
def test_sources_table_never_exceeds_the_width(width: int) -> None:
    labels = LABELS[:12] + TRICKY
    rolled = rollout(softmax_rows((2, 2, len(labels), len(labels)), seed=1))
    text = render(SourcesTable(labels, top_sources(rolled, 5), title="a title " * 8), width)
    assert widest(text) <= width
    assert "\u202e" not in text and "new\nline" not in text


def test_sources_table_rejects_mismatched_rows() -> None:
    with pytest.raises(ValueError, match="labels"):
        SourcesTable(["a", "b"], [[(0, 1.0)]])
    with pytest.raises(ValueError, match="outside"):
        SourcesTable(["a"], [[(3, 1.0)]])

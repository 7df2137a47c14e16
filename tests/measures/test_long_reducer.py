"""The reductions of a long input stay exact where it matters: a sink head, many blocks.

`LongReducer` reads the distance bins and the mean-pooled blocks from each row's running
sum, and sums the statistics per row in float32. Here it is fed blocks of a whole
(L, H, T, T) attention array made on purpose (a head that parks nearly all of every row on
position 0, whose other weights are a million times smaller, next to ordinary heads) and
checked against the same numbers computed from the whole array in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.measures.long import LongReducer
from attnviz.measures.stats import _sums_numpy
from attnviz.text.pieces import TokenKinds
from tests.measures.test_long_equals_whole import _pooled, _profile, _sink

T, H, POOL, BLOCK = 301, 3, 7, 28  # T is not a multiple of POOL: the last blocks are short


def _attention(causal: bool) -> np.ndarray:
    """(1, H, T, T) softmax rows; head 0 a sink (+30 on position 0)."""
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(1, H, T, T)) * 2
    scores[:, 0, :, 0] += 30.0  # every query's weight on position 0 near 1
    if causal:
        scores[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)).astype(np.float32)


def _feed(A: np.ndarray, causal: bool, **options: object) -> LongReducer:
    import torch

    reducer = LongReducer(1, H, T, causal=causal, **options)  # type: ignore[arg-type]
    for start in range(0, T, BLOCK):
        end = min(T, start + BLOCK)
        K = end if causal else T  # a causal block stops at its last query
        reducer(0, start, torch.from_numpy(A[0, :, start:end, :K].copy()))
    return reducer


@pytest.mark.parametrize("causal", [True, False])
def test_running_sums_keep_a_sink_heads_small_weights(causal: bool) -> None:
    A = _attention(causal)
    assert A[0, 0, 1:, 0].min() > 0.999  # the sink holds nearly all of every row
    wide = A.astype(np.float64)
    for how in ("mean", "max"):
        reducer = _feed(A, causal, pool=POOL, pool_by=how)
        expected = _pooled(wide, POOL, how)
        got = reducer.pooled()
        # relative to each block's own size: the sink head's far blocks are ~1e-14
        seen = expected > 0
        assert np.array_equal(got > 0, seen)
        np.testing.assert_allclose(got[seen], expected[seen], rtol=1e-4)
    profile = _profile(wide, causal)
    np.testing.assert_allclose(reducer.profile(), profile, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(reducer.sink(), _sink(A, causal))
    assert reducer.sink()[0, 0] == pytest.approx(1.0) and reducer.sink()[0, 1] < 0.5


@pytest.mark.parametrize("causal", [True, False])
def test_statistics_in_blocks_equal_the_whole_array(causal: bool) -> None:
    A = _attention(causal)
    rng = np.random.default_rng(1)
    kinds = TokenKinds(
        cls=np.arange(T) == 0,
        sep=np.arange(T) == T - 1,
        punct=rng.random(T) < 0.1,
    )
    reducer = _feed(A, causal, kinds=kinds, profile=False)
    assert reducer.stats_sums is not None
    whole = _sums_numpy(A[:, None], [T], [kinds])  # (S, L, H) in float64
    # entropy first: float32 rows, float64 across rows; mean per query within 1e-6
    np.testing.assert_allclose(reducer.stats_sums / T, whole / T, rtol=0, atol=1e-6)
    assert whole[0, 0, 0] / T < 0.01 < whole[0, 0, 1] / T  # the sink head is nearly certain

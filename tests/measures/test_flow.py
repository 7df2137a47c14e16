"""Attention flow, checked against a brute-force minimum cut on small layered graphs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import attnviz
from attnviz.measures.flow import CAPACITY_SCALE, MAX_FLOW_TOKENS, attention_flow, residual_mixed


def _min_cut(mixed: np.ndarray, source: int, sink: int) -> float:
    """The smallest cut between input `source` and output `sink`, by trying every cut."""
    layers, T, _ = mixed.shape
    nodes = [(layer, t) for layer in range(layers + 1) for t in range(T)]
    free = [n for n in nodes if n not in ((0, source), (layers, sink))]
    best = np.inf
    for chosen in itertools.product((False, True), repeat=len(free)):
        side = {(0, source)} | {n for n, inside in zip(free, chosen, strict=True) if inside}
        cut = sum(
            mixed[layer, i, j]  # the edge (layer, j) -> (layer + 1, i)
            for layer in range(layers)
            for i in range(T)
            for j in range(T)
            if (layer, j) in side and (layer + 1, i) not in side
        )
        best = min(best, cut)
    return float(best)


@pytest.mark.parametrize(("layers", "T", "seed"), [(3, 2, 0), (2, 3, 1), (3, 3, 2)])
def test_flow_is_the_minimum_cut(layers: int, T: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    attentions = rng.dirichlet(np.full(T, 0.5), size=(layers, 2, T))  # (L, H, T, T)
    mixed = residual_mixed(attentions)
    expected = np.array([[_min_cut(mixed, j, i) for j in range(T)] for i in range(T)])
    expected /= expected.sum(axis=-1, keepdims=True)
    tolerance = layers * T * T / CAPACITY_SCALE
    np.testing.assert_allclose(attention_flow(attentions), expected, atol=tolerance)


def test_flow_on_the_model_and_its_size_limit() -> None:
    analysis = attnviz.analyse("John thought: the train was full, but he found a free seat.")
    flow = attention_flow(analysis.attentions, upto=2)
    assert flow.shape == (17, 17)
    np.testing.assert_allclose(flow.sum(axis=-1), 1.0, atol=1e-9)
    long = np.full((1, 1, MAX_FLOW_TOKENS + 1, MAX_FLOW_TOKENS + 1), 1 / (MAX_FLOW_TOKENS + 1))
    with pytest.raises(attnviz.BadInput, match=f"at most {MAX_FLOW_TOKENS} pieces"):
        attention_flow(long)

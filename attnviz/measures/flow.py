"""Attention flow (Abnar & Zuidema 2020): rollout's exact sibling, as maximum flow.

The layers make a graph: one node per token per layer boundary (the input, then the
output of each layer), and from token j below layer l to token i above it an edge of
capacity Â_l[i, j], where Â_l = rownorm(0.5 · mean_h A_l + 0.5 · I) as in rollout. The
flow from input j to output i is the maximum flow from node (0, j) to node (upto + 1, i):
rollout multiplies along every path, flow asks how much can pass at most through the
narrowest cuts. Rows are then normalised to sum to 1.

It solves T² maximum-flow problems on a graph of (L + 1)·T nodes and L·T² edges, so it
is limited to MAX_FLOW_TOKENS pieces. The solver is scipy's (`maximum_flow`, integer
capacities: the weights are scaled by CAPACITY_SCALE and rounded, an error of at most
L·T / CAPACITY_SCALE on a flow).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnviz.errors import BadInput
from attnviz.limits import resolve_index

__all__ = ["CAPACITY_SCALE", "MAX_FLOW_TOKENS", "attention_flow", "residual_mixed"]

MAX_FLOW_TOKENS = 64
CAPACITY_SCALE = 10**6


def residual_mixed(attentions: np.ndarray) -> np.ndarray:
    """Each layer's head mean mixed half-and-half with the identity, rows renormalised.

    attentions: (L, H, T, T) -> (L, T, T); a row of zeros or NaN passes the token through.
    """
    values = np.nan_to_num(np.asarray(attentions, dtype=np.float64))  # (L, H, T, T)
    T = values.shape[-1]
    mixed = 0.5 * values.mean(axis=1) + 0.5 * np.eye(T)  # (L, T, T)
    return mixed / mixed.sum(axis=-1, keepdims=True)


def attention_flow(
    attentions: np.ndarray,
    upto: int | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The attention flow from every input token (columns) to every output (rows): (T, T).

    attentions: (L, H, T, T); `upto` is the last layer included (None: the last one).
    `progress(n)` is called after each output token's n flows.
    """
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    values = np.asarray(attentions)
    if values.ndim != 4 or values.shape[2] != values.shape[3] or 0 in values.shape:
        raise ValueError(f"attentions must be (L, H, T, T) and non-empty, got {values.shape}")
    L, _, T, _ = values.shape
    if T > MAX_FLOW_TOKENS:
        raise BadInput(
            f"attention flow solves T² maximum flows, so it takes at most {MAX_FLOW_TOKENS} "
            f"pieces and this text has {T}: shorten the text, or use rollout (the default method)"
        )
    last = L - 1 if upto is None else resolve_index(upto, L, "layer", "upto")
    mixed = residual_mixed(values[: last + 1])  # (l, T, T)
    layers = last + 1
    # Node (l, t) is l·T + t; an edge from (l, j) to (l + 1, i) carries Â_l[i, j].
    l_idx, i_idx, j_idx = np.meshgrid(np.arange(layers), np.arange(T), np.arange(T), indexing="ij")
    capacity = np.rint(mixed * CAPACITY_SCALE).astype(np.int32)  # (l, T, T)
    keep = capacity > 0
    graph = csr_array(
        (capacity[keep], ((l_idx * T + j_idx)[keep], ((l_idx + 1) * T + i_idx)[keep])),
        shape=((layers + 1) * T, (layers + 1) * T),
    )
    flows = np.zeros((T, T))  # (outputs, inputs)
    for i in range(T):
        sink = layers * T + i
        for j in range(T):
            flows[i, j] = maximum_flow(graph, j, sink).flow_value / CAPACITY_SCALE
        if progress is not None:
            progress(T)
    totals = flows.sum(axis=-1, keepdims=True)
    return flows / np.where(totals > 0, totals, 1.0)

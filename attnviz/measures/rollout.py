"""Attention rollout (Abnar & Zuidema 2020): how much each output token draws on each input.

One layer's attention says where a token looks within that layer; rollout chains
the layers to estimate how much of each input token ends up in each position.
The residual connection is modelled by mixing each layer's head mean with the
identity:

    Â_l = rownorm(0.5 · mean_h A_l + 0.5 · I)
    R   = Â_upto ⋯ Â_1 · Â_0          (each later layer multiplies from the left)

Rows of R are output positions, columns input tokens, and each row sums to 1.

Word units: rollout is computed over the model's own pieces and merged into words
afterwards with `attnviz.measures.select.merge_words` (sum over a word's input pieces, mean
over its output pieces). The chain has to run over pieces, because each layer mixes
pieces, not words; merging after keeps rows summing to 1.

Pure numpy; no torch here.
"""

from __future__ import annotations

import numpy as np

from attnviz.errors import BadInput
from attnviz.limits import resolve_index

__all__ = ["rollout", "top_sources"]


def rollout(
    attentions: np.ndarray, upto: int | None = None, *, residual: bool = True
) -> np.ndarray:
    """Attention rollout from the input up to layer `upto`, as a (T, T) matrix.

    attentions: (L, H, T, T), rows are queries and sum to 1. A row of zeros (a
    query whose keys were all masked) or of NaN counts as attending to nothing,
    so that layer passes the token through unchanged (its Â row is the identity
    row). `upto` is a 0-based layer, inclusive; negative counts from the end;
    None means the last layer. Computed in float64; returns float64 (T, T) with
    rows that sum to 1: row i tells how much output position i draws on each input.
    `residual=False` chains the rows as they are, only normalised: for contribution
    measures that already contain the residual connection (ALTI, norm-res-ln).
    """
    values = np.asarray(attentions)  # (L, H, T, T); each layer widened to float64 in turn
    if values.ndim != 4 or values.shape[2] != values.shape[3] or 0 in values.shape:
        raise ValueError(f"attentions must be (L, H, T, T) and non-empty, got {values.shape}")
    L, _, T, _ = values.shape
    last = L - 1 if upto is None else resolve_index(upto, L, "layer", "upto")
    eye = np.eye(T)  # (T, T)
    result = eye
    for layer in range(last + 1):
        heads = np.nan_to_num(  # (H, T, T) float64: one layer at a time, not a copy of all
            values[layer].astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0, copy=False
        )
        mixed = heads.mean(axis=0)  # (T, T)
        if residual:
            mixed = 0.5 * mixed + 0.5 * eye  # every row sums to >= 0.5
        totals = mixed.sum(axis=-1, keepdims=True)
        mixed = np.where(totals > 0, mixed / np.where(totals > 0, totals, 1.0), eye)  # rows: 1
        result = mixed @ result  # (T, T): this layer applied after the ones below
    return result


def top_sources(matrix: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """For each row of `matrix` (T, T), the `k` columns with the largest values.

    Each entry is (input index, share), largest share first; ties go to the lower
    index. Fewer than `k` entries come back when the matrix has fewer columns.
    """
    if isinstance(k, bool) or k < 1:
        raise BadInput(f"the number of top sources must be at least 1, got {k}")
    values = np.asarray(matrix, dtype=np.float64)  # (T, T)
    if values.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {values.shape}")
    order = np.argsort(-values, axis=-1, kind="stable")[:, :k]  # (T, k)
    shares = np.take_along_axis(values, order, axis=-1)  # (T, k)
    return [
        [(int(j), float(s)) for j, s in zip(row_order, row_shares, strict=True)]
        for row_order, row_shares in zip(order.tolist(), shares.tolist(), strict=True)
    ]

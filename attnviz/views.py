"""Views of an attention array: pick a layer and head, average heads, merge word pieces.

Pure numpy functions of the attention array `[layers, heads, T, T]` (rows are
queries, columns keys). No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnviz.errors import BadInput


def resolve_index(value: int, size: int, what: str) -> int:
    """A 0-based index that may count from the end (-1 is the last), checked against `size`."""
    if not -size <= value < size:
        raise BadInput(
            f"{what} {value} is out of range: this model has {size} {what}s, "
            f"use 0..{size - 1} (or -{size}..-1 from the end)"
        )
    return value % size


def select(attentions: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """One layer's attention for one head, or the mean over its heads when `head` is None."""
    L, H = attentions.shape[:2]
    per_layer = attentions[resolve_index(layer, L, "layer")]  # (H, T, T)
    if head is None:
        return per_layer.mean(axis=0)  # (T, T)
    return per_layer[resolve_index(head, H, "head")]  # (T, T)


def merge_words(matrix: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Attention between words instead of pieces.

    Attention TO a word is the sum over its pieces (the query's weight spread over
    the word); attention FROM a word is the mean over its pieces. Rows that summed
    to 1 still do. `matrix` is (..., T, T); the result is (..., W, W).
    """
    T = matrix.shape[-1]
    membership = np.zeros((T, len(groups)), dtype=matrix.dtype)  # (T, W): piece -> word
    for w, pieces in enumerate(groups):
        membership[list(pieces), w] = 1.0
    if not np.all(membership.sum(axis=1) == 1):
        raise ValueError("every piece must belong to exactly one word")
    to_words = matrix @ membership  # (..., T, W): sum over a key word's pieces
    mean_rows = membership / membership.sum(axis=0, keepdims=True)  # (T, W)
    return np.swapaxes(mean_rows, 0, 1) @ to_words  # (..., W, W): mean over a query word's pieces


PAIR_MARK = "B:"


def pair_marked(labels: Sequence[str], start: int | None) -> list[str]:
    """`labels` with the first piece (or word) of a sentence pair's B, at `start`, marked `B:`."""
    marked = list(labels)
    if start is not None:
        marked[start] = PAIR_MARK + marked[start]
    return marked

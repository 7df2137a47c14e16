"""What the explanation view reads of one head's attention for one query.

`attnviz.measures.explain.Explanation` has these (and more); the view takes anything
that has them, so that the terminal floor never imports the measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

__all__ = ["Explained"]


class Explained(Protocol):
    """Every number of one query's attention in one head, read-only (shapes: T pieces,
    d_k = head_size, C = hidden_size)."""

    # The model, the head and the query.
    @property
    def model(self) -> str: ...
    @property
    def layer(self) -> int: ...
    @property
    def head(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def head_size(self) -> int: ...
    @property
    def causal(self) -> bool: ...  # computed with the causal what-if mask
    @property
    def decoder(self) -> bool: ...  # the mask is the model's own causal mask
    @property
    def labels(self) -> Sequence[str]: ...  # (T,) pieces as they appear in the text
    @property
    def words(self) -> Sequence[str]: ...  # (T,) the word each piece belongs to
    @property
    def query(self) -> int: ...  # the query's piece index
    @property
    def word_pieces(self) -> Sequence[int]: ...  # the pieces of the query's word
    @property
    def num_pieces(self) -> int: ...  # T
    @property
    def head_columns(self) -> range: ...  # the columns of Q, K, V of this head
    @property
    def kv_columns(self) -> range: ...  # the columns of K and V this head reads

    # The steps.
    @property
    def q(self) -> np.ndarray: ...  # (d_k,)
    @property
    def k(self) -> np.ndarray: ...  # (T, d_k)
    @property
    def scale(self) -> float: ...
    @property
    def raw_scores(self) -> np.ndarray: ...  # (T,) q·kⱼ
    @property
    def scaled_scores(self) -> np.ndarray: ...  # (T,)
    @property
    def hidden(self) -> np.ndarray: ...  # (T,) bool, True where the mask hides the key
    @property
    def weights(self) -> np.ndarray: ...  # (T,)
    @property
    def weight_sum(self) -> float: ...
    @property
    def top_weight(self) -> int: ...  # the key with the largest weight
    @property
    def transformed_norms(self) -> np.ndarray: ...  # (T,) ‖f(xⱼ)‖
    @property
    def contributions(self) -> np.ndarray: ...  # (T,) ‖wⱼ f(xⱼ)‖
    @property
    def top_contribution(self) -> int: ...  # the key with the largest contribution
    @property
    def sink(self) -> int | None: ...  # the top-weighted key when it adds little: a sink
    @property
    def others_median_norm(self) -> float: ...  # median ‖f(xⱼ)‖ of the other keys seen
    @property
    def share_norms(self) -> np.ndarray | None: ...  # (T,) what the head writes, per query
    @property
    def head_share_norms(self) -> np.ndarray | None: ...  # (h,) for this query, per head
    @property
    def parked_share(self) -> float | None: ...  # the share of queries parked on the sink
    @property
    def head_output(self) -> np.ndarray: ...  # (d_k,)
    @property
    def head_share(self) -> np.ndarray: ...  # (C,)
    @property
    def output_norm(self) -> float: ...

    # Decoders: the pre-norm, grouped-query attention, the window, rotary positions, biases.
    @property
    def norm(self) -> str | None: ...
    @property
    def kv_head(self) -> int | None: ...
    @property
    def num_kv_heads(self) -> int | None: ...
    @property
    def groups(self) -> int: ...  # query heads per key/value head
    @property
    def window(self) -> int | None: ...
    @property
    def angles(self) -> np.ndarray | None: ...  # (d_k/2,)
    @property
    def rope_theta(self) -> float | None: ...
    @property
    def rope_type(self) -> str | None: ...
    @property
    def q_unrotated(self) -> np.ndarray | None: ...  # (d_k,)
    @property
    def k_unrotated(self) -> np.ndarray | None: ...  # (T, d_k)
    @property
    def scale_root(self) -> bool: ...
    @property
    def scale_layer(self) -> int | None: ...
    @property
    def qkv_bias(self) -> bool: ...
    @property
    def out_bias(self) -> bool: ...
    # Gemma 2 and 3, Qwen3, Phi-3
    @property
    def q_unnormed(self) -> np.ndarray | None: ...  # (d_k,) before QK-norm
    @property
    def k_unnormed(self) -> np.ndarray | None: ...  # (T, d_k)
    @property
    def softcap(self) -> float | None: ...
    @property
    def capped_scores(self) -> np.ndarray | None: ...  # (T,)
    @property
    def query_pre_attn_scalar(self) -> float | None: ...
    @property
    def rope_local(self) -> bool: ...
    @property
    def rope_global_theta(self) -> float | None: ...
    @property
    def rotary_dims(self) -> int | None: ...

"""The model run for long inputs: each layer's attention in blocks of queries, never whole.

Not part of the lesson (that is `MultiHeadAttention.forward`, which this module leaves as
it is). A row of attention weights depends only on its own query once the mask is applied,
so a layer's (nh, T, T) weights can be computed `block` queries at a time: the scores of
the block (nh, block, T), the mask, the softmax, the weighted sum of the values. Each
block is handed to `reduce(layer, start, weights)` and dropped; memory is one block's
nh·block·T numbers instead of L·nh·T·T. The layer's output, and so every later layer, is
the same as the lesson's.

`run_blocked` does this by giving each `MultiHeadAttention` of the model, for the length
of the run, a forward of its own (`_blocked_forward`) built from the module's own
projections; the layers around the attention (norms, feed-forward, positions) run as
written.

Names as in attnviz.model.attention: B batch, T tokens, C width, nh heads, hs head size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from attnviz.model.attention import MultiHeadAttention, Rotary

if TYPE_CHECKING:
    from torch import nn

# reduce(layer, first query of the block, weights (nh, block, T) float32); rows sum to 1.
Reducer = Callable[[int, int, torch.Tensor], None]

# Queries per block: 9 heads × 256 queries × 8,192 keys is 75 MB of float32 scores.
BLOCK_QUERIES = 256


def run_blocked(
    model: nn.Module,
    input_ids: torch.Tensor,
    token_type_ids: torch.Tensor | None,
    reduce: Reducer,
    *,
    num_layers: int,
    causal: bool = False,
    block: int = BLOCK_QUERIES,
) -> None:
    """Run `model` (an Encoder or a Decoder) on `input_ids` (1, T), calling `reduce` with
    every layer's weights, `block` queries at a time, and keeping none of them."""
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    spans = _HiddenSpans()
    counter = [0]  # the layer now running: layers run in order, and ALBERT shares one module

    def forward(
        attn: MultiHeadAttention,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        weights_out: torch.Tensor | None = None,
        rotary: Rotary | None = None,
        past: object = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if past is not None:
            raise ValueError("the blocked run reads one whole input: no key/value cache")
        layer = counter[0]
        counter[0] += 1
        out = _blocked_forward(
            attn, queries, mask, rotary, lambda s, w: reduce(layer, s, w), block, causal, spans
        )
        return out, queries.new_empty(0)  # the layer loop keeps no weights (keep_weights)

    for attn in attentions:
        attn.forward = _bind(forward, attn)  # type: ignore[method-assign]
    try:
        with torch.inference_mode():
            # every layer runs, and no (nh, T, T) slot is reserved for any
            model(input_ids, token_type_ids, causal=causal, layers=[num_layers - 1],
                  keep_weights=False)  # fmt: skip
    finally:
        for attn in attentions:
            del attn.forward  # the class's forward (the lesson) again


def _bind(
    forward: Callable[..., tuple[torch.Tensor, torch.Tensor]], attn: MultiHeadAttention
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    def bound(*args: object, **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
        return forward(attn, *args, **kwargs)

    return bound


def _blocked_forward(
    attn: MultiHeadAttention,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    rotary: Rotary | None,
    reduce: Callable[[int, torch.Tensor], None],
    block: int,
    causal: bool,
    spans: _HiddenSpans,
) -> torch.Tensor:
    """Self-attention of `x` (1, T, C) as `MultiHeadAttention.forward` computes it, `block`
    queries at a time; each block's weights go to `reduce(start, weights (nh, block, K))`.

    `causal` (the mask hides every key after its query): a block's keys stop at its last
    query, K = its end, and the keys after weigh 0 without being computed. Else K = T.
    """
    B, T, _ = x.shape
    q = attn.split_heads(attn.q_proj(x))  # (B, nh, T, hs)
    k = attn.split_heads(attn.k_proj(x))  # (B, n_kv, T, hs)
    v = attn.split_heads(attn.v_proj(x))  # (B, n_kv, T, hs)
    if attn.q_norm is not None and attn.k_norm is not None:  # QK-norm (Qwen3, Gemma 3)
        q, k = attn.q_norm(q), attn.k_norm(k)
    if rotary is not None:
        q, k = rotary.rotate(q), rotary.rotate(k)
    if attn.groups > 1:  # grouped-query attention: query head h reads key/value head h // g
        k = k.repeat_interleave(attn.groups, dim=1)  # (B, nh, T, hs)
        v = v.repeat_interleave(attn.groups, dim=1)  # (B, nh, T, hs)
    q = q * attn.scale
    heads = torch.empty_like(q)  # (B, nh, T, hs)
    nh = q.shape[1]
    kt = k.transpose(-2, -1)  # (B, nh, hs, T)
    # Every block's scores and weights are written into this one buffer: a new tensor of
    # this size per block is fresh pages from the system each time (the commands return
    # freed memory to it), and filling those cost more than the softmax.
    buffer = q.new_empty(B * nh * min(block, T) * T)
    for start in range(0, T, block):
        end = min(T, start + block)
        b = end - start
        K = end if causal else T  # the keys any query of the block may see
        scores = buffer[: B * nh * b * K].view(B, nh, b, K)
        torch.matmul(q[:, :, start:end], kt[..., :K], out=scores)  # (B, nh, b, K)
        if attn.softcap is not None:  # soft-capping (Gemma 2)
            scores.div_(attn.softcap).tanh_().mul_(attn.softcap)
        empty_rows = False
        if mask is not None:
            first, last, empty_rows = spans.of(mask, start, end, K)
            if first < last:  # the keys hidden from some query of the block: −∞
                hidden = mask if mask.shape[-2] == 1 else mask[..., start:end, :]  # (.., b|1, T)
                scores[..., first:last].masked_fill_(hidden[..., first:last], -math.inf)
        weights = torch.softmax(scores, dim=-1, out=scores)  # (B, nh, b, K): rows sum to 1
        if empty_rows:
            weights.nan_to_num_(0.0)  # a query that may see no key gets zeros, not NaN
        reduce(start, weights[0].float())  # (nh, b, K)
        heads[:, :, start:end] = weights @ v[:, :, :K]  # (B, nh, b, hs)
    joined = heads.transpose(1, 2).reshape(B, T, -1)  # (B, T, nh·hs)
    return attn.out_proj(joined)  # (B, T, C)


class _HiddenSpans:
    """Where a mask hides keys from each block of queries, worked out once per mask: every
    layer of a decoder (each layer with the same sliding window) passes the same one."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int, int], tuple[torch.Tensor, int, int, bool]] = {}

    def of(self, mask: torch.Tensor, start: int, end: int, K: int) -> tuple[int, int, bool]:
        """(first, last, empty) for queries start..end−1 and keys 0..K−1 of `mask`
        (.., T or 1, T): the keys hidden from any of them lie in first..last−1 (first ==
        last when none is), and `empty` says whether some query may see no key at all."""
        key = (id(mask), start, K)
        if key not in self._seen:
            hidden = mask if mask.shape[-2] == 1 else mask[..., start:end, :]  # (.., b|1, T)
            hidden = hidden[..., :K].reshape(-1, K)  # (rows, K)
            columns = torch.nonzero(hidden.any(dim=0))  # (n, 1): hidden from some query
            first, last = (int(columns[0]), int(columns[-1]) + 1) if len(columns) else (0, 0)
            # the mask is kept with its answer, so that its id is never another tensor's
            self._seen[key] = (mask, first, last, bool(hidden.all(dim=-1).any()))
        _, first, last, empty = self._seen[key]
        return first, last, empty

"""Multi-head attention written from scratch, as the lessons teach it: every model runs this one.

The steps, each a visible line of `MultiHeadAttention.forward`: project the queries, keys
and values; split them into heads; score every query against every key with a dot
product; divide by sqrt(d_k); hide masked keys; softmax; take the weighted sum of the
values; join the heads; apply the output projection.

Steps the decoders add are options of the same attention: `Rotary` turns q and k by
their positions' angles (RoPE); fewer key/value heads than query heads is grouped-query
attention; QK-norm (Qwen3, Gemma 3) normalises each head's q and k before the turn; and
soft-capping (Gemma 2) squashes the scores into (-cap, cap) before the mask.

Names used throughout: B batch, T tokens (Tq queries, Tk keys), C embedding width,
nh query heads, n_kv key/value heads, hs head size (C // nh).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:  # typing.Self is Python 3.11+; nothing here is imported at run time
    from typing_extensions import Self


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention run by `num_heads` heads in parallel.

    `forward(queries, keys, values, mask)` returns the outputs (B, T, C) and the
    attention weights of every head (B, nh, Tq, Tk). `mask` is a bool tensor
    broadcastable to (B, nh, Tq, Tk) where True hides a key from a query.

    Two steps of the decoders (attnviz.model.decoder) are options here, so that every model
    runs this one attention: `rotary` turns q and k by their positions' angles after the
    split into heads, and `num_kv_heads` < `num_heads` is grouped-query attention, where
    each key/value head serves `num_heads // num_kv_heads` query heads. `head_size`
    (default C // nh) and `scale` (default 1 / sqrt(hs)) are what a config may set, and
    so are `q_norm` and `k_norm` (modules over the last dimension, hs: QK-norm) and
    `softcap` (scores become tanh(s / cap) · cap).

    The lesson is `forward`. Its speed-ups for inference, marked as such, give the same
    numbers: without gradients the softmax works in place (in `weights_out` when given),
    and the methods under "Fused Q/K/V" project q, k and v with one matmul.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        *,
        num_kv_heads: int | None = None,
        head_size: int | None = None,
        out_bias: bool | None = None,
        scale: float | None = None,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        softcap: float | None = None,
    ) -> None:
        super().__init__()
        if head_size is None and embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        num_kv_heads = num_kv_heads or num_heads
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads {num_heads} is not a multiple of n_kv {num_kv_heads}")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.groups = num_heads // num_kv_heads  # query heads that read one key/value head
        self.head_size = head_size or embed_dim // num_heads
        self.scale = scale if scale is not None else 1 / math.sqrt(self.head_size)
        q_width, kv_width = num_heads * self.head_size, num_kv_heads * self.head_size
        self.q_proj = nn.Linear(embed_dim, q_width, bias=bias)
        self.k_proj = nn.Linear(embed_dim, kv_width, bias=bias)
        self.v_proj = nn.Linear(embed_dim, kv_width, bias=bias)
        self.out_proj = nn.Linear(q_width, embed_dim, bias=bias if out_bias is None else out_bias)
        self.widths = (q_width, kv_width, kv_width)  # rows of W_Q, W_K, W_V
        self.q_norm, self.k_norm, self.softcap = q_norm, k_norm, softcap
        # Ablation and patching (Decoder.head_replaced): a change to the joined heads' outputs
        # (B, Tq, nh·hs) before the output projection; it may return more rows than it got.
        self.edit: Callable[[torch.Tensor], torch.Tensor] | None = None
        # Set by fuse_projections(); buffers, so that .to(device) moves them too.
        self.fused_weight: torch.Tensor | None
        self.fused_bias: torch.Tensor | None
        self.register_buffer("fused_weight", None, persistent=False)
        self.register_buffer("fused_bias", None, persistent=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n·hs) -> (B, n, T, hs): n is nh for queries, n_kv for keys and values."""
        B, T, _ = x.shape
        return x.view(B, T, -1, self.head_size).transpose(1, 2)  # (B, n, T, hs)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        weights_out: torch.Tensor | None = None,
        rotary: Rotary | None = None,
        past: PastKeys | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`weights_out` (B, nh, Tq, Tk), when given, receives the weights (no extra copy).

        `rotary` holds the angles of the positions (queries and keys are the same tokens).
        `past` (generation) holds the keys and values of the tokens before these: the new
        ones are added to it, and the queries score every key, earlier and new.
        """
        B, Tq, _ = queries.shape
        if self._can_fuse(queries, keys, values):  # speed-up: the same q, k, v in one matmul
            q, k, v = self._project_fused(queries)
        else:  # project, and split into heads of hs
            q = self.split_heads(self.q_proj(queries))  # (B, nh, Tq, hs)
            k = self.split_heads(self.k_proj(keys))  # (B, n_kv, Tk, hs)
            v = self.split_heads(self.v_proj(values))  # (B, n_kv, Tk, hs)
        if self.q_norm is not None and self.k_norm is not None:  # QK-norm: each head's q, k
            q, k = self.q_norm(q), self.k_norm(k)  # (B, nh, Tq, hs), (B, n_kv, Tk, hs)
        if rotary is not None:
            q, k = rotary.rotate(q), rotary.rotate(k)  # each pair of features turned by its angle
        if past is not None:  # generation: the cached keys and values of the earlier tokens
            k, v = past.extend(k, v)  # (B, n_kv, T_past + Tq, hs) each
        if self.groups > 1:  # grouped-query attention: query head h reads key/value head h // g
            k = k.repeat_interleave(self.groups, dim=1)  # (B, nh, Tk, hs)
            v = v.repeat_interleave(self.groups, dim=1)  # (B, nh, Tk, hs)

        q = q * self.scale  # scale by 1/sqrt(d_k), on Tq·hs numbers rather than Tq·Tk scores
        # Speed-up: with no gradient wanted, the scores are written into `weights_out` and the
        # softmax overwrites them (one T·T array per layer, not three); the numbers are the same.
        fast = not torch.is_grad_enabled()
        if weights_out is not None and (not fast or weights_out.dtype != q.dtype):
            weights_out = None
        scores = torch.matmul(q, k.transpose(-2, -1), out=weights_out)  # (B, nh, Tq, Tk)
        if self.softcap is not None:  # soft-capping: every score squashed into (-cap, cap)
            scores = torch.tanh(scores / self.softcap) * self.softcap  # (B, nh, Tq, Tk)
        weights = _masked_softmax(scores, mask, fast)  # (B, nh, Tq, Tk): hidden keys weigh 0
        heads = weights @ v  # (B, nh, Tq, hs): the weighted sum of the values
        joined = heads.transpose(1, 2).reshape(B, Tq, -1)  # (B, Tq, nh·hs): heads side by side
        if self.edit is not None:  # not the lesson: one head's output removed or patched
            joined = self.edit(joined)  # (B', Tq, nh·hs)
        return self.out_proj(joined), weights  # (B, Tq, C), (B, nh, Tq, Tk)

    def self_weights(
        self, x: torch.Tensor, mask: torch.Tensor | None, weights_out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The weights (B, nh, T, T) of self-attention over `x` (B, T, C), without the rest.

        Not the lesson: a speed-up for a caller that wants only the weights (the statistics
        of the last layer). The values, their weighted sum and the output projection are not
        computed; the weights are the numbers `forward` gives. Without the fused projections,
        or with a step the encoders do not have (rotary, grouped heads, QK-norm,
        soft-capping), it is `forward`'s weights.
        """
        plain = self.groups == 1 and self.q_norm is None and self.softcap is None
        if not (plain and self._can_fuse(x, x, x)):
            return self.forward(x, x, x, mask, weights_out)[1]
        assert self.fused_weight is not None
        B, T, _ = x.shape
        width = 2 * self.widths[0]  # the rows of W_Q and W_K: no values
        bias = None if self.fused_bias is None else self.fused_bias[:width]
        qk = F.linear(x, self.fused_weight[:width], bias)  # (B, T, 2·nh·hs)
        q, k = qk.view(B, T, 2, self.num_heads, self.head_size).permute(2, 0, 3, 1, 4)
        q = q * self.scale  # (B, nh, T, hs)
        if weights_out is not None and weights_out.dtype != q.dtype:
            weights_out = None
        scores = torch.matmul(q, k.transpose(-2, -1), out=weights_out)  # (B, nh, T, T)
        return _masked_softmax(scores, mask, fast=True)

    # -----------------------------------------------------------------------
    # Fused Q/K/V: not part of the lesson. After fuse_projections(), self-attention
    # without gradients computes q, k and v with one matmul instead of three.

    def fuse_projections(self) -> None:
        """Keep W_Q, W_K, W_V (and biases) in one tensor; q_proj etc. become views of it.

        Self-attention then projects with one matmul instead of three, which runs
        faster on a CPU; the numbers are the same, and `q_proj`, `k_proj`, `v_proj`
        still hold (views of) the model's weights for anyone who reads them. The fused
        path is taken only while those views are intact and no gradient is wanted;
        otherwise the three projections run as before.
        """
        if self._fused_in_sync():
            return  # ALBERT's shared layer sits in every slot: fuse once
        projections = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([p.weight.detach() for p in projections])  # (q + 2·kv, C)
        self.fused_weight = weight
        for p, part in zip(projections, weight.split(self.widths), strict=True):
            p.weight = nn.Parameter(part)
        self.fused_bias = None
        if self.q_proj.bias is not None:
            bias = torch.cat([p.bias.detach() for p in projections])  # (q + 2·kv,)
            self.fused_bias = bias
            for p, part in zip(projections, bias.split(self.widths), strict=True):
                p.bias = nn.Parameter(part)

    def _can_fuse(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> bool:
        """Self-attention, no gradient wanted, and the fused tensors still the weights."""
        return not torch.is_grad_enabled() and queries is keys is values and self._fused_in_sync()

    def _project_fused(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The projections of `forward` split into heads, with one matmul: q (B, nh, T, hs), k
        and v (B, n_kv, T, hs)."""
        assert self.fused_weight is not None
        B, T, _ = x.shape
        qkv = F.linear(x, self.fused_weight, self.fused_bias)  # (B, T, q + 2·kv)
        if self.groups == 1:
            qkv = qkv.view(B, T, 3, self.num_heads, self.head_size)  # (B, T, 3, nh, hs)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
            return q, k, v
        q, k, v = qkv.split(self.widths, dim=-1)  # (B, T, q), (B, T, kv), (B, T, kv)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def _fused_in_sync(self) -> bool:
        """Whether q_proj, k_proj and v_proj are still views of the fused tensors."""
        weight, bias = self.fused_weight, self.fused_bias
        if weight is None:
            return False
        start = 0
        for p, width in zip((self.q_proj, self.k_proj, self.v_proj), self.widths, strict=True):
            if p.weight.data_ptr() != weight[start].data_ptr() or p.weight.dtype != weight.dtype:
                return False
            if p.bias is not None and (bias is None or p.bias.data_ptr() != bias[start].data_ptr()):
                return False
            start += width
        return True

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        """After .to(), .half() and the like, fuse again: the views would point at old memory."""
        fused = self.fused_weight is not None
        super()._apply(fn, recurse)
        if fused:
            self.fused_weight = None
            self.fuse_projections()
        return self


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, fast: bool) -> torch.Tensor:
    """Hide the masked keys of `scores` (B, nh, Tq, Tk), softmax each row (in place when
    `fast`: no gradient wanted); a query that may see no key at all gets zeros, not NaN.

    Speed-up: a padding mask (B, 1, 1, Tk), the same for every query, is added as 0 or -inf:
    an add broadcast over the queries runs about ten times faster than `masked_fill_`, and
    gives the same finite scores (s + 0 = s, s + -inf = -inf).
    """
    if mask is not None and mask.shape[-2] == 1:  # padding: the same keys hidden from each query
        hide = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)  # (B, 1, 1, Tk)
        scores.add_(hide.masked_fill_(mask, -math.inf))  # (B, nh, Tq, Tk)
    elif mask is not None:
        scores.masked_fill_(mask, -math.inf)  # (B, nh, Tq, Tk): a hidden key weighs 0
    weights = torch.softmax(scores, dim=-1, out=scores if fast else None)  # rows sum to 1
    if mask is not None and bool(mask.all(dim=-1).any()):
        weights = weights.nan_to_num_(0.0) if fast else weights.nan_to_num(0.0)
    return weights


class PastKeys:
    """One layer's key/value cache: the keys and values of the tokens read so far.

    Generation reads one new token per step; its key and value are appended here
    (keys already turned by their positions), so its query scores every earlier key
    without running the earlier tokens again.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # (B, n_kv, T_past, hs)
        self.values: torch.Tensor | None = None  # (B, n_kv, T_past, hs)

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' k and v (B, n_kv, Tq, hs); return all of them so far."""
        if self.keys is not None and self.values is not None:
            k = torch.cat([self.keys, k], dim=2)  # (B, n_kv, T_past + Tq, hs)
            v = torch.cat([self.values, v], dim=2)  # (B, n_kv, T_past + Tq, hs)
        self.keys, self.values = k, v
        return k, v


class Rotary:
    """Rotary position embedding (RoPE): the angles of T positions, applied to q and k.

    Feature i of a head is paired with feature i + hs/2; position p turns each pair by
    p · inv_freq[i]. A dot product of a turned q and a turned k then depends on how far
    apart the two positions are, not on where they sit.

    With fewer frequencies than hs/2 (Phi-3's partial_rotary_factor) only the first
    2·len(inv_freq) = r features are turned, the rest pass as they are; `scaling` (LongRoPE's
    attention factor) multiplies cos and sin.
    """

    def __init__(
        self,
        inv_freq: torch.Tensor,
        positions: torch.Tensor,
        dtype: torch.dtype,
        scaling: float = 1.0,
    ) -> None:
        angles = positions.float()[:, None] * inv_freq.float()[None, :]  # (T, r/2)
        angles = torch.cat([angles, angles], dim=-1)  # (T, r): each pair shares its angle
        self.angles = angles
        self.cos = (angles.cos() * scaling).to(dtype)  # (T, r)
        self.sin = (angles.sin() * scaling).to(dtype)  # (T, r)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, n, T, hs) turned: (x1, x2) -> (x1·cos - x2·sin, x2·cos + x1·sin)."""
        r = self.cos.shape[-1]  # features turned: hs, or fewer (partial rotation)
        x, rest = (x, None) if r == x.shape[-1] else (x[..., :r], x[..., r:])  # (B, n, T, r)
        x1, x2 = x[..., : r // 2], x[..., r // 2 :]  # (B, n, T, r/2) each
        turned = torch.cat([-x2, x1], dim=-1)  # (B, n, T, r): x rotated a quarter turn
        x = x * self.cos + turned * self.sin  # (B, n, T, r)
        return x if rest is None else torch.cat([x, rest], dim=-1)  # (B, n, T, hs)

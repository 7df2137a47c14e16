"""A BERT-family encoder written from scratch, built on one multi-head attention.

The attention follows the steps of the lesson, each a visible line: project the
queries, keys and values; split them into heads; score every query against every
key with a dot product; divide by sqrt(d_k); hide masked keys; softmax; take the
weighted sum of the values; join the heads; apply the output projection.

The BERT family differs only around that attention: RoBERTa and XLM-RoBERTa
number positions after the padding index, DistilBERT has no token types,
ELECTRA and ALBERT embed in a narrower width E and project up to C, and ALBERT
runs one layer's weights L times. `EncoderConfig` names each difference.

Names used throughout: B batch, T tokens, C embedding width (hidden size),
E embedding table width, nh heads, hs head size (C // nh), L layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:  # typing.Self is Python 3.11+; nothing here is imported at run time
    from typing_extensions import Self


@dataclass(frozen=True)
class EncoderConfig:
    """The shape of a BERT-family encoder; everything the modules below need.

    The defaults are BERT's; each later field is one way a family departs from it.
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int  # rows of the position table
    type_vocab_size: int = 2  # 0: no token type table (DistilBERT)
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    embedding_size: int | None = None  # E when the tables are narrower than C (ELECTRA, ALBERT)
    project_embeddings: bool = False  # a Linear E -> C after the embedding LayerNorm
    pad_position: int | None = None  # RoBERTa: real tokens sit at pad + 1, pad + 2, ...
    shared_layers: bool = False  # ALBERT: one layer's weights in every one of the L slots

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def embedding_width(self) -> int:
        """E, the width of the embedding tables (C unless the family factorises them)."""
        return self.embedding_size if self.embedding_size is not None else self.hidden_size


def _quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


# The feed-forward activations this encoder computes, by their names in config.json.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    "quick_gelu": _quick_gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention run by `num_heads` heads in parallel.

    `forward(queries, keys, values, mask)` returns the outputs (B, T, C) and the
    attention weights of every head (B, nh, Tq, Tk). `mask` is a bool tensor
    broadcastable to (B, nh, Tq, Tk) where True hides a key from a query.

    Two steps of the decoders (attnviz.model.decoder) are options here, so that every model
    runs this one attention: `rotary` turns q and k by their positions' angles after the
    split into heads, and `num_kv_heads` < `num_heads` is grouped-query attention, where
    each key/value head serves `num_heads // num_kv_heads` query heads. `head_size`
    (default C // nh) and `scale` (default 1 / sqrt(hs)) are what a config may set.

    The lesson is `_project` and `forward`. The methods after them, under "Fused
    Q/K/V", are a CPU speed-up for inference that gives the same numbers.
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
        # Set by fuse_projections(); buffers, so that .to(device) moves them too.
        self.fused_weight: torch.Tensor | None
        self.fused_bias: torch.Tensor | None
        self.register_buffer("fused_weight", None, persistent=False)
        self.register_buffer("fused_bias", None, persistent=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n·hs) -> (B, n, T, hs): n is nh for queries, n_kv for keys and values."""
        B, T, _ = x.shape
        return x.view(B, T, -1, self.head_size).transpose(1, 2)  # (B, n, T, hs)

    def _project(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project the queries, keys and values, and split each into heads of hs."""
        if self._can_fuse(queries, keys, values):
            return self._project_fused(queries)  # the same q, k, v from one matmul
        q = self.split_heads(self.q_proj(queries))  # (B, nh, Tq, hs)
        k = self.split_heads(self.k_proj(keys))  # (B, n_kv, Tk, hs)
        v = self.split_heads(self.v_proj(values))  # (B, n_kv, Tk, hs)
        return q, k, v

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        weights_out: torch.Tensor | None = None,
        rotary: Rotary | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`weights_out` (B, nh, Tq, Tk), when given, receives the weights (no extra copy).

        `rotary` holds the angles of the positions (queries and keys are the same tokens).
        """
        B, Tq, _ = queries.shape
        fast = not torch.is_grad_enabled()  # in-place steps have no gradient
        q, k, v = self._project(queries, keys, values)  # (B, nh, Tq, hs), k and v (B, n_kv, Tk, hs)
        if rotary is not None:
            q, k = rotary.rotate(q), rotary.rotate(k)  # each pair of features turned by its angle
        if self.groups > 1:  # grouped-query attention: query head h reads key/value head h // g
            k = k.repeat_interleave(self.groups, dim=1)  # (B, nh, Tk, hs)
            v = v.repeat_interleave(self.groups, dim=1)  # (B, nh, Tk, hs)

        q = q * self.scale  # the 1/sqrt(d_k) scale, on Tq·hs numbers, not Tq·Tk
        if fast:  # the same steps with no extra Tq·Tk array (see _weights_in_place)
            weights = self._weights_in_place(q, k, mask, weights_out)
        else:
            scores = q @ k.transpose(-2, -1)  # (B, nh, Tq, Tk): q·k / sqrt(d_k)
            if mask is not None:
                scores = scores.masked_fill(mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)  # (B, nh, Tq, Tk), each row sums to 1
        if mask is not None and bool(mask.all(dim=-1).any()):
            # A query that may see no key at all gets zeros, not NaN.
            weights = weights.nan_to_num_(0.0) if fast else weights.nan_to_num(0.0)

        heads = weights @ v  # (B, nh, Tq, hs)
        joined = heads.transpose(1, 2).reshape(B, Tq, -1)  # (B, Tq, nh·hs)
        return self.out_proj(joined), weights

    @staticmethod
    def _weights_in_place(
        q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, out: torch.Tensor | None
    ) -> torch.Tensor:
        """scores, mask and softmax in one Tq·Tk array: `out` (B, nh, Tq, Tk) when given.

        Without gradients the scores need not survive the softmax, so it overwrites them;
        a long input then holds one T·T array per layer, not three.
        """
        if out is not None and out.dtype == q.dtype:
            scores = torch.matmul(q, k.transpose(-2, -1), out=out)  # (B, nh, Tq, Tk)
        else:
            scores = q @ k.transpose(-2, -1)  # (B, nh, Tq, Tk)
        if mask is not None:
            scores.masked_fill_(mask, float("-inf"))
        return torch.softmax(scores, dim=-1, out=scores)  # in place

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
        """`_project(x, x, x)` with one matmul: q (B, nh, T, hs), k and v (B, n_kv, T, hs)."""
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


class Rotary:
    """Rotary position embedding (RoPE): the angles of T positions, applied to q and k.

    Feature i of a head is paired with feature i + hs/2; position p turns each pair by
    p · inv_freq[i]. A dot product of a turned q and a turned k then depends on how far
    apart the two positions are, not on where they sit.
    """

    def __init__(self, inv_freq: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> None:
        angles = positions.float()[:, None] * inv_freq.float()[None, :]  # (T, hs/2)
        angles = torch.cat([angles, angles], dim=-1)  # (T, hs): each pair shares its angle
        self.angles = angles
        self.cos = angles.cos().to(dtype)  # (T, hs)
        self.sin = angles.sin().to(dtype)  # (T, hs)

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, n, T, hs) turned: (x1, x2) -> (x1·cos - x2·sin, x2·cos + x1·sin)."""
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]  # (B, n, T, hs/2) each
        turned = torch.cat([-x2, x1], dim=-1)  # (B, n, T, hs): x rotated a quarter turn
        return x * self.cos + turned * self.sin  # (B, n, T, hs)


class Embeddings(nn.Module):
    """Word + position (+ token type) embeddings, LayerNorm, then (ELECTRA, ALBERT) E -> C."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        E = cfg.embedding_width
        self.pad_position = cfg.pad_position
        self.word = nn.Embedding(cfg.vocab_size, E)
        self.position = nn.Embedding(cfg.max_positions, E)
        self.token_type = nn.Embedding(cfg.type_vocab_size, E) if cfg.type_vocab_size else None
        self.norm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.project = nn.Linear(E, cfg.hidden_size) if cfg.project_embeddings else None

    def positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Each piece's row in the position table: (1, T) counting from 0, or (B, T) RoBERTa's."""
        if self.pad_position is None:
            return torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # (1, T)
        real = (input_ids != self.pad_position).long()  # (B, T): 1 for a real token
        # RoBERTa (after fairseq): real tokens count from pad + 1, padding stays at pad.
        return real.cumsum(dim=1) * real + self.pad_position  # (B, T)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        x = self.word(input_ids)  # (B, T, E)
        if self.token_type is not None:
            if token_type_ids is None or self.token_type.num_embeddings == 1:
                token_type_ids = torch.zeros_like(input_ids)  # one segment: every piece is type 0
            x = x + self.token_type(token_type_ids)  # (B, T, E)
        x = x + self.position(self.positions(input_ids))  # (B, T, E) + (1 or B, T, E)
        x = self.norm(x)  # (B, T, E)
        return self.project(x) if self.project is not None else x  # (B, T, C)


class EncoderLayer(nn.Module):
    """Self-attention, residual + LayerNorm, feed-forward, residual + LayerNorm."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(cfg.hidden_size, cfg.num_heads)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.ff_in = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ff_out = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.ff_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.activation = ACTIVATIONS[cfg.hidden_act]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        weights_out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attention(x, x, x, mask, weights_out)  # (B, T, C), (B, nh, T, T)
        x = self.attention_norm(x + attended)  # (B, T, C)
        hidden = self.activation(self.ff_in(x))  # (B, T, intermediate)
        x = self.ff_norm(x + self.ff_out(hidden))  # (B, T, C)
        return x, weights


def hiding_mask(
    attention_mask: torch.Tensor | None, causal: bool, T: int, device: torch.device
) -> torch.Tensor | None:
    """The bool mask the attention takes (True hides a key), or None when nothing is hidden.

    `attention_mask` (B, T) is 1 for real tokens and 0 for padding; `causal` also
    hides the keys after each query.
    """
    mask = None
    if attention_mask is not None:
        mask = (attention_mask == 0)[:, None, None, :]  # (B, 1, 1, T): True hides a pad key
    if causal:
        later = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)  # (T, T): key > query
        mask = later if mask is None else mask | later  # (B, 1, T, T) or (T, T)
    return mask


class EncoderOutput(NamedTuple):
    hidden_states: torch.Tensor  # (B, T, C), the last layer's output
    attentions: torch.Tensor  # (L, B, nh, T, T)
    layer_inputs: torch.Tensor | None  # (L, B, T, C), what each layer read (keep_inputs=True)


class Encoder(nn.Module):
    """A BERT-family encoder that returns its last hidden states and every attention weight.

    With `shared_layers` (ALBERT) the same `EncoderLayer` object fills all L slots.
    """

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        if cfg.shared_layers:
            shared = EncoderLayer(cfg)
            self.layers = nn.ModuleList([shared] * cfg.num_layers)
        else:
            self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        causal: bool = False,
        keep_inputs: bool = False,
        layers: Sequence[int] | None = None,
    ) -> EncoderOutput:
        """`input_ids` (B, T); `attention_mask` (B, T) is 1 for real tokens, 0 for padding.

        `token_type_ids` (B, T) default to 0; a family with one segment (RoBERTa) or none
        (DistilBERT) ignores them. `causal` hides every later key from each query, a
        what-if the real model never does. `keep_inputs` also returns what each layer read
        (up to the last layer run). `layers` (default: all) are the layers whose attention
        is returned, in that order, as (len, B, nh, T, T); the layers after the last of them
        are not run (and `hidden_states` is then the last run's output).
        """
        mask = hiding_mask(attention_mask, causal, input_ids.shape[1], input_ids.device)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, C)
        B, T, _ = x.shape
        keep = list(range(len(self.layers))) if layers is None else list(layers)
        # Each layer's softmax writes straight into its slice: no copy of T·T arrays.
        weights = x.new_empty(len(keep), B, self.config.num_heads, T, T)  # (len, B, nh, T, T)
        inputs, written = [], {}
        last = max(keep, default=-1)
        for i, layer in enumerate(self.layers):
            if i > last:
                break  # a later layer cannot change an earlier one's attention
            if keep_inputs:
                inputs.append(x)
            slot = keep.index(i) if i in keep else None
            x, w = layer(x, mask, weights[slot] if slot is not None else None)
            if slot is not None:
                written[slot] = w
        if any(w.data_ptr() != weights[s].data_ptr() for s, w in written.items()):
            weights = torch.stack([written[s] for s in range(len(keep))])  # autograd's path
        return EncoderOutput(x, weights, torch.stack(inputs) if keep_inputs else None)

    def fuse_projections(self) -> None:
        """One Q/K/V matmul per layer from now on (see MultiHeadAttention.fuse_projections)."""
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.fuse_projections()

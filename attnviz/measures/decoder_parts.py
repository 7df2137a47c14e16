"""The measures of `attnviz.measures.contributions` on pre-norm decoders (GPT-2, the Llama family).

A pre-norm decoder layer normalises *before* attention, then adds the attention's output
to the residual stream:

    r_i = x_i + Σ_h Σ_j α^h_ij f_h(n_j) + b_O,    n_j = Norm(x_j),
    f_h(n) = (n W_V + b_V)[kv(h)] W_O[h]

Norm (GPT-2's LayerNorm, Llama's RMSNorm) acts on each token alone: n_j depends on x_j
and nothing else. So the sum splits over keys exactly, with nothing linearised:

    T_i(x_j) = Σ_h α^h_ij f_h(n_j) + [i = j] x_i,    r_i = Σ_j T_i(x_j) + b_O.

The parts stop at r_i, the residual stream between the attention and the feed-forward.
The next norm (GPT-2's ln_2, Llama's post_attention_layernorm) opens the feed-forward
sub-layer and is not part of the attention block: a post-norm encoder's LayerNorm closes
its attention block, which is why Kobayashi et al. (2021) fix its scale there. ALTI-Logit
(Ferrando et al. 2023) decomposes a decoder's residual stream the same way.

`norm` is α^h_ij ‖f_h(n_j)‖ per head, `norm-res-ln` ‖T_i(x_j)‖, `alti` the L1 closeness
of T_i(x_j) to r_i with rows normalised to 1. `value-zeroing` zeroes key j's value vector
(in every key/value head, so in every query head that reads it), runs the rest of the
layer as the model does (residual, norms, feed-forward) and measures each token's cosine
distance. Under grouped-query attention key/value head h // g serves query head h. A key
the causal mask (or a sliding window) hides from query i has α_ij = 0 in every head: its
cell is exactly 0 in every measure.

A family is a row of `DECODER_FACTS`, read from its file in `attnviz.model.families`: which
module of a layer is the norm before its attention, and whether a norm sits on the
attention's output before the residual (Gemma 2 and 3 have one; then P_i(z) = g ⊙ z / s_i
with s_i the RMS of query i's attention output, linear once s_i is fixed).
A family without a row is refused in one line.

Names: T pieces, C hidden size, nh query heads, n_kv key/value heads, hs head size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from attnviz.errors import BadInput
from attnviz.model.families import DECODERS

if TYPE_CHECKING:
    import torch
    from torch import nn

    from attnviz.model.attention import MultiHeadAttention

__all__ = [
    "DECODER_FACTS",
    "DecoderFacts",
    "LayerCall",
    "alti_shares",
    "attention_of",
    "check_decoder",
    "decoder_decomposed",
    "decoder_value_zeroing",
    "head_transforms",
    "head_values",
    "input_norm",
]


@dataclass(frozen=True)
class DecoderFacts:
    """Where a decoder family's norms sit around attention, by the layer's module names.

    `input_norm` is the module applied to the layer's input before attention (its output
    is what the value projection reads); `output_norm`, when set, is an RMS norm on the
    attention's output before the residual sum (Gemma 2 and 3's post-attention norm).
    Every layer calls its attention module `attention`.
    """

    family: str  # the name in messages
    input_norm: str  # "norm1": LayerNorm (GPT-2) or RMSNorm (Llama family)
    output_norm: str | None = None


# The families whose decompositions tests/test_decoder_measures.py checks against
# transformers' own modules in float64.
DECODER_FACTS: dict[str, DecoderFacts] = {
    model_type: DecoderFacts(family.name, family.input_norm, family.output_norm)
    for model_type, family in DECODERS.items()
}


def check_decoder(model_type: str, family: str, measure: str, model: str) -> DecoderFacts:
    """The facts of a decoder family; BadInput, in one line naming it, for one not checked."""
    facts = DECODER_FACTS.get(model_type)
    if facts is None:
        checked = ", ".join(f.family for f in DECODER_FACTS.values())
        raise BadInput(
            f"{{measure}} {measure} has not been checked on {family} decoders ({model}); "
            f"attnviz measures it on {checked} decoders: use {{measure}} weight",
            param="measure",
        )
    return facts


def attention_of(layer: nn.Module) -> MultiHeadAttention:
    """A decoder layer's attention (every family's layer calls it `attention`)."""
    return cast("MultiHeadAttention", layer.attention)


def input_norm(layer: nn.Module, facts: DecoderFacts, x: torch.Tensor) -> torch.Tensor:
    """n = Norm(x), what the layer's attention reads: (T, C) -> (T, C)."""
    norm: Callable[[torch.Tensor], torch.Tensor] = getattr(layer, facts.input_norm)
    return norm(x[None])[0]  # (T, C)


def head_values(attention: MultiHeadAttention, n: torch.Tensor) -> torch.Tensor:
    """The value vectors each query head reads: (T, C) -> (nh, T, hs)."""
    V = attention.split_heads(attention.v_proj(n)[None])[0]  # (n_kv, T, hs)
    return V.repeat_interleave(attention.groups, dim=0)  # (nh, T, hs): head h reads h // g


def head_transforms(attention: MultiHeadAttention, n: torch.Tensor) -> torch.Tensor:
    """f_h(n_j) for every query head and key: (T, C) -> (nh, T, C)."""
    nh, hs = attention.num_heads, attention.head_size
    W_O = attention.out_proj.weight.view(-1, nh, hs).permute(1, 2, 0)  # (nh, hs, C): per head
    return head_values(attention, n) @ W_O  # (nh, T, C)


def _output_scale(
    layer: nn.Module, facts: DecoderFacts, attended: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For a family with a norm on the attention's output: its gain g (C,) and each query's
    scale s_i (T, 1), so that the norm's output is g ⊙ a_i / s_i. None without one."""
    import torch

    if facts.output_norm is None:
        return None
    norm = getattr(layer, facts.output_norm)
    C = attended.shape[-1]
    ones = torch.ones(1, C, dtype=attended.dtype)  # (1, C): an RMS of 1, so s = sqrt(1 + eps)
    gain = norm(ones)[0] * (1 + norm.eps) ** 0.5  # (C,): g
    scale = (attended.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()  # (T, 1): s_i
    return gain, scale


def decoder_decomposed(
    layer: nn.Module,
    facts: DecoderFacts,
    x: torch.Tensor,
    weights: torch.Tensor,
    numbers: int,
    *,
    alti: bool,
) -> torch.Tensor:
    """‖T_i(x_j)‖ (norm-res-ln) or ALTI's contributions (`alti`) of one layer: (T, T).

    `x` (T, C) is what the layer reads, `weights` (nh, T, T) its attention; `numbers` bounds
    the (queries, T, C) arrays of one chunk.
    """
    import torch

    attention = attention_of(layer)
    T, C = x.shape
    n = input_norm(layer, facts, x)  # (T, C)
    V = head_values(attention, n)  # (nh, T, hs)
    f = head_transforms(attention, n)  # (nh, T, C): f_h(n_j)
    attended = attention.out_proj((weights @ V).transpose(0, 1).reshape(T, -1))  # (T, C), + b_O
    scaled = _output_scale(layer, facts, attended)
    if scaled is None:
        r = x + attended  # (T, C): the residual stream after the attention
    else:
        gain, scale = scaled
        r = x + gain * attended / scale  # (T, C)
    rows = max(1, numbers // (T * C))  # queries per chunk
    result = []
    for start in range(0, T, rows):
        qs = slice(start, min(T, start + rows))
        z = torch.einsum("hij,hjc->ijc", weights[:, qs], f)  # (q, T, C): Σ_h α_ij f_h(n_j)
        if scaled is not None:
            z = gain * z / scale[qs, None]  # (q, T, C): through the output norm, s_i fixed
        q = torch.arange(qs.start, qs.stop)
        z[q - qs.start, q] += x[qs]  # the residual: token i's own x_i
        result.append(alti_shares(r[qs], z) if alti else z.norm(dim=-1))  # (q, T)
    return torch.cat(result)  # (T, T)


def alti_shares(y: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """ALTI's contributions (Ferrando et al. 2022) of `parts` (q, T, C), each key's part of the
    outputs `y` (q, C): the closeness ‖y‖₁ − ‖y − T‖₁, clamped at 0, as a share of its row."""
    y_q = y[:, None]  # (q, 1, C)
    closeness = y_q.abs().sum(-1) - (y_q - parts).abs().sum(-1)  # (q, T): ‖y‖₁ − ‖y − T‖₁
    closeness = closeness.clamp_min(0)
    return closeness / closeness.sum(dim=-1, keepdim=True).clamp_min(1e-12)  # (q, T)


@dataclass
class LayerCall:
    """How the decoder called one layer (its arguments after x: mask, rotary, ...), kept by
    a forward pre-hook so that value zeroing reruns the layer exactly as the model did."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None

    def hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args, self.kwargs = args[1:], dict(kwargs)


def decoder_value_zeroing(
    layer: nn.Module,
    facts: DecoderFacts,
    call: LayerCall,
    x: torch.Tensor,
    weights: torch.Tensor,
    numbers: int,
    ff_width: int,
) -> torch.Tensor:
    """Cosine distance of each token's layer output when key j's value is zeroed, rows
    normalised to 1: (T, T). Keys no head of the query sees give exactly 0.

    The layer runs as the model runs it (`call`), with its attention's output replaced by
    the zeroed one: every norm and the feed-forward are the model's own modules. `numbers`
    bounds the (keys, T, max(C, `ff_width`)) arrays of one chunk.
    """
    import torch
    import torch.nn.functional as F

    attention = attention_of(layer)
    T, C = x.shape
    n = input_norm(layer, facts, x)  # (T, C)
    V = head_values(attention, n)  # (nh, T, hs)
    heads = weights @ V  # (nh, T, hs): every value in place

    def outputs(head_outputs: torch.Tensor) -> torch.Tensor:  # (B, nh, T, hs) -> (B, T, C)
        B = head_outputs.shape[0]
        joined = head_outputs.transpose(1, 2).reshape(B, T, -1)  # (B, T, nh·hs)
        attended = attention.out_proj(joined)  # (B, T, C): the attention's output, v_j zeroed

        def once(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            one = args[0][:1]  # (1, T, C): the batch repeats one input; attend once
            return (one, one, one, args[3], None, *args[5:])  # no weights written

        def replace(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            return attended, output[1]

        handles = [
            attention.register_forward_pre_hook(once),
            attention.register_forward_hook(replace),
        ]
        try:
            out = layer(x.expand(B, T, C), *call.args, **(call.kwargs or {}))
        finally:
            for handle in handles:
                handle.remove()
        return out[0] if isinstance(out, tuple) else out  # (B, T, C)

    original = outputs(heads[None])  # (1, T, C)
    width = max(C, ff_width, attention.num_heads * attention.head_size)
    chunk = max(1, numbers // (T * width))  # keys per chunk
    distances = []
    for start in range(0, T, chunk):
        js = slice(start, min(T, start + chunk))
        # Zeroing v_j removes α_ij v_j from each query's head output: a rank-1 change per j.
        removed = (
            weights[:, :, js].permute(2, 0, 1)[..., None] * V[:, js].transpose(0, 1)[:, :, None]
        )
        moved = outputs(heads[None] - removed)  # (j, T, C): every output, v_j zeroed
        distances.append(1 - F.cosine_similarity(original, moved, dim=-1))  # (j, T)
    distance = torch.cat(distances).T.clamp_min(0)  # (T, Tj): rows are the tokens that moved
    distance = distance * (weights > 0).any(dim=0)  # a key no head sees moves nothing: 0
    return distance / distance.sum(dim=-1, keepdim=True).clamp_min(1e-12)  # rows sum to 1

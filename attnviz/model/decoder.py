"""Decoders written from scratch on the same `MultiHeadAttention`: GPT-2 and the Llama family.

A decoder is the lesson's attention with the causal mask as the model's own: each
token sees itself and the tokens before it, never those after. The two kinds here
differ around that attention:

- GPT-2: learned position embeddings added to the tokens, LayerNorm *before* each
  sub-layer (pre-LN), and a GELU feed-forward;
- Llama, Mistral, Qwen2 (SmolLM, TinyLlama): no position table; instead rotary position
  embeddings (RoPE) turn q and k by their position's angle after the split into heads.
  Fewer key/value heads than query heads (grouped-query attention), RMSNorm, and a
  gated SiLU feed-forward (SwiGLU). Mistral, and some Qwen2 layers, look back at most
  `sliding_window` tokens. Qwen3 normalises each head's q and k (QK-norm); Phi-3 may turn
  only part of each head, and stretch its rotation for long inputs (LongRoPE);
- Gemma 2 and 3, the Llama kind with: embeddings scaled by sqrt(C), RMSNorm gains of
  1 + weight, a norm after the attention and after the feed-forward as well as before,
  a GELU-gated feed-forward, a scale set by query_pre_attn_scalar, sliding windows in some
  layers; Gemma 2 soft-caps the scores, Gemma 3 has QK-norm and its sliding layers their
  own rotary base.

Names as in attnviz.model.attention: B batch, T tokens, C hidden size, nh query heads,
n_kv key/value heads, hs head size, L layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnviz.model.attention import MultiHeadAttention, PastKeys, Rotary
from attnviz.model.config import DecoderConfig
from attnviz.model.layers import ACTIVATIONS, EncoderOutput, LayerStep, run_layers


class Trace(NamedTuple):
    """One input's run, kept for ablation and patching (`Decoder.trace`)."""

    inputs: torch.Tensor  # (L, T, C): what each layer read
    joined: torch.Tensor  # (L, T, nh·hs): each attention's heads side by side, before W_O
    last: torch.Tensor  # (C,): the last token's final-normed hidden state


# (layer, the joined heads' outputs that layer computed (T, nh·hs)) -> what each head's output
# becomes in the copy that changes it (nh, T, hs).
HeadValues = Callable[[int, torch.Tensor], torch.Tensor]


def rotary_frequencies(cfg: DecoderConfig, local: bool = False, length: int = 0) -> torch.Tensor:
    """inv_freq (r/2,): the angle per position of each feature pair, with `rope_scaling`.

    "default" is theta^(-2i/r), r the features turned (hs, or Phi-3's share of it). "linear"
    divides every frequency by `factor`; "llama3" (Llama 3.1) divides only the slow ones,
    blending in between; "longrope" (Phi-3) divides each by its own short factor, or long
    factor when the input (`length` tokens) is longer than the trained length. `local`:
    Gemma 3's sliding layers, with their own base.
    """
    r = cfg.turned
    theta = cfg.local_rope_theta if local and cfg.local_rope_theta is not None else cfg.rope_theta
    scaling = dict(cfg.local_rope_scaling if local else cfg.rope_scaling)
    exponents = torch.arange(0, r, 2, dtype=torch.int64).float() / r  # (r/2,)
    kind = scaling.get("rope_type", "default")
    if kind == "longrope":
        long = length > scaling["original_max_position_embeddings"]
        factors = torch.tensor(scaling["long_factor" if long else "short_factor"])  # (r/2,)
        return 1.0 / (factors * theta**exponents)
    inv_freq = 1.0 / (theta**exponents)
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind == "llama3":
        factor, low = scaling["factor"], scaling["low_freq_factor"]
        high = scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inv_freq  # (hs/2,) tokens per full turn
        slow = wavelength > old / low  # turns too slowly for the trained length: stretch
        fast = wavelength < old / high  # turns fast: keep
        smooth = (old / wavelength - low) / (high - low)  # 0..1 between the two
        blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        return torch.where(slow, inv_freq / factor, torch.where(fast, inv_freq, blended))
    return inv_freq


def rope_attention_factor(cfg: DecoderConfig, local: bool = False) -> float:
    """LongRoPE's factor on cos and sin (1 for every other rotation)."""
    return float(
        dict(cfg.local_rope_scaling if local else cfg.rope_scaling).get("attention_factor", 1.0)
    )


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) times a learned gain; no mean subtracted, no bias (Llama).

    `plus_one` (Gemma): the gain is 1 + weight, applied in float32 before the cast back.
    """

    def __init__(self, width: int, eps: float, plus_one: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps
        self.plus_one = plus_one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()  # (B, T, C), the mean of squares in float32 as the reference does
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.plus_one:  # Gemma: x · (1 + w), in float32
            return (x32 * (1.0 + self.weight.float())).to(x.dtype)  # (B, T, C)
        return self.weight * x32.to(x.dtype)  # (B, T, C)


class DecoderLayer(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + feed-forward(norm(x)).

    Gemma also normalises what each sub-layer returns: x + norm(attention(norm(x))).
    """

    def __init__(self, cfg: DecoderConfig, index: int) -> None:
        super().__init__()
        C, hs = cfg.hidden_size, cfg.head_size
        offset = cfg.rms_offset  # Gemma: gains of 1 + weight
        self.attention = MultiHeadAttention(
            C,
            cfg.num_heads,
            bias=cfg.qkv_bias,
            num_kv_heads=cfg.num_kv_heads,
            head_size=hs,
            out_bias=cfg.out_bias,
            scale=cfg.scale(index),
            q_norm=RMSNorm(hs, cfg.norm_eps, offset) if cfg.qk_norm else None,
            k_norm=RMSNorm(hs, cfg.norm_eps, offset) if cfg.qk_norm else None,
            softcap=cfg.softcap,
        )
        if cfg.norm == "layer":  # GPT-2
            self.norm1: nn.Module = nn.LayerNorm(C, eps=cfg.norm_eps)
            self.norm2: nn.Module = nn.LayerNorm(C, eps=cfg.norm_eps)
        else:
            self.norm1 = RMSNorm(C, cfg.norm_eps, offset)
            self.norm2 = RMSNorm(C, cfg.norm_eps, offset)
        # Gemma: norms on the attention's and the feed-forward's outputs too.
        self.attention_out_norm = RMSNorm(C, cfg.norm_eps, True) if cfg.post_norms else None
        self.ff_out_norm = RMSNorm(C, cfg.norm_eps, True) if cfg.post_norms else None
        gated = cfg.gated_mlp
        self.ff_gate = nn.Linear(C, cfg.intermediate_size, cfg.mlp_bias) if gated else None
        self.ff_in = nn.Linear(C, cfg.intermediate_size, bias=cfg.mlp_bias)
        self.ff_out = nn.Linear(cfg.intermediate_size, C, bias=cfg.mlp_bias)
        self.activation = ACTIVATIONS[cfg.hidden_act]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        weights_out: torch.Tensor | None = None,
        rotary: Rotary | None = None,
        past: PastKeys | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.norm1(x)  # (B, T, C)
        attended, weights = self.attention(h, h, h, mask, weights_out, rotary, past)  # (B, T, C)
        if self.attention_out_norm is not None:  # Gemma
            attended = self.attention_out_norm(attended)  # (B, T, C)
        x = x + attended  # (B, T, C)
        h = self.norm2(x)  # (B, T, C)
        if self.ff_gate is None:  # GPT-2: act(h W_in) W_out
            hidden = self.activation(self.ff_in(h))  # (B, T, I)
        else:  # SwiGLU: act(h W_gate) * (h W_up), then W_down
            hidden = self.activation(self.ff_gate(h)) * self.ff_in(h)  # (B, T, I)
        out = self.ff_out(hidden)  # (B, T, C)
        if self.ff_out_norm is not None:  # Gemma
            out = self.ff_out_norm(out)  # (B, T, C)
        return x + out, weights  # (B, T, C)


def decoder_mask(
    T: int,
    window: int | None,
    attention_mask: torch.Tensor | None,
    device: torch.device,
    past: int = 0,
) -> torch.Tensor:
    """True hides a key: every key after the query, those `window` or more tokens back, padding.

    (T, T), or (B, 1, T, T) with `attention_mask` (B, T), 1 for real tokens. With `past`
    cached tokens before the T queries: (T, past + T), the queries at past, past + 1, ...
    """
    query = torch.arange(past, past + T, device=device)[:, None]  # (T, 1)
    key = torch.arange(past + T, device=device)[None, :]  # (1, past + T)
    hidden = key > query  # (T, T): the causal mask
    if window is not None:
        hidden |= key <= query - window  # the sliding window: only the last `window` tokens
    if attention_mask is not None:
        hidden = hidden | (attention_mask == 0)[:, None, None, :]  # (B, 1, T, T)
    return hidden


class Decoder(nn.Module):
    """A GPT-2 or Llama-family decoder that returns the attention weights of its layers.

    `layers` stops after a layer, since a later layer cannot change an earlier one's
    attention. The LM head (`logits`) is the token embedding read backwards when the
    model ties them, else its own `lm_head` (`head=True`, from the checkpoint); a decoder
    built with neither computes attention but cannot write (`can_write`).
    """

    def __init__(self, cfg: DecoderConfig, head: bool = False) -> None:
        super().__init__()
        self.config = cfg
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.positions = (
            nn.Embedding(cfg.max_positions, cfg.hidden_size) if cfg.learned_positions else None
        )
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_layers))
        self.final_norm: nn.Module = (
            nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
            if cfg.norm == "layer"
            else RMSNorm(cfg.hidden_size, cfg.norm_eps, cfg.rms_offset)
        )
        self.inv_freqs: dict[tuple[bool, int], torch.Tensor] = {}  # see _frequencies
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False) if head else None
        self.tied = cfg.tie_word_embeddings

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        causal: bool = True,
        keep_inputs: bool = False,
        layers: Sequence[int] | None = None,
        past: list[PastKeys] | None = None,
        keep_weights: bool = True,
    ) -> EncoderOutput:
        """`input_ids` (B, T); `attention_mask` (B, T) 1 for real tokens (right padding).

        Returns the attentions of `layers` (default: all), in that order, as (len, B, nh, T, T);
        the layers after the last of them are not run. `token_type_ids` and `causal` are
        accepted for the encoder's signature: a decoder has no segments and is always causal.
        `past` (generation: one `PastKeys` per layer) holds the tokens read before these;
        they sit at the positions after them, and the attentions are (L, B, nh, T, past + T).
        `keep_weights=False` keeps none (`run_layers`).
        """
        cfg = self.config
        T = input_ids.shape[1]
        start = len(past[0]) if past else 0  # tokens already read, whose keys are cached
        positions = torch.arange(start, start + T, device=input_ids.device)  # (T,)
        x = self.tokens(input_ids)  # (B, T, C)
        if cfg.embed_scale:  # Gemma: embeddings times sqrt(C), rounded to their dtype
            x = x * torch.tensor(cfg.hidden_size**0.5).to(x.dtype)  # (B, T, C)
        if self.positions is not None:  # GPT-2: a learned vector per position
            x = x + self.positions(positions)[None]  # (B, T, C)
        step = self.layer_steps(T, x.dtype, input_ids.device, attention_mask, start, past)
        out = run_layers(x, step, cfg.num_layers, cfg.num_heads, layers, keep_inputs, start,
                         keep_weights)  # fmt: skip
        last = cfg.num_layers - 1 if layers is None else max(layers, default=-1)
        if last == cfg.num_layers - 1:  # the whole stack ran: its final norm closes it
            out = out._replace(hidden_states=self.final_norm(out.hidden_states))  # (B, T, C)
        return out

    def layer_steps(
        self,
        T: int,
        dtype: torch.dtype,
        device: torch.device,
        attention_mask: torch.Tensor | None = None,
        start: int = 0,
        past: list[PastKeys] | None = None,
    ) -> LayerStep:
        """One layer's step over T tokens at positions start, start + 1, ...: its mask (one per
        sliding window) and its rotation (Llama: positions enter as rotations of q and k in
        every layer; Gemma 3's sliding layers have their own), each made once."""
        cfg = self.config
        positions = torch.arange(start, start + T, device=device)  # (T,)
        rotaries: dict[bool, Rotary] = {}
        if self.positions is None:
            for local in {cfg.local_rope(i) for i in range(cfg.num_layers)}:
                factor = rope_attention_factor(cfg, local)
                inv_freq = self._frequencies(local, start + T).to(device)  # (r/2,)
                rotaries[local] = Rotary(inv_freq, positions, dtype, factor)
        masks: dict[int | None, torch.Tensor] = {}  # one per sliding window

        def step(i: int, x: torch.Tensor, out: torch.Tensor | None) -> tuple[Tensor, Tensor]:
            window = cfg.window(i)
            if window not in masks:
                masks[window] = decoder_mask(T, window, attention_mask, device, start)
            rotary = rotaries.get(cfg.local_rope(i))
            cache = past[i] if past else None
            return self.layers[i](x, masks[window], out, rotary, cache)  # (B, T, C), weights

        return step

    @property
    def can_write(self) -> bool:
        """Whether the decoder has an LM head: tied to the embedding, or its own."""
        return self.tied or self.lm_head is not None

    def logits(self, hidden: torch.Tensor, ids: Sequence[int] | None = None) -> torch.Tensor:
        """The LM head: final-normed hidden states (B, T, C) -> next-token scores (B, T, V);
        with `ids`, only those tokens' scores (B, T, len(ids))."""
        if not self.can_write:
            raise ValueError("this decoder has no LM head (untied, and none was loaded)")
        weight = self.tokens.weight if self.lm_head is None else self.lm_head.weight  # (V, C)
        if ids is not None:
            weight = weight[list(ids)]  # (len(ids), C): only the rows asked for
        logits = F.linear(hidden, weight)  # (B, T, V): hidden · each vocabulary row
        cap = self.config.final_softcap
        if cap is not None:  # Gemma 2: squashed into (-cap, cap), the order unchanged
            logits = torch.tanh(logits / cap) * cap  # (B, T, V)
        return logits

    # -----------------------------------------------------------------------
    # Ablation and patching (attnviz.measures.ablation): one head's output replaced, all the
    # heads of a layer in one batch from that layer on.

    def attention(self, i: int) -> MultiHeadAttention:
        """Layer i's attention."""
        layer = self.layers[i]
        assert isinstance(layer, DecoderLayer)
        return layer.attention

    def trace(self, input_ids: torch.Tensor) -> Trace:
        """Run `input_ids` (1, T) keeping what each layer read and each attention's joined
        heads' outputs, the input of its output projection."""
        joined: list[torch.Tensor] = []

        def keep(z: torch.Tensor) -> torch.Tensor:
            joined.append(z)  # (1, T, nh·hs), unchanged
            return z

        attentions = [self.attention(i) for i in range(len(self.layers))]
        for attention in attentions:
            attention.edit = keep
        try:
            out = self(input_ids, keep_inputs=True)
        finally:
            for attention in attentions:
                attention.edit = None
        assert out.layer_inputs is not None
        return Trace(out.layer_inputs[:, 0], torch.cat(joined), out.hidden_states[0, -1])

    def head_replaced(
        self, inputs: torch.Tensor, layers: Sequence[int], values: HeadValues
    ) -> torch.Tensor:
        """The last token's final-normed hidden state (len(layers), nh, C) of copies of the input
        that each have one head's output replaced at one layer.

        Copy (i, h) reads `inputs[layers[i]]` (T, C) at layer `layers[i]`, where head h's slice of
        the output projection's input, [..., h·hs:(h+1)·hs], becomes `values(layer, joined)[h]`
        (T, hs); `joined` (T, nh·hs) is what that layer computed for the unchanged input. Every
        copy started runs each later layer in one batch with those that start there: nh copies
        at the first layer, nh · len(layers) at the last. `layers` ascending.
        """
        cfg = self.config
        nh, hs = cfg.num_heads, cfg.head_size
        T = inputs.shape[1]
        step = self.layer_steps(T, inputs.dtype, inputs.device)
        starts = set(layers)
        x = inputs.new_empty(0, T, cfg.hidden_size)  # (B, T, C): the copies running
        heads = torch.arange(nh, device=inputs.device)  # (nh,)
        for i in range(min(layers), cfg.num_layers):
            if i not in starts:
                x, _ = step(i, x, None)  # (B, T, C)
                continue
            B = x.shape[0]
            x = torch.cat([x, inputs[i][None].expand(nh, T, -1)])  # (B + nh, T, C)

            def edit(joined: torch.Tensor, i: int = i, B: int = B) -> torch.Tensor:
                by_head = joined.view(B + nh, T, nh, hs)  # (B + nh, T, nh, hs)
                new = values(i, joined[B].view(T, nh * hs))  # (nh, T, hs)
                by_head[B + heads, :, heads] = new.to(joined.dtype)  # copy B + h: head h
                return joined  # (B + nh, T, nh·hs)

            attention = self.attention(i)
            attention.edit = edit
            try:
                x, _ = step(i, x, None)  # (B + nh, T, C)
            finally:
                attention.edit = None
        return self.final_norm(x[:, -1]).view(len(layers), nh, -1)  # (len(layers), nh, C)

    def _frequencies(self, local: bool, length: int) -> torch.Tensor:
        """inv_freq for the sliding (`local`) or other layers, computed once per kind (Phi-3's
        LongRoPE: once for inputs up to its trained length and once for longer ones)."""
        scaling = dict(self.config.local_rope_scaling if local else self.config.rope_scaling)
        long = length > scaling.get("original_max_position_embeddings", length)
        key = (local, long)
        if key not in self.inv_freqs:
            self.inv_freqs[key] = rotary_frequencies(self.config, local, length)
        return self.inv_freqs[key]

    def fuse_projections(self) -> None:
        """One Q/K/V matmul per layer from now on (see MultiHeadAttention.fuse_projections)."""
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.fuse_projections()

"""The shapes of the models attnviz computes, as torch-free dataclasses.

`EncoderConfig` is a BERT-family encoder, `DecoderConfig` a GPT-2 or Llama-family
decoder: everything the modules of `attnviz.model.encoder` and `attnviz.model.decoder`
need to build one. The readers of config.json (`attnviz.model.families`, a reader a
family) fill them in and share the checks below. This module
never imports torch: a shape is known, and refused, before anything is allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from attnviz.errors import AttnvizError
from attnviz.limits import shown

# The feed-forward activations the layers compute (`attnviz.model.layers.ACTIVATIONS`),
# by their names in config.json; named here so that checking a config needs no torch (a
# test keeps the two in step).
ACTIVATION_NAMES = (
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "quick_gelu",
    "relu",
    "silu",
    "swish",
)


@dataclass(frozen=True)
class EncoderConfig:
    """The shape of a BERT-family encoder; everything its modules need.

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


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of a decoder, as its family's reader (`attnviz.model.families`) sets it:
    facts, never the family's name (`learned_positions`, `norm`, `rms_offset`,
    `embed_scale`, `post_norms` say how its layers are built)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    intermediate_size: int
    max_positions: int
    norm_eps: float
    hidden_act: str
    qkv_bias: bool = False  # Qwen2: biases on q, k, v; GPT-2: on every projection
    out_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False  # the LM head is the token embedding (else lm_head)
    # Llama family: rotary frequencies, and per layer how far back a token may look.
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, Any], ...] = ()  # ("rope_type", ...) pairs; () is none
    sliding_windows: tuple[int | None, ...] = ()  # per layer; (): no window anywhere
    # GPT-2: how its config scales the scores.
    scale_attn_weights: bool = True
    scale_by_inverse_layer: bool = False
    # Steps that Gemma 2 and 3, Qwen3 and Phi-3 add to the Llama decoder.
    qk_norm: bool = False  # Qwen3, Gemma 3: RMSNorm over each head's q and k before rotating
    softcap: float | None = None  # Gemma 2: scores squashed to tanh(s / cap) · cap
    final_softcap: float | None = None  # Gemma 2: logits squashed to tanh(z / cap) · cap
    query_pre_attn_scalar: float | None = None  # Gemma: the scale is its ** -0.5, not hs's
    local_rope_theta: float | None = None  # Gemma 3: the rotary base of the sliding layers
    local_rope_scaling: tuple[tuple[str, Any], ...] = ()  # Gemma 3: their rotary scaling
    rotary_dims: int | None = None  # Phi-3's partial_rotary_factor: features turned per head
    # How the layers are built (set by the family; shared code never asks for its name).
    learned_positions: bool = False  # GPT-2: a learned vector per position, no rotary
    norm: str = "rms"  # "layer" (LayerNorm, GPT-2) or "rms" (RMSNorm, the Llama family)
    rms_offset: bool = False  # Gemma: RMSNorm gains are 1 + weight
    embed_scale: bool = False  # Gemma: embeddings times sqrt(C)
    post_norms: bool = False  # Gemma: each sub-layer's output normalised before the residual
    gated_mlp: bool = True  # the Llama family's SwiGLU; GPT-2: act(h W_in) W_out

    def scale(self, layer: int) -> float:
        """The factor on q·k in `layer`: 1/sqrt(hs), and GPT-2's optional 1/(layer + 1);
        Gemma's query_pre_attn_scalar ** -0.5."""
        if self.query_pre_attn_scalar is not None:
            return float(self.query_pre_attn_scalar**-0.5)
        scale = 1 / math.sqrt(self.head_size) if self.scale_attn_weights else 1.0
        return scale / (layer + 1) if self.scale_by_inverse_layer else scale

    def window(self, layer: int) -> int | None:
        return self.sliding_windows[layer] if self.sliding_windows else None

    def local_rope(self, layer: int) -> bool:
        """Whether `layer` turns q and k with the sliding layers' own rotary base (Gemma 3)."""
        return self.local_rope_theta is not None and self.window(layer) is not None

    def rope_base(self, layer: int) -> float:
        """The rotary base θ of `layer`."""
        local = self.local_rope_theta
        return local if local is not None and self.window(layer) is not None else self.rope_theta

    def layer_rope_scaling(self, layer: int) -> tuple[tuple[str, Any], ...]:
        return self.local_rope_scaling if self.local_rope(layer) else self.rope_scaling

    @property
    def rope_type(self) -> str:
        return str(dict(self.rope_scaling).get("rope_type", "default"))

    @property
    def rotary(self) -> bool:
        """Whether positions enter as rotations of q and k (RoPE), not learned vectors."""
        return not self.learned_positions

    @property
    def turned(self) -> int:
        """Features of a head that the rotation turns: all hs, or Phi-3's partial share."""
        return self.rotary_dims if self.rotary_dims is not None else self.head_size


# ---------------------------------------------------------------------------------------------
# Checks on config.json values that both readers make.


def whole(value: object, low: int, high: int) -> bool:
    """Whether `value` is a whole number (not a bool) from `low` to `high`."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_activation(act: object, key: str, where: str) -> str:
    """`act`, the value of config key `key` in `where`, when the layers compute it."""
    if not isinstance(act, str) or act not in ACTIVATION_NAMES:
        raise AttnvizError(
            f"{where} uses {key}={shown(act)}, which attnviz does not compute; supported: "
            f"{', '.join(ACTIVATION_NAMES)}"
        )
    return act


def agreed(raw: dict[str, Any], keys: tuple[str, ...], where: str) -> tuple[str, Any] | None:
    """(key, value) of the first of `keys` that `raw` sets (a null counts as not set).

    `keys` name one setting (GPT-2's `n_embd` and its alias `hidden_size`): when two of
    them are set to different values, which one counts depends on the transformers
    version, so attnviz refuses the config in one line naming both, rather than pick one.
    """
    found = [(key, raw[key]) for key in keys if raw.get(key) is not None]
    for key, value in found[1:]:
        if not same(found[0][1], value):
            conflict(where, found[0], (key, value))
    return found[0] if found else None


def same(a: object, b: object) -> bool:
    """Whether two config values are the same (true is not 1, 2 is not 2.5)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def conflict(where: str, first: tuple[str, object], second: tuple[str, object]) -> None:
    """Refuse a config that sets one setting twice, in one line naming both keys."""
    raise AttnvizError(
        f"{where} has {first[0]}={shown(first[1], 40)} and {second[0]}={shown(second[1], 40)}, "
        "two values for one setting (transformers versions differ on which counts): make them "
        "agree or remove one"
    )

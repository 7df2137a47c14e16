"""Decoder families: what a GPT-2, Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 or Gemma 3
config.json says (no torch; rotary settings are read by `attnviz.model.rope_config`).

`describe_decoder` checks a decoder's config.json and returns its `DecoderConfig`:
every size a whole number in range, every setting that changes attention either
computed or refused in one line that names the key.Each family's
state-dict layout, GGUF names and norm facts are in `attnviz.model.families`.
"""

from __future__ import annotations

from typing import Any

from attnviz.errors import AttnvizError
from attnviz.model.config import (
    DecoderConfig,
    agreed,
    check_activation,
    conflict,
    shown,
    whole,
)
from attnviz.model.rope_config import positive, read_gemma3_rope, read_rope

DECODER_TYPES = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text")
# Gemma 3's multimodal config (text_config inside) is read by attnviz.model.families.
DECODER_NAMES = {
    "gpt2": "GPT-2",
    "llama": "Llama",
    "mistral": "Mistral",
    "qwen2": "Qwen2",
    "qwen3": "Qwen3",
    "phi3": "Phi-3",
    "gemma2": "Gemma 2",
    "gemma3_text": "Gemma 3",
    "gemma3": "Gemma 3",
}
GEMMA_TYPES = ("gemma2", "gemma3_text")
_QWEN = ("qwen2", "qwen3")
_TYPED = (*_QWEN, *GEMMA_TYPES)  # families whose config may list each layer's kind


_LIMITS = {"layers": 1024, "heads": 1024, "hidden": 65536, "intermediate": 262144}
_LIMITS.update({"positions": 1 << 20, "vocab": 4_000_000, "head_dim": 4096, "window": 1 << 20})

# The defaults of transformers' config classes, for keys a config.json leaves out. A key
# set to null is another thing: a null num_key_value_heads means one per query head, a
# null sliding_window no window.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12},
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "max_position_embeddings": 2048,
    },
}
_DEFAULTS["mistral"] = {
    **_DEFAULTS["llama"],
    "intermediate_size": 14336,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
}
_DEFAULTS["qwen2"] = {
    **_DEFAULTS["llama"],
    "vocab_size": 151936,
    "intermediate_size": 22016,
    "num_key_value_heads": 32,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "max_window_layers": 28,
}
_DEFAULTS["qwen3"] = {**_DEFAULTS["qwen2"], "head_dim": 128}
_DEFAULTS["phi3"] = {
    **_DEFAULTS["llama"],
    "vocab_size": 32064,
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
}
_DEFAULTS["gemma2"] = {
    "vocab_size": 256000,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "hidden_activation": "gelu_pytorch_tanh",
    "sliding_window": 4096,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
}
_DEFAULTS["gemma3_text"] = {
    **_DEFAULTS["gemma2"],
    "vocab_size": 262208,
    "max_position_embeddings": 131072,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
}
# GPT-2's config keys and the names transformers also accepts for them (its attribute_map).
_GPT2_ALIASES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
}


def describe_decoder(raw: dict[str, Any], model_type: str, where: str) -> DecoderConfig:
    """The decoder a config.json describes, checked before anything is allocated.

    A setting given by two keys that disagree (GPT-2's `n_embd` and `hidden_size`,
    `rope_parameters` and the older `rope_scaling`, `rope_theta` at the top and inside
    them) is refused in one line naming both; a key left out takes the default of the
    family's transformers config class.
    """
    name = DECODER_NAMES[model_type]
    defaults = _DEFAULTS[model_type]

    def size(key: str, default: Any, limit: str, low: int = 1) -> int:
        keys = (
            (key, _GPT2_ALIASES[key]) if model_type == "gpt2" and key in _GPT2_ALIASES else (key,)
        )
        found = agreed(raw, keys, where)
        if found is None:
            value = defaults.get(key)
            found = (key, default if value is None else value)
        key, value = found
        if not whole(value, low, _LIMITS[limit]):
            raise AttnvizError(
                f"{where} has {key}={shown(value)}; expected a whole number from {low} to "
                f"{_LIMITS[limit]}: the config is corrupt or not a {name}"
            )
        return int(value)

    def flag(key: str, default: bool) -> bool:
        value = raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise AttnvizError(
                f"{where} has {key}={shown(value)}; expected true or false: the config is corrupt"
            )
        return value

    def number(key: str, default: float) -> float:
        return positive(raw.get(key, default), key, where)

    if model_type == "gpt2":
        return _gpt2(raw, where, size, flag, number)
    return _llama(raw, model_type, where, size, flag, number)


def _gpt2(raw: dict[str, Any], where: str, size: Any, flag: Any, number: Any) -> DecoderConfig:
    layers = size("n_layer", 12, "layers")
    heads = size("n_head", 12, "heads")
    hidden = size("n_embd", 768, "hidden")
    if hidden % heads:
        raise AttnvizError(
            f"{where} has n_embd={hidden}, not divisible by n_head={heads}: the config is corrupt"
        )
    inner = size("n_inner", 4 * hidden, "intermediate")
    act = check_activation(raw.get("activation_function", "gelu_new"), "activation_function", where)
    eps = number("layer_norm_epsilon", 1e-5)
    if not eps < 1:
        raise AttnvizError(f"{where} has layer_norm_epsilon={eps}; expected a small number")
    # reorder_and_upcast_attn computes the same scores in float32: so does attnviz by default.
    flag("reorder_and_upcast_attn", False)
    return DecoderConfig(
        kind="gpt2",
        vocab_size=size("vocab_size", 50257, "vocab"),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_size=hidden // heads,
        intermediate_size=inner,
        max_positions=size("n_positions", 1024, "positions"),
        norm_eps=eps,
        hidden_act=act,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        tie_word_embeddings=flag("tie_word_embeddings", True),
        scale_attn_weights=flag("scale_attn_weights", True),
        scale_by_inverse_layer=flag("scale_attn_by_inverse_layer_idx", False),
        learned_positions=True,
        norm="layer",
        gated_mlp=False,
    )


def _llama(
    raw: dict[str, Any], model_type: str, where: str, size: Any, flag: Any, number: Any
) -> DecoderConfig:
    layers = size("num_hidden_layers", 32, "layers")
    heads = size("num_attention_heads", 32, "heads")
    hidden = size("hidden_size", 4096, "hidden")
    # Null (or left out of a Llama or Phi-3 config): one per query head; left out of
    # another family's config: the family's default (8 for Mistral, 32 for Qwen2).
    kv_heads = (
        heads
        if raw.get("num_key_value_heads") is None
        and ("num_key_value_heads" in raw or model_type in ("llama", "phi3"))
        else size("num_key_value_heads", heads, "heads")
    )
    if heads % kv_heads:
        raise AttnvizError(
            f"{where} has num_attention_heads={heads}, not a multiple of "
            f"num_key_value_heads={kv_heads}: the config is corrupt"
        )
    own_head_dim = raw.get("head_dim") is not None or "head_dim" in _DEFAULTS[model_type]
    if not own_head_dim and hidden % heads:
        raise AttnvizError(
            f"{where} has hidden_size={hidden}, not divisible by num_attention_heads={heads}, "
            "and no head_dim: the config is corrupt"
        )
    head_dim = size("head_dim", hidden // heads, "head_dim")
    if head_dim % 2:
        raise AttnvizError(
            f"{where} has head_dim={head_dim}; rotary embeddings need an even head size: the "
            "config is corrupt"
        )
    if raw.get("pretraining_tp", 1) not in (1, None):
        raise AttnvizError(
            f"{where} has pretraining_tp={shown(raw.get('pretraining_tp'))}; attnviz computes "
            "Llama with pretraining_tp 1 only (as transformers does by default): set it to 1"
        )
    gemma = model_type in GEMMA_TYPES
    if model_type == "gemma3_text":
        rope, local = read_gemma3_rope(raw, where)
    else:
        phi3 = model_type == "phi3"
        rope, local = read_rope(raw, where, phi3=phi3, head_dim=head_dim), None
    turned = int(head_dim * rope.partial)
    # Qwen2 always has q, k and v biases, Mistral and Phi-3 never; none has MLP biases but
    # Llama: transformers reads attention_bias for Llama, Qwen3 and Gemma, mlp_bias for Llama.
    llama = model_type == "llama"
    bias = model_type == "qwen2" or (
        model_type in ("llama", "qwen3", *GEMMA_TYPES) and flag("attention_bias", False)
    )
    act_key = "hidden_activation" if gemma else "hidden_act"
    return DecoderConfig(
        kind="gemma" if gemma else "llama",
        vocab_size=size("vocab_size", 32000, "vocab"),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_size=head_dim,
        intermediate_size=size("intermediate_size", 11008, "intermediate"),
        max_positions=size("max_position_embeddings", 2048, "positions"),
        norm_eps=number("rms_norm_eps", _DEFAULTS[model_type].get("rms_norm_eps", 1e-6)),
        hidden_act=check_activation(
            raw.get(act_key, _DEFAULTS[model_type].get(act_key, "silu")), act_key, where
        ),
        qkv_bias=bias,
        out_bias=bias and model_type != "qwen2",  # Qwen2's o_proj has no bias
        mlp_bias=llama and flag("mlp_bias", False),
        tie_word_embeddings=flag("tie_word_embeddings", gemma),  # Gemma ties by default
        rope_theta=rope.theta,
        rope_scaling=rope.scaling,
        sliding_windows=_windows(raw, model_type, layers, where, size, flag),
        qk_norm=model_type in ("qwen3", "gemma3_text"),
        softcap=_softcap(raw, model_type, where) if gemma else None,
        final_softcap=_final_softcap(raw, model_type, where) if gemma else None,
        query_pre_attn_scalar=number("query_pre_attn_scalar", 256) if gemma else None,
        local_rope_theta=local.theta if local is not None else None,
        local_rope_scaling=local.scaling if local is not None else (),
        rotary_dims=turned if turned != head_dim else None,
        rms_offset=gemma,
        embed_scale=gemma,
        post_norms=gemma,
    )


def _softcap(raw: dict[str, Any], model_type: str, where: str) -> float | None:
    """Gemma 2's attn_logit_softcapping (50 when left out, none when null).

    transformers 5 stores Gemma 3's but never applies it (nor does Gemma 3's own code
    set one): rather than guess, attnviz refuses a Gemma 3 config that sets it.
    """
    cap = raw.get("attn_logit_softcapping", _DEFAULTS[model_type].get("attn_logit_softcapping"))
    if cap is None:
        return None
    if model_type == "gemma3_text":
        raise AttnvizError(
            f"{where} has attn_logit_softcapping={shown(cap)}; transformers ignores it in Gemma 3 "
            "and Gemma 3 models have none, so attnviz does not guess: set it to null"
        )
    return positive(cap, "attn_logit_softcapping", where)


def _final_softcap(raw: dict[str, Any], model_type: str, where: str) -> float | None:
    """Gemma's final_logit_softcapping (Gemma 2: 30 when left out; none when null)."""
    cap = raw.get("final_logit_softcapping", _DEFAULTS[model_type].get("final_logit_softcapping"))
    return None if cap is None else positive(cap, "final_logit_softcapping", where)


def _windows(
    raw: dict[str, Any], model_type: str, layers: int, where: str, size: Any, flag: Any
) -> tuple[int | None, ...]:
    """How far back each layer looks (None: the whole prefix), from the family's keys.

    As transformers reads them: Mistral slides one window (4096 when left out, none when
    null) in every layer, and so does Phi-3 when it sets one; Qwen2 and Qwen3 only with
    use_sliding_window, in the layers `layer_types` names, else from max_window_layers (28
    when left out) on; Gemma in the layers `layer_types` names, else in all but every
    second (Gemma 2) or every `sliding_window_pattern`-th (Gemma 3, 6) layer. Llama has none.
    """
    if model_type == "llama":
        return ()
    types = raw.get("layer_types")  # transformers 5: each layer's kind
    if (
        model_type in _TYPED
        and types is not None
        and (
            not isinstance(types, list)
            or len(types) != layers
            or not all(t in ("full_attention", "sliding_attention") for t in types)
        )
    ):
        raise AttnvizError(
            f"{where} has layer_types={shown(types)}; expected one of full_attention or "
            f"sliding_attention for each of its {layers} layers: the config is corrupt"
        )
    if model_type in GEMMA_TYPES:
        return _gemma_windows(raw, model_type, types, layers, where, size, flag)
    if model_type in _QWEN and types is not None and "sliding_attention" in types:
        # Sliding layers with no window to slide: transformers 5 fails on them.
        if raw.get("sliding_window", 4096) is None:
            conflict(where, ("layer_types", types), ("sliding_window", None))
        if not flag("use_sliding_window", False):
            conflict(where, ("layer_types", types), ("use_sliding_window", False))
    if "sliding_window" in raw and raw["sliding_window"] is None:
        return ()
    if model_type == "phi3":  # one window in every layer, when the config sets one
        return (size("sliding_window", None, "window"),) * layers if "sliding_window" in raw else ()
    if model_type == "mistral":
        window = size("sliding_window", None, "window")
        if types is not None and types != ["sliding_attention"] * layers:
            raise AttnvizError(
                f"{where} has layer_types={shown(types)}: a Mistral whose layers alternate "
                "between a window and full attention (as Ministral's do), which attnviz does not "
                "compute; it computes Mistral with one window in every layer"
            )
        return (window,) * layers
    # Qwen2, Qwen3: without use_sliding_window no layer slides.
    if not flag("use_sliding_window", False):
        return ()
    window = size("sliding_window", None, "window")
    first = size("max_window_layers", layers, "layers", low=0)
    counted = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    if types is not None and types != counted:
        named = "max_window_layers" if "max_window_layers" in raw else "max_window_layers (default)"
        conflict(where, ("layer_types", types), (named, first))
    return tuple(window if t == "sliding_attention" else None for t in counted)


def _gemma_windows(
    raw: dict[str, Any],
    model_type: str,
    types: list[str] | None,
    layers: int,
    where: str,
    size: Any,
    flag: Any,
) -> tuple[int | None, ...]:
    """Gemma 2 and 3: a window (sliding_window, 4096 when left out) in the sliding layers."""
    if flag("use_bidirectional_attention", False):
        raise AttnvizError(
            f"{where} has use_bidirectional_attention=true (an embedding model that sees both "
            "ways); attnviz computes Gemma as a causal decoder: set it to false"
        )
    gemma2 = model_type == "gemma2"
    pattern_key = "sliding_window_pattern"
    pattern = 2 if gemma2 else raw.get(pattern_key)
    if pattern is not None and not whole(pattern, 1, _LIMITS["layers"]):
        raise AttnvizError(
            f"{where} has {pattern_key}={shown(pattern)}; expected a whole number from 1 to "
            f"{_LIMITS['layers']} (every how many layers one sees the whole prefix)"
        )
    every = 6 if pattern is None else pattern
    counted = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(layers)]
    if types is None:
        types = counted
    elif pattern is not None and not gemma2 and types != counted:
        conflict(where, ("layer_types", types), (pattern_key, pattern))
    if "sliding_attention" not in types:
        return ()
    if "sliding_window" in raw and raw["sliding_window"] is None:
        conflict(where, ("layer_types", types), ("sliding_window", None))
    window = size("sliding_window", None, "window")
    return tuple(window if t == "sliding_attention" else None for t in types)

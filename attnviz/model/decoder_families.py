"""Decoder families: what a GPT-2, Llama, Mistral or Qwen2 config.json says (no torch).

`describe_decoder` checks a decoder's config.json and returns its `DecoderConfig`:
every size a whole number in range, every setting that changes attention either
computed or refused in one line that names the key. `DECODER_LAYOUTS` names each
family's state-dict layout.
"""

from __future__ import annotations

from typing import Any

from attnviz.errors import AttnvizError
from attnviz.model.config import (
    DecoderConfig,
    agreed,
    check_activation,
    conflict,
    same,
    shown,
    whole,
)

DECODER_TYPES = ("gpt2", "llama", "mistral", "qwen2")
DECODER_NAMES = {"gpt2": "GPT-2", "llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
# Rotary scalings computed (rotary_frequencies in attnviz.model.decoder); others are refused.
ROPE_TYPES = ("default", "linear", "llama3")


# Checkpoint names -> this project's, `{i}` a layer number. GPT-2's fused c_attn is split
# into q, k, v (and its Conv1D weights transposed) by attnviz.model.weights before renaming.
_GPT2_NAMES = [
    ("wte.", "tokens."),
    ("wpe.", "positions."),
    ("h.{i}.ln_1.", "layers.{i}.norm1."),
    ("h.{i}.attn.q_attn.", "layers.{i}.attention.q_proj."),
    ("h.{i}.attn.k_attn.", "layers.{i}.attention.k_proj."),
    ("h.{i}.attn.v_attn.", "layers.{i}.attention.v_proj."),
    ("h.{i}.attn.c_proj.", "layers.{i}.attention.out_proj."),
    ("h.{i}.ln_2.", "layers.{i}.norm2."),
    ("h.{i}.mlp.c_fc.", "layers.{i}.ff_in."),
    ("h.{i}.mlp.c_proj.", "layers.{i}.ff_out."),
    ("ln_f.", "final_norm."),
]
_LLAMA_NAMES = [
    ("embed_tokens.", "tokens."),
    ("layers.{i}.input_layernorm.", "layers.{i}.norm1."),
    ("layers.{i}.self_attn.q_proj.", "layers.{i}.attention.q_proj."),
    ("layers.{i}.self_attn.k_proj.", "layers.{i}.attention.k_proj."),
    ("layers.{i}.self_attn.v_proj.", "layers.{i}.attention.v_proj."),
    ("layers.{i}.self_attn.o_proj.", "layers.{i}.attention.out_proj."),
    ("layers.{i}.post_attention_layernorm.", "layers.{i}.norm2."),
    ("layers.{i}.mlp.gate_proj.", "layers.{i}.ff_gate."),
    ("layers.{i}.mlp.up_proj.", "layers.{i}.ff_in."),
    ("layers.{i}.mlp.down_proj.", "layers.{i}.ff_out."),
    ("norm.", "final_norm."),
]
# (prefix of a *LMHeadModel / *ForCausalLM checkpoint, names, what is not the decoder)
DECODER_LAYOUTS: dict[str, tuple[str, list[tuple[str, str]], str]] = {
    "gpt2": ("transformer.", _GPT2_NAMES, r"^(h\.\d+\.attn\.(bias|masked_bias)$)"),
    "llama": ("model.", _LLAMA_NAMES, r"^(rotary_emb\.|layers\.\d+\.self_attn\.rotary_emb\.)"),
}

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
# GPT-2's config keys and the names transformers also accepts for them (its attribute_map).
_GPT2_ALIASES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
}


def layout(model_type: str) -> str:
    """The state-dict layout of a decoder family: "gpt2" or "llama"."""
    return "gpt2" if model_type == "gpt2" else "llama"


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
        return _positive(raw.get(key, default), key, where)

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
    )


def _llama(
    raw: dict[str, Any], model_type: str, where: str, size: Any, flag: Any, number: Any
) -> DecoderConfig:
    layers = size("num_hidden_layers", 32, "layers")
    heads = size("num_attention_heads", 32, "heads")
    hidden = size("hidden_size", 4096, "hidden")
    # Null (or left out of a Llama config): one per query head; left out of a Mistral or
    # Qwen2 config: the family's default (8, 32).
    kv_heads = (
        heads
        if raw.get("num_key_value_heads") is None
        and ("num_key_value_heads" in raw or model_type == "llama")
        else size("num_key_value_heads", heads, "heads")
    )
    if heads % kv_heads:
        raise AttnvizError(
            f"{where} has num_attention_heads={heads}, not a multiple of "
            f"num_key_value_heads={kv_heads}: the config is corrupt"
        )
    if raw.get("head_dim") is None and hidden % heads:
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
    partial = raw.get("partial_rotary_factor", 1.0)
    if partial not in (1, 1.0, None):
        raise AttnvizError(
            f"{where} has partial_rotary_factor={shown(partial)}; attnviz rotates whole heads "
            "only (1.0)"
        )
    theta, scaling = _rope(raw, where, number)
    # Qwen2 always has q, k and v biases, Mistral never; neither has MLP biases: transformers
    # reads attention_bias and mlp_bias for Llama only (and so does attnviz).
    llama = model_type == "llama"
    bias = model_type == "qwen2" or (llama and flag("attention_bias", False))
    return DecoderConfig(
        kind="llama",
        vocab_size=size("vocab_size", 32000, "vocab"),
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_size=head_dim,
        intermediate_size=size("intermediate_size", 11008, "intermediate"),
        max_positions=size("max_position_embeddings", 2048, "positions"),
        norm_eps=number("rms_norm_eps", 1e-6),
        hidden_act=check_activation(raw.get("hidden_act", "silu"), "hidden_act", where),
        qkv_bias=bias,
        out_bias=bias and model_type != "qwen2",  # Qwen2's o_proj has no bias
        mlp_bias=llama and flag("mlp_bias", False),
        tie_word_embeddings=flag("tie_word_embeddings", False),
        rope_theta=theta,
        rope_scaling=scaling,
        sliding_windows=_windows(raw, model_type, layers, where, size, flag),
    )


def _rope(
    raw: dict[str, Any], where: str, number: Any
) -> tuple[float, tuple[tuple[str, Any], ...]]:
    """rope_theta and the scaling, from `rope_parameters` (transformers 5) or the older keys.

    A config may carry both `rope_parameters` and the older `rope_scaling`: transformers 5
    computes the second, older versions do not know the first. Both are read, each with
    the top-level `rope_theta` it would be completed with; when they differ the config
    is refused in one line naming both.
    """
    settings = []
    for key in ("rope_parameters", "rope_scaling"):
        params = raw.get(key)
        if params is not None and not isinstance(params, dict):
            raise AttnvizError(f"{where} has {key}={shown(params)}; expected an object")
        if params:  # {} says nothing, as in transformers
            settings.append((key, params, _rope_setting(raw, key, params, where)))
    if not settings:
        return number("rope_theta", 10000.0), ()
    (key, params, setting), *others = settings
    for other, other_params, other_setting in others:
        if other_setting != setting:
            conflict(where, (key, params), (other, other_params))
    return setting


def _rope_setting(
    raw: dict[str, Any], key: str, params: dict[str, Any], where: str
) -> tuple[float, tuple[tuple[str, Any], ...]]:
    """(rope_theta, scaling pairs) that one rotary object `params` (under `key`) describes."""
    if all(isinstance(v, dict) for v in params.values()):
        raise AttnvizError(
            f"{where} has rotary parameters per layer type; attnviz computes one rotary setting "
            "for all layers"
        )

    def twice(inner: str, outer: str) -> Any:
        """The value of `inner` in params, or of `outer` in the config; refused if both differ."""
        value, top = params.get(inner), raw.get(outer)
        if value is not None and top is not None and not same(value, top):
            conflict(where, (f"{key}.{inner}", value), (outer, top))
        return value if value is not None else top

    named = agreed(params, ("rope_type", "type"), f"{where} ({key})")
    kind = "default" if named is None else named[1]
    theta = twice("rope_theta", "rope_theta")
    theta = 10000.0 if theta is None else _positive(theta, "rope_theta", where, _ROTARY)
    partial = twice("partial_rotary_factor", "partial_rotary_factor")
    if partial not in (1, 1.0, None):
        raise AttnvizError(
            f"{where} has partial_rotary_factor={shown(partial)}; attnviz rotates whole heads "
            "only (1.0)"
        )
    if kind not in ROPE_TYPES:
        raise AttnvizError(
            f"{where} uses rope_type={shown(kind)}; attnviz computes rotary embeddings "
            f"{', '.join(ROPE_TYPES)}: use a model with one of these"
        )
    scaling: dict[str, Any] = {}
    if kind == "linear":
        scaling = {"factor": _positive(params.get("factor"), "factor", where, _ROTARY)}
    elif kind == "llama3":
        scaling = {
            name: _positive(params.get(name), name, where, _ROTARY)
            for name in ("factor", "low_freq_factor", "high_freq_factor")
        }
        original = twice("original_max_position_embeddings", "original_max_position_embeddings")
        if params.get("original_max_position_embeddings") is None or not whole(
            original, 1, _LIMITS["positions"]
        ):
            raise AttnvizError(
                f"{where} has original_max_position_embeddings={shown(original)} in its llama3 "
                "rope scaling; expected a whole number: the config is corrupt"
            )
        if scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
            raise AttnvizError(
                f"{where} has high_freq_factor <= low_freq_factor in its llama3 rope scaling: "
                "the config is corrupt"
            )
        scaling["original_max_position_embeddings"] = original
    pairs = (("rope_type", kind), *sorted(scaling.items())) if kind != "default" else ()
    return theta, pairs


_ROTARY = " in its rotary settings"


def _positive(value: object, key: str, where: str, within: str = "") -> float:
    """`value` as a float when it is a finite positive number; else one line naming `key`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (0 < value < float("inf"))
    ):
        raise AttnvizError(
            f"{where} has {key}={shown(value)}{within}; expected a positive number: the config "
            "is corrupt"
        )
    return float(value)


def _windows(
    raw: dict[str, Any], model_type: str, layers: int, where: str, size: Any, flag: Any
) -> tuple[int | None, ...]:
    """How far back each layer looks (None: the whole prefix), from the family's keys.

    As transformers reads them: Mistral slides one window (4096 when left out, none when
    null) in every layer; Qwen2 only with use_sliding_window, in the layers `layer_types`
    names, else from max_window_layers (28 when left out) on. Llama has no window.
    """
    if model_type == "llama":
        return ()
    types = raw.get("layer_types")  # transformers 5: each layer's kind
    if (
        model_type == "qwen2"
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
    if model_type == "qwen2" and types is not None and "sliding_attention" in types:
        # Sliding layers with no window to slide: transformers 5 fails on them.
        if raw.get("sliding_window", 4096) is None:
            conflict(where, ("layer_types", types), ("sliding_window", None))
        if not flag("use_sliding_window", False):
            conflict(where, ("layer_types", types), ("use_sliding_window", False))
    if "sliding_window" in raw and raw["sliding_window"] is None:
        return ()
    if model_type == "mistral":
        window = size("sliding_window", None, "window")
        if types is not None and types != ["sliding_attention"] * layers:
            raise AttnvizError(
                f"{where} has layer_types={shown(types)}: a Mistral whose layers alternate "
                "between a window and full attention (as Ministral's do), which attnviz does not "
                "compute; it computes Mistral with one window in every layer"
            )
        return (window,) * layers
    # Qwen2: without use_sliding_window no layer slides.
    if not flag("use_sliding_window", False):
        return ()
    window = size("sliding_window", None, "window")
    first = size("max_window_layers", layers, "layers", low=0)
    counted = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    if types is not None and types != counted:
        named = "max_window_layers" if "max_window_layers" in raw else "max_window_layers (default)"
        conflict(where, ("layer_types", types), (named, first))
    return tuple(window if t == "sliding_attention" else None for t in counted)

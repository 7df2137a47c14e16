"""Rotary settings from a decoder's config.json, checked (no torch).

`read_rope` reads `rope_parameters` (transformers 5) or the older `rope_scaling` and
`rope_theta` of one rotary setting; `read_gemma3_rope` Gemma 3's two (sliding layers and
full ones). What comes back is a `Rope`: the base θ, the scaling as sorted (key, value)
pairs that `attnviz.model.decoder.rotary_frequencies` computes, and the share of each
head the rotation turns (Phi-3's partial_rotary_factor). Anything else is refused in
one line naming the key.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from attnviz.errors import AttnvizError
from attnviz.limits import shown
from attnviz.model.config import agreed, conflict, same, whole

# Rotary scalings computed (rotary_frequencies in attnviz.model.decoder); others are refused.
ROPE_TYPES = ("default", "linear", "llama3")
# Phi-3 also computes LongRoPE, which its config calls "longrope" (older ones "su" or "yarn").
PHI3_ROPE_TYPES = ("default", "longrope")
_PHI3_ALIASES = {"su": "longrope", "yarn": "longrope"}
POSITIONS = 1 << 20  # the most positions a config may claim (as the families' limits)
_ROTARY = " in its rotary settings"


class Rope(NamedTuple):
    """One rotary setting: base θ, scaling pairs (() for none), turned share of a head."""

    theta: float
    scaling: tuple[tuple[str, Any], ...]
    partial: float = 1.0


def positive(value: object, key: str, where: str, within: str = "") -> float:
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


def read_rope(
    raw: dict[str, Any],
    where: str,
    *,
    default_theta: float = 10000.0,
    phi3: bool = False,
    head_dim: int = 0,
) -> Rope:
    """rope_theta and the scaling, from `rope_parameters` (transformers 5) or the older keys.

    A config may carry both `rope_parameters` and the older `rope_scaling`: transformers 5
    computes the second, older versions do not know the first. Both are read, each with
    the top-level `rope_theta` it would be completed with; when they differ the config
    is refused in one line naming both. `phi3` also reads LongRoPE and a partial rotation
    (of heads of `head_dim` features).
    """
    settings = []
    for key in ("rope_parameters", "rope_scaling"):
        params = raw.get(key)
        if params is not None and not isinstance(params, dict):
            raise AttnvizError(f"{where} has {key}={shown(params)}; expected an object")
        if params:  # {} says nothing, as in transformers
            rope = rope_setting(
                raw, key, params, where, default_theta, phi3=phi3, head_dim=head_dim
            )
            settings.append((key, params, rope))
    if not settings:
        theta = raw.get("rope_theta")
        theta = default_theta if theta is None else positive(theta, "rope_theta", where)
        return Rope(theta, (), _partial(raw, {}, "", where, phi3, head_dim))
    (key, params, rope), *others = settings
    for other, other_params, other_rope in others:
        if other_rope != rope:
            conflict(where, (key, params), (other, other_params))
    return rope


def read_gemma3_rope(raw: dict[str, Any], where: str) -> tuple[Rope, Rope]:
    """Gemma 3's (full layers', sliding layers') rotary settings, as Gemma3TextConfig reads them.

    transformers 5 keeps them in `rope_parameters` under `full_attention` and
    `sliding_attention`; older configs say `rope_theta` (full layers, 1,000,000 when left
    out), `rope_local_base_freq` (sliding layers, 10,000) and `rope_scaling` (full layers).
    """
    params = raw.get("rope_parameters")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise AttnvizError(f"{where} has rope_parameters={shown(params)}; expected an object")
    kinds = ("full_attention", "sliding_attention")
    if any(key not in kinds for key in params):
        raise AttnvizError(
            f"{where} has rope_parameters={shown(params, 60)}; a Gemma 3 config keeps one object "
            "under full_attention and one under sliding_attention: the config is corrupt"
        )
    scaling = raw.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, dict):
        raise AttnvizError(f"{where} has rope_scaling={shown(scaling)}; expected an object")
    found = []
    for kind, top, default in (
        ("full_attention", "rope_theta", 1_000_000.0),
        ("sliding_attention", "rope_local_base_freq", 10000.0),
    ):
        key = f"rope_parameters.{kind}"
        own = params.get(kind)
        if own is not None and not isinstance(own, dict):
            raise AttnvizError(f"{where} has {key}={shown(own)}; expected an object")
        setting = dict(own or {})
        if kind == "full_attention" and scaling:  # as transformers: rope_scaling fills it in
            for name, value in scaling.items():
                if name in setting and not same(setting[name], value):
                    conflict(
                        where, (f"{key}.{name}", setting[name]), (f"rope_scaling.{name}", value)
                    )
                setting[name] = value
        theta = setting.get("rope_theta")
        outer = raw.get(top)
        if theta is not None and outer is not None and not same(theta, outer):
            conflict(where, (f"{key}.rope_theta", theta), (top, outer))
        theta = theta if theta is not None else outer
        setting["rope_theta"] = default if theta is None else theta
        found.append(rope_setting({}, key, setting, where, default))
    return found[0], found[1]


def rope_setting(
    raw: dict[str, Any],
    key: str,
    params: dict[str, Any],
    where: str,
    default_theta: float = 10000.0,
    *,
    phi3: bool = False,
    head_dim: int = 0,
) -> Rope:
    """The `Rope` that one rotary object `params` (under `key`) describes, completed by `raw`."""
    if all(isinstance(v, dict) for v in params.values()):
        raise AttnvizError(
            f"{where} has rotary parameters per layer type; attnviz computes one rotary setting "
            "for all layers of this family"
        )

    def twice(inner: str, outer: str) -> Any:
        """The value of `inner` in params, or of `outer` in the config; refused if both differ."""
        value, top = params.get(inner), raw.get(outer)
        if value is not None and top is not None and not same(value, top):
            conflict(where, (f"{key}.{inner}", value), (outer, top))
        return value if value is not None else top

    names = {name: params.get(name) for name in ("rope_type", "type")}
    if phi3:  # Phi3Config renames su and yarn to longrope (and saves both spellings)
        names = {k: _PHI3_ALIASES.get(v, v) if isinstance(v, str) else v for k, v in names.items()}
    named = agreed(names, ("rope_type", "type"), f"{where} ({key})")
    kind = "default" if named is None else named[1]
    theta = twice("rope_theta", "rope_theta")
    theta = default_theta if theta is None else positive(theta, "rope_theta", where, _ROTARY)
    partial = _partial(raw, params, key, where, phi3, head_dim)
    kinds = PHI3_ROPE_TYPES if phi3 else ROPE_TYPES
    if kind not in kinds:
        raise AttnvizError(
            f"{where} uses rope_type={shown(kind)}; attnviz computes rotary embeddings "
            f"{', '.join(kinds)} for this family: use a model with one of these, or {{engine}} "
            "transformers to have transformers' eager model compute it",
            param="engine",
        )
    scaling: dict[str, Any] = {}
    if kind == "linear":
        scaling = {"factor": positive(params.get("factor"), "factor", where, _ROTARY)}
    elif kind == "llama3":
        scaling = {
            name: positive(params.get(name), name, where, _ROTARY)
            for name in ("factor", "low_freq_factor", "high_freq_factor")
        }
        original = twice("original_max_position_embeddings", "original_max_position_embeddings")
        if params.get("original_max_position_embeddings") is None or not whole(
            original, 1, POSITIONS
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
    elif kind == "longrope":
        scaling = _longrope(raw, key, params, where, int(head_dim * partial))
    pairs = (("rope_type", kind), *sorted(scaling.items())) if kind != "default" else ()
    return Rope(theta, pairs, partial)


def _partial(
    raw: dict[str, Any], params: dict[str, Any], key: str, where: str, phi3: bool, head_dim: int
) -> float:
    """partial_rotary_factor: 1 (whole heads), or for Phi-3 a share that turns an even number."""
    value, top = params.get("partial_rotary_factor"), raw.get("partial_rotary_factor")
    if value is not None and top is not None and not same(value, top):
        conflict(where, (f"{key}.partial_rotary_factor", value), ("partial_rotary_factor", top))
    value = value if value is not None else top
    if value is None or (not isinstance(value, bool) and value in (1, 1.0)):
        return 1.0
    if not phi3:
        raise AttnvizError(
            f"{where} has partial_rotary_factor={shown(value)}; attnviz rotates whole heads "
            "only (1.0) in this family"
        )
    share = positive(value, "partial_rotary_factor", where)
    turned = int(head_dim * share)
    if share > 1 or turned < 2 or turned % 2:
        raise AttnvizError(
            f"{where} has partial_rotary_factor={shown(value)}, which turns {turned} of a head's "
            f"{head_dim} features; expected a share up to 1 that turns an even number of at "
            "least 2: the config is corrupt"
        )
    return share


def _longrope(
    raw: dict[str, Any], key: str, params: dict[str, Any], where: str, turned: int
) -> dict[str, Any]:
    """LongRoPE (Phi-3): per-pair divisors of the frequencies, short ones up to the trained
    length and long ones beyond it, and a factor on cos and sin, as transformers computes it."""
    found: dict[str, Any] = {}
    for name in ("short_factor", "long_factor"):
        value = params.get(name)
        if (
            not isinstance(value, list)
            or len(value) != turned // 2
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf
                for v in value
            )
        ):
            raise AttnvizError(
                f"{where} has {key}.{name}={shown(value, 40)}; expected a list of {turned // 2} "
                "positive numbers (one per pair of turned features): the config is corrupt"
            )
        found[name] = tuple(float(v) for v in value)
    # Phi-3 keeps the trained length at the top (4096 when left out), and transformers
    # prefers it to the one in the rotary object.
    inner, top = (
        params.get("original_max_position_embeddings"),
        raw.get("original_max_position_embeddings"),
    )
    if inner is not None and top is not None and not same(inner, top):
        conflict(
            where,
            (f"{key}.original_max_position_embeddings", inner),
            ("original_max_position_embeddings", top),
        )
    original = top if top is not None else (inner if inner is not None else 4096)
    if not whole(original, 2, POSITIONS):
        raise AttnvizError(
            f"{where} has original_max_position_embeddings={shown(original)}; expected a whole "
            f"number from 2 to {POSITIONS}: the config is corrupt"
        )
    factor = params.get("factor")
    if factor is None:  # Phi-3: the ratio of the lengths
        longest = raw.get("max_position_embeddings", 4096)
        if not whole(longest, 1, POSITIONS):
            raise AttnvizError(
                f"{where} has max_position_embeddings={shown(longest)}; expected a whole number"
            )
        factor = longest / original
    factor = positive(factor, f"{key}.factor", where)
    attention = params.get("attention_factor")
    if attention is None:  # as the LongRoPE paper suggests (and transformers computes)
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    found["attention_factor"] = positive(attention, f"{key}.attention_factor", where)
    found["original_max_position_embeddings"] = original
    return found

"""Gemma 2, Gemma 3, Qwen3 and Phi-3 computed from scratch equal transformers' own.

Each test writes a tiny random checkpoint with transformers (4 layers, 4 query heads, 2
key/value heads, weights 15x wider than transformers' default), with the settings that
make each family differ turned so that they show: a sliding window shorter than the
sentence, layer_types mixing sliding and full layers, soft-capping small enough to bend
the scores, norms with random gains (transformers starts them all at 1). attnviz loads
it with its own loader; transformers' eager models are the reference, on every layer and
head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from attnviz.errors import AttnvizError
from attnviz.model.families import describe
from attnviz.model.weights import load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import decoder_tokenizer

TEXT = "John thought: the train was full, but he found a free seat. Unbelievable things happen."
MIXED = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]

_SIZES = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=96,
    max_position_embeddings=128,
    initializer_range=0.3,
    tie_word_embeddings=False,
    bos_token_id=0,  # the tokenizer's <s>, </s>, <pad>
    eos_token_id=1,
    pad_token_id=2,
)
# (config class, bare model class, settings) per family
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gemma2": (
        "Gemma2Config",
        "Gemma2Model",
        dict(
            sliding_window=5,
            layer_types=MIXED,
            attn_logit_softcapping=3.0,
            query_pre_attn_scalar=24,
        ),
    ),
    "gemma3_text": (
        "Gemma3TextConfig",
        "Gemma3TextModel",
        dict(
            sliding_window=5,
            layer_types=MIXED,
            query_pre_attn_scalar=24,
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 37.0},
            },
        ),
    ),
    "qwen3": (
        "Qwen3Config",
        "Qwen3Model",
        dict(use_sliding_window=True, sliding_window=5, max_window_layers=2),
    ),
    "phi3": ("Phi3Config", "Phi3Model", dict(head_dim=None)),
}


def write_checkpoint(
    folder: Path, family: str, model_class: str | None = None, **overrides: Any
) -> Path:
    """A tiny random checkpoint of `family` in `folder` (random norm gains included)."""
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    config_class, bare, settings = FAMILIES[family]
    vocab = decoder_tokenizer(folder, bos=True)
    values = {**_SIZES, **settings, "vocab_size": vocab, **overrides}
    if values.get("head_dim") is None:
        values.pop("head_dim")
    config = getattr(transformers, config_class)(**values)
    torch.manual_seed(0)
    model = getattr(transformers, model_class or bare)(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:  # transformers starts them at 1 (Gemma: 0): make each count
                parameter.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    return folder


def reference(folder: Path, ids: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        return torch.stack(model(ids, output_attentions=True).attentions)[:, 0]  # (L, nh, T, T)


def compare(folder: Path, text: str = TEXT) -> tuple[float, torch.Tensor]:
    """Largest difference over every layer and head, and attnviz's attentions."""
    pieces = tokenize(load_tokenizer(folder), text, max_positions=128)
    ids = torch.tensor([pieces.ids])
    with torch.inference_mode():
        ours = load_encoder(folder)(ids).attentions[:, 0]  # (L, nh, T, T)
    theirs = reference(folder, ids)
    assert ours.shape == theirs.shape
    return float((ours - theirs).abs().max()), ours


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "gemma2: soft-capping, windows in layers 0, 2, 3": ("gemma2", {}),
    "gemma2: default alternation, no soft-capping": (
        "gemma2",
        {"layer_types": None, "attn_logit_softcapping": None},
    ),
    "gemma3: QK-norm, two rotary bases": ("gemma3_text", {}),
    "gemma3: sliding_window_pattern, linear scaling on full layers": (
        "gemma3_text",
        {
            "layer_types": None,
            "sliding_window_pattern": 2,
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
            },
        },
    ),
    "qwen3: QK-norm, windows from layer 2": ("qwen3", {}),
    "qwen3 with biases, no window": (
        "qwen3",
        {"attention_bias": True, "use_sliding_window": False},
    ),
    "phi3: fused weights, window 5": ("phi3", {"sliding_window": 5}),
    "phi3: partial rotation": ("phi3", {"partial_rotary_factor": 0.5}),
    "phi3: longrope, the input longer than the trained length": (
        "phi3",
        {
            "rope_parameters": {
                "rope_type": "longrope",
                "short_factor": [1.0, 1.5, 2.0, 1.0, 3.0, 1.2, 1.0, 4.0],
                "long_factor": [2.0, 3.0, 1.0, 5.0, 8.0, 2.5, 9.0, 16.0],
                "original_max_position_embeddings": 8,
            },
            "original_max_position_embeddings": 8,
            "partial_rotary_factor": 1.0,
        },
    ),
    "phi3: longrope (su), the input within the trained length, partial": (
        "phi3",
        {
            "rope_scaling": {
                "type": "su",
                "short_factor": [1.0, 1.5, 2.0, 3.0],
                "long_factor": [2.0, 3.0, 8.0, 16.0],
                "original_max_position_embeddings": 64,
            },
            "original_max_position_embeddings": 64,
            "partial_rotary_factor": 0.5,
        },
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_every_layer_and_head_matches_transformers(tmp_path: Path, case: str) -> None:
    family, overrides = CASES[case]
    difference, _ = compare(write_checkpoint(tmp_path / "model", family, **overrides))
    assert difference <= 1e-5


# ---------------------------------------------------------------------------------------------
# Each step shows: without it, attnviz would not equal transformers.


STEPS = {
    "soft-capping (gemma2)": ("gemma2", {}, "softcap"),
    "QK-norm (gemma3)": ("gemma3_text", {}, "qk_norm"),
    "QK-norm (qwen3)": ("qwen3", {}, "qk_norm"),
    "the sliding layers' own rotary base (gemma3)": ("gemma3_text", {}, "local_rope"),
    "the sliding window (gemma3)": ("gemma3_text", {}, "window"),
    "the sliding window (qwen3)": ("qwen3", {}, "window"),
    "partial rotation (phi3)": ("phi3", {"partial_rotary_factor": 0.5}, "partial"),
}


@pytest.mark.slow
@pytest.mark.parametrize("step", list(STEPS))
def test_each_new_step_changes_the_attention(tmp_path: Path, step: str) -> None:
    """The parity above is not a coincidence: leaving a step out moves the weights."""
    import dataclasses

    from attnviz.model.decoder import Decoder

    family, overrides, knob = STEPS[step]
    folder = write_checkpoint(tmp_path / "model", family, **overrides)
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=128)
    ids = torch.tensor([pieces.ids])
    model = load_encoder(folder)
    assert isinstance(model, Decoder)
    cfg = model.config
    with torch.inference_mode():
        before = model(ids).attentions
        if knob == "softcap":
            for layer in model.layers:
                layer.attention.softcap = None
        elif knob == "qk_norm":
            for layer in model.layers:
                layer.attention.q_norm = layer.attention.k_norm = None
        elif knob == "local_rope":
            model.config = dataclasses.replace(cfg, local_rope_theta=None)
        elif knob == "window":
            model.config = dataclasses.replace(cfg, sliding_windows=())
        elif knob == "partial":
            model.config = dataclasses.replace(cfg, rotary_dims=None)
            model.inv_freqs.clear()
        after = model(ids).attentions
    assert float((before - after).abs().max()) > 1e-2


# ---------------------------------------------------------------------------------------------
# Configs attnviz cannot compute: one line naming the key.


def _raw(family: str, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "model_type": family,
        **_SIZES,
        "vocab_size": 400,
        **{k: v for k, v in FAMILIES[family][2].items() if v is not None},
    }
    raw.update(changes)
    return raw


REFUSED = {
    "soft-cap 0": (_raw("gemma2", attn_logit_softcapping=0), "attn_logit_softcapping=0"),
    "soft-cap below 0": (_raw("gemma2", attn_logit_softcapping=-3.0), "attn_logit_softcapping"),
    "soft-cap set on Gemma 3": (
        _raw("gemma3_text", attn_logit_softcapping=50.0),
        "attn_logit_softcapping=50.0",
    ),
    "layer_types too short": (_raw("gemma2", layer_types=MIXED[:3]), "layer_types"),
    "an unknown layer type": (
        _raw("gemma3_text", layer_types=[*MIXED[:3], "chunked_attention"]),
        "layer_types",
    ),
    "layer_types against sliding_window_pattern": (
        _raw("gemma3_text", sliding_window_pattern=2),
        "sliding_window_pattern",
    ),
    "sliding layers without a window": (_raw("gemma2", sliding_window=None), "sliding_window"),
    "bidirectional Gemma": (
        _raw("gemma3_text", use_bidirectional_attention=True),
        "use_bidirectional_attention",
    ),
    "query_pre_attn_scalar 0": (_raw("gemma2", query_pre_attn_scalar=0), "query_pre_attn_scalar"),
    "flat rope_parameters on Gemma 3": (
        _raw("gemma3_text", rope_parameters={"rope_type": "default", "rope_theta": 10.0}),
        "rope_parameters",
    ),
    "rope_theta twice on Gemma 3": (
        _raw("gemma3_text", rope_theta=5.0),
        "rope_theta",
    ),
    "longrope short_factor of the wrong length": (
        _raw(
            "phi3",
            rope_scaling={"type": "longrope", "short_factor": [1.0] * 3, "long_factor": [2.0] * 8},
        ),
        "short_factor",
    ),
    "longrope long_factor with a zero": (
        _raw(
            "phi3",
            rope_scaling={"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [0] * 8},
        ),
        "long_factor",
    ),
    "dynamic rope on Phi-3": (
        _raw("phi3", rope_scaling={"type": "dynamic", "factor": 2.0}),
        "rope_type='dynamic'",
    ),
    "partial rotation on Qwen3": (
        _raw("qwen3", partial_rotary_factor=0.5),
        "partial_rotary_factor",
    ),
    "partial rotation that turns an odd number": (
        _raw("phi3", partial_rotary_factor=0.2),
        "partial_rotary_factor",
    ),
    "qwen3 layer_types sliding without use_sliding_window": (
        _raw("qwen3", use_sliding_window=False, layer_types=MIXED),
        "use_sliding_window",
    ),
    "Gemma 3 text_config not an object": (
        {"model_type": "gemma3", "text_config": [1, 2]},
        "text_config",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_configs_attnviz_cannot_compute_are_refused_in_one_line(case: str) -> None:
    raw, named = REFUSED[case]
    with pytest.raises(AttnvizError) as info:
        describe(raw)
    message = str(info.value)
    assert "\n" not in message
    assert named in message


def test_the_new_families_are_named_and_read_as_configured() -> None:
    gemma3 = describe(_raw("gemma3_text"))
    assert gemma3.family == "Gemma 3"
    cfg = gemma3.decoder
    assert (
        cfg is not None
        and cfg.rms_offset
        and cfg.post_norms
        and cfg.qk_norm
        and cfg.softcap is None
    )
    assert cfg.sliding_windows == (5, None, 5, 5)
    assert [cfg.rope_base(i) for i in range(4)] == [37.0, 1000.0, 37.0, 37.0]
    assert cfg.scale(0) == 24**-0.5
    gemma2 = describe(_raw("gemma2")).decoder
    assert gemma2 is not None and gemma2.softcap == 3.0 and not gemma2.qk_norm
    assert describe(_raw("gemma2", layer_types=None)).decoder.sliding_windows == (5, None, 5, None)  # type: ignore[union-attr]
    qwen3 = describe(_raw("qwen3")).decoder
    assert qwen3 is not None and qwen3.qk_norm and qwen3.sliding_windows == (None, None, 5, 5)
    assert describe(_raw("phi3")).family == "Phi-3"
    phi3 = describe(_raw("phi3", partial_rotary_factor=0.5)).decoder
    assert phi3 is not None and phi3.rotary_dims == 8
    multimodal = describe({"model_type": "gemma3", "text_config": _raw("gemma3_text")})
    assert multimodal.family == "Gemma 3" and multimodal.decoder == gemma3.decoder


@pytest.mark.slow
def test_a_multimodal_gemma3_checkpoint_gives_its_language_model(tmp_path: Path) -> None:
    """Gemma3ForConditionalGeneration: the text model's weights, the vision tower left out."""
    import transformers

    folder = tmp_path / "model"
    folder.mkdir()
    vocab = decoder_tokenizer(folder, bos=True)
    settings = {k: v for k, v in FAMILIES["gemma3_text"][2].items()}
    text = transformers.Gemma3TextConfig(**{**_SIZES, **settings, "vocab_size": vocab})
    vision = dict(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    config = transformers.Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision,
        mm_tokens_per_image=4,
        image_token_index=vocab - 1,
        boi_token_index=vocab - 2,
        eoi_token_index=vocab - 3,
    )
    torch.manual_seed(0)
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    assert describe(json.loads((folder / "config.json").read_text())).family == "Gemma 3"
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=128)
    ids = torch.tensor([pieces.ids])
    reference = transformers.Gemma3ForConditionalGeneration.from_pretrained(
        folder, attn_implementation="eager"
    ).eval()
    with torch.inference_mode():
        ours = load_encoder(folder)(ids).attentions[:, 0]
        theirs = torch.stack(reference(input_ids=ids, output_attentions=True).attentions)[:, 0]
    assert ours.shape == theirs.shape
    assert float((ours - theirs).abs().max()) <= 1e-5


LESSON = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."


@pytest.mark.slow
def test_the_real_gemma3_270m_matches_transformers_on_every_layer(
    tmp_path: Path, gemma_reference: tuple
) -> None:
    """Gemma 3 270M (the [gemma] extra's GGUF), read by transformers and saved as an HF
    folder: attnviz's attention on that folder equals transformers' on every layer."""
    import safetensors.torch

    model, tokenizer = gemma_reference
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)  # tied to the embeddings
    safetensors.torch.save_file(state, folder / "model.safetensors")
    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert describe(json.loads((folder / "config.json").read_text())).family == "Gemma 3"

    pieces = tokenize(load_tokenizer(folder), LESSON, max_positions=128)
    ids = torch.tensor([pieces.ids])
    with torch.inference_mode():
        ours = load_encoder(folder)(ids).attentions[:, 0]  # (18, 4, T, T)
        theirs = torch.stack(model(ids, output_attentions=True).attentions)[:, 0]
    assert ours.shape == theirs.shape == (18, 4, len(pieces), len(pieces))
    assert float((ours - theirs).abs().max()) <= 1e-5


@pytest.mark.slow
def test_phi3_weight_errors_name_the_fused_tensors_as_stored(tmp_path: Path) -> None:
    """A config that does not fit the weights: the fused qkv_proj is named with its shapes."""
    folder = write_checkpoint(tmp_path / "model", "phi3")
    config = json.loads((folder / "config.json").read_text())
    config["num_key_value_heads"] = 4  # the weights hold 2 key/value heads
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(AttnvizError) as info:
        load_encoder(folder)
    message = str(info.value)
    assert "\n" not in message and "Phi-3 decoder" in message
    assert "layers.0.self_attn.qkv_proj.weight (128, 64) (expected (192, 64))" in message

"""Configs that say one thing twice: attnviz computes what transformers computes, or refuses.

A setting that two keys of config.json can give (GPT-2's `n_embd` and its alias
`hidden_size`, `rope_parameters` and the older `rope_scaling`, a `rope_theta` at the top and
inside them, Qwen2's `layer_types` and `max_window_layers`) is either read as transformers
reads it, checked here against transformers' own model on a tiny random checkpoint, or
refused in one line naming both keys. Which key wins has changed between transformers
versions, so two keys that disagree are refused rather than guessed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from attnviz.errors import AttnvizError
from attnviz.model.families import describe, read_config
from attnviz.model.weights import load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat. Unbelievable things happen."
TOLERANCE = 1e-5


def _edited(folder: Path, tmp_path: Path, **changes: object) -> Path:
    """A copy of `folder` whose config.json has `changes` (a value of ... removes the key)."""
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    for key, value in changes.items():
        if value is ...:
            config.pop(key, None)
        else:
            config[key] = value
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def _difference(folder: Path) -> float:
    """Largest difference between attnviz's attention and transformers' in every layer and head."""
    from transformers import AutoModel

    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=60)
    ids = torch.tensor([pieces.ids])
    reference = AutoModel.from_pretrained(
        str(folder), attn_implementation="eager", dtype=torch.float32
    ).eval()
    with torch.inference_mode():
        ours = load_encoder(folder)(ids).attentions[:, 0]  # (L, nh, T, T)
        theirs = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]
    assert ours.shape == theirs.shape
    return float((ours - theirs).abs().max())


LINEAR = {"rope_type": "linear", "factor": 2.0}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}

# (family, changes to config.json, the two keys the refusal names)
REFUSED = {
    "rope_parameters linear x2, rope_scaling linear x4": (
        "llama",
        {
            "rope_parameters": {**LINEAR, "rope_theta": 500.0},
            "rope_scaling": {**LINEAR, "factor": 4.0},
        },
        ("rope_parameters", "rope_scaling"),
    ),
    "rope_parameters linear, rope_scaling llama3": (
        "llama",
        {"rope_parameters": {**LINEAR, "rope_theta": 500.0}, "rope_scaling": LLAMA3},
        ("rope_parameters", "rope_scaling"),
    ),
    "rope_parameters with a theta, rope_scaling without (transformers 5 takes 10000)": (
        "llama",
        {"rope_parameters": {**LINEAR, "rope_theta": 500.0}, "rope_scaling": LINEAR},
        ("rope_parameters", "rope_scaling"),
    ),
    "rope_theta inside rope_parameters and another at the top": (
        "llama",
        {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0}, "rope_theta": 1e4},
        ("rope_parameters.rope_theta", "rope_theta"),
    ),
    "rope_theta inside rope_scaling and another at the top": (
        "mistral",
        {"rope_parameters": ..., "rope_scaling": {**LINEAR, "rope_theta": 7.0}, "rope_theta": 1e4},
        ("rope_scaling.rope_theta", "rope_theta"),
    ),
    "rope_type and type disagree": (
        "qwen2",
        {"rope_parameters": {**LLAMA3, "type": "linear", "rope_theta": 1e4}},
        ("rope_type", "type"),
    ),
    "original_max_position_embeddings inside and at the top": (
        "llama",
        {"rope_parameters": {**LLAMA3, "rope_theta": 1e4}, "original_max_position_embeddings": 32},
        ("rope_parameters.original_max_position_embeddings", "original_max_position_embeddings"),
    ),
    "partial_rotary_factor inside rope_parameters": (
        "llama",
        {"rope_parameters": {**LINEAR, "rope_theta": 1e4, "partial_rotary_factor": 0.5}},
        ("partial_rotary_factor", "partial_rotary_factor"),
    ),
    "gpt2 n_embd and hidden_size": ("gpt2", {"hidden_size": 128}, ("n_embd", "hidden_size")),
    "gpt2 n_head and num_attention_heads": (
        "gpt2",
        {"num_attention_heads": 4},
        ("n_head", "num_attention_heads"),
    ),
    "gpt2 n_layer and num_hidden_layers": (
        "gpt2",
        {"num_hidden_layers": 3},
        ("n_layer", "num_hidden_layers"),
    ),
    "gpt2 n_positions and max_position_embeddings": (
        "gpt2",
        {"max_position_embeddings": 64},
        ("n_positions", "max_position_embeddings"),
    ),
    "qwen2 layer_types and max_window_layers": (
        "qwen2",
        {
            "use_sliding_window": True,
            "sliding_window": 3,
            "max_window_layers": 0,
            "layer_types": ["full_attention", "sliding_attention"],
        },
        ("layer_types", "max_window_layers"),
    ),
    "qwen2 layer_types and max_window_layers left out (28)": (
        "qwen2",
        {
            "use_sliding_window": True,
            "sliding_window": 3,
            "max_window_layers": ...,
            "layer_types": ["full_attention", "sliding_attention"],
        },
        ("layer_types", "max_window_layers"),
    ),
    "qwen2 layer_types slide but use_sliding_window is off (transformers fails)": (
        "qwen2",
        {
            "use_sliding_window": False,
            "sliding_window": 3,
            "layer_types": ["sliding_attention", "sliding_attention"],
        },
        ("layer_types", "use_sliding_window"),
    ),
    "qwen2 layer_types slide but sliding_window is null (transformers fails)": (
        "qwen2",
        {
            "use_sliding_window": True,
            "sliding_window": None,
            "layer_types": ["full_attention", "sliding_attention"],
        },
        ("layer_types", "sliding_window"),
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_two_keys_that_disagree_are_refused_in_one_line_naming_both(
    tiny_decoder: TinyFactory, tmp_path: Path, case: str
) -> None:
    family, changes, keys = REFUSED[case]
    folder = _edited(tiny_decoder(family), tmp_path, **changes)
    with pytest.raises(AttnvizError) as refused:
        read_config(folder)
    message = str(refused.value)
    assert "\n" not in message
    for key in keys:
        assert key in message, message


@pytest.mark.parametrize(
    ("changes", "keys"),
    [
        ({"hidden_size": 64}, ("dim", "hidden_size")),
        ({"num_attention_heads": 2}, ("n_heads", "num_attention_heads")),
        ({"num_hidden_layers": 3}, ("n_layers", "num_hidden_layers")),
    ],
)
def test_distilbert_aliases_that_disagree_are_refused(
    tiny_model: TinyFactory, tmp_path: Path, changes: dict, keys: tuple[str, str]
) -> None:
    folder = _edited(tiny_model("distilbert"), tmp_path, **changes)
    with pytest.raises(AttnvizError, match=f"{keys[0]}=.* and {keys[1]}="):
        read_config(folder)


# (family, changes): configs whose two keys agree, or whose second key transformers does not
# read; attnviz computes the same attention as transformers.
COMPUTED = {
    "rope_parameters and rope_scaling agree (type, not rope_type; theta at the top)": (
        "llama",
        {
            "rope_parameters": {**LINEAR, "rope_theta": 500.0},
            "rope_scaling": {"type": "linear", "factor": 2},
            "rope_theta": 500.0,
        },
    ),
    "rope_scaling alone, llama3, theta at the top": (
        "llama",
        {"rope_parameters": ..., "rope_scaling": LLAMA3, "rope_theta": 300.0},
    ),
    "rope_parameters alone, theta at the top too and equal": (
        "mistral",
        {"rope_parameters": {**LINEAR, "rope_theta": 700.0}, "rope_theta": 700.0},
    ),
    "empty rope_scaling beside rope_parameters": (
        "qwen2",
        {"rope_parameters": {**LINEAR, "rope_theta": 900.0}, "rope_scaling": {}},
    ),
    "gpt2 aliases alone (hidden_size, num_attention_heads, ...)": (
        "gpt2",
        {
            "n_embd": ...,
            "n_head": ...,
            "n_layer": ...,
            "n_positions": ...,
            "hidden_size": 64,
            "num_attention_heads": 8,
            "num_hidden_layers": 2,
            "max_position_embeddings": 128,
        },
    ),
    "gpt2 aliases beside their keys, equal": (
        "gpt2",
        {"hidden_size": 64, "num_attention_heads": 8},
    ),
    "qwen2 use_sliding_window without max_window_layers (28: no layer of 2 slides)": (
        "qwen2",
        {
            "use_sliding_window": True,
            "sliding_window": 3,
            "max_window_layers": ...,
            "layer_types": ...,
        },
    ),
    "qwen2 layer_types and max_window_layers agree": (
        "qwen2",
        {
            "use_sliding_window": True,
            "sliding_window": 3,
            "max_window_layers": 1,
            "layer_types": ["full_attention", "sliding_attention"],
        },
    ),
    "mistral attention_bias and mlp_bias (transformers reads them for Llama only)": (
        "mistral",
        {"attention_bias": True, "mlp_bias": True},
    ),
    "mistral use_sliding_window off (Mistral does not read it)": (
        "mistral",
        {"use_sliding_window": False, "sliding_window": 3},
    ),
    "llama sliding_window (Llama has none)": ("llama", {"sliding_window": 3}),
    "llama head_dim null: hidden / heads": ("llama", {"head_dim": None}),
    "llama tie_word_embeddings (the LM head only; attnviz computes no logits)": (
        "llama",
        {"tie_word_embeddings": True},
    ),
}


@pytest.mark.slow  # builds transformers' model for each case
@pytest.mark.parametrize("case", list(COMPUTED))
def test_keys_that_agree_are_computed_as_transformers_computes_them(
    tiny_decoder: TinyFactory, tmp_path: Path, case: str
) -> None:
    family, changes = COMPUTED[case]
    folder = _edited(tiny_decoder(family), tmp_path, **changes)
    assert _difference(folder) <= 1e-4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("family", "changes"),
    [
        ("distilbert", {"n_heads": ..., "num_attention_heads": 4}),
        ("distilbert", {"dim": ..., "hidden_size": 32, "n_layers": ..., "num_hidden_layers": 2}),
        ("distilbert", {"n_heads": 4, "num_attention_heads": 4}),
        ("bert", {"layer_norm_epsilon": 0.5}),  # BERT reads layer_norm_eps only
        ("bert", {"head_dim": 4}),  # no BERT-family config reads head_dim
        ("albert", {"embedding_size": 32}),  # as wide as hidden: still projected
        ("bert", {"tie_word_embeddings": False}),
    ],
)
def test_encoder_keys_are_read_as_transformers_reads_them(
    tiny_model: TinyFactory, tmp_path: Path, family: str, changes: dict
) -> None:
    from transformers import AutoConfig

    if family == "albert":  # a checkpoint whose embeddings are as wide as its layers
        folder = _edited(tiny_model(family, embedding_size=32), tmp_path)
    else:
        folder = _edited(tiny_model(family), tmp_path, **changes)
    theirs = AutoConfig.from_pretrained(str(folder))
    shape = describe(read_config(folder))
    assert (shape.heads, shape.hidden, shape.layers) == (
        theirs.num_attention_heads,
        theirs.hidden_size,
        theirs.num_hidden_layers,
    )
    assert _difference(folder) <= TOLERANCE


def test_left_out_keys_take_the_family_defaults_of_transformers(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    """Mistral and Qwen2 have their own defaults for key/value heads, windows and sizes."""
    from transformers import AutoConfig

    for family in ("mistral", "qwen2", "llama"):
        keys = ["sliding_window", "max_position_embeddings", "intermediate_size", "vocab_size"]
        keys += ["max_window_layers", "num_key_value_heads"] if family != "qwen2" else []
        folder = _edited(tiny_decoder(family), tmp_path / family, **dict.fromkeys(keys, ...))
        ours = describe(read_config(folder))
        theirs = AutoConfig.from_pretrained(str(folder))
        assert ours.decoder is not None
        assert ours.kv_heads == theirs.num_key_value_heads, family
        assert ours.positions == theirs.max_position_embeddings, family
        assert ours.intermediate == theirs.intermediate_size, family
        assert ours.vocab == theirs.vocab_size, family
        window = getattr(theirs, "sliding_window", None) if family == "mistral" else None
        assert ours.decoder.window(0) == window, family
    # Qwen2 without num_key_value_heads has 32 of them, as in transformers: not 8 heads' groups.
    folder = _edited(tiny_decoder("qwen2"), tmp_path / "kv", num_key_value_heads=...)
    assert AutoConfig.from_pretrained(str(folder)).num_key_value_heads == 32
    with pytest.raises(AttnvizError, match="num_key_value_heads=32"):
        read_config(folder)

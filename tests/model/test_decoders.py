"""Decoders (GPT-2, Llama, Mistral, Qwen2) computed from scratch equal transformers' own.

Tiny random checkpoints are written here with transformers (tests/conftest.py); attnviz
loads them with its own loader and computes every layer's attention; transformers'
models, `attn_implementation="eager"` with `output_attentions=True`, are the reference.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnviz.model.weights import load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat. Unbelievable things happen."


def _reference(folder: Path) -> torch.nn.Module:
    from transformers import AutoModel

    return AutoModel.from_pretrained(folder, attn_implementation="eager").eval()


def _compare(folder: Path, text: str = TEXT, **load: str) -> tuple[float, int]:
    """Largest difference over every layer and head, and the number of pieces."""
    pieces = tokenize(load_tokenizer(folder), text, max_positions=128)
    ids = torch.tensor([pieces.ids])
    model = load_encoder(folder, **load)
    with torch.inference_mode():
        ours = model(ids).attentions[:, 0]  # (L, nh, T, T)
        theirs = torch.stack(_reference(folder)(ids, output_attentions=True).attentions)[:, 0]
    assert ours.shape == theirs.shape
    return float((ours.float() - theirs.float()).abs().max()), len(pieces)


CASES = {
    "gpt2": ("gpt2", {}),
    "gpt2 scaled by inverse layer": ("gpt2", {"scale_attn_by_inverse_layer_idx": True}),
    "gpt2 unscaled, reordered and upcast": (
        "gpt2",
        {"scale_attn_weights": False, "reorder_and_upcast_attn": True},
    ),
    "llama, 2 query heads per kv head": ("llama", {}),
    "llama, 4 query heads per kv head": ("llama", {"num_key_value_heads": 2}),
    "llama, llama3 rope scaling": (
        "llama",
        {
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
            "rope_theta": 500.0,
        },
    ),
    "llama, linear rope scaling, head_dim 16 with hidden 64 and 8 heads": (
        "llama",
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "head_dim": 16},
    ),
    "llama with biases": ("llama", {"attention_bias": True, "mlp_bias": True}),
    "qwen2 (q/k/v biases)": ("qwen2", {}),
    "qwen2 sliding window in layer 1": (
        "qwen2",
        {"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1},
    ),
    "mistral sliding window shorter than the input": ("mistral", {"sliding_window": 6}),
    "mistral, no window": ("mistral", {"sliding_window": None}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_layer_and_head_matches_transformers(tiny_decoder: TinyFactory, case: str) -> None:
    family, overrides = CASES[case]
    difference, T = _compare(tiny_decoder(family, **overrides))
    assert T > 12  # long enough for windows and groups to matter
    assert difference <= 1e-5


def test_the_sliding_window_hides_the_keys_it_should(tiny_decoder: TinyFactory) -> None:
    folder = tiny_decoder("mistral", sliding_window=6)
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=128)
    with torch.inference_mode():
        weights = load_encoder(folder)(torch.tensor([pieces.ids])).attentions[:, 0]
    T = len(pieces)
    query = torch.arange(T)[:, None]
    key = torch.arange(T)[None, :]
    seen = (key <= query) & (key > query - 6)  # itself and the 5 before it
    assert bool((weights[..., ~seen] == 0).all())
    assert bool((weights[..., seen] > 0).all())


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_lm_head_checkpoints_load_without_their_head(
    tiny_decoder: TinyFactory, family: str
) -> None:
    difference, _ = _compare(tiny_decoder(family, arch="lm"))
    assert difference <= 1e-5


@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_a_sharded_checkpoint_loads_from_its_index(tiny_decoder: TinyFactory, family: str) -> None:
    folder = tiny_decoder(family, shard="30KB")
    assert (folder / "model.safetensors.index.json").is_file()
    assert len(list(folder.glob("model-*.safetensors"))) > 2
    difference, _ = _compare(folder)
    assert difference <= 1e-5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_half_precision_checkpoints_are_computed_in_float32(
    tiny_decoder: TinyFactory, family: str, dtype: str
) -> None:
    folder = tiny_decoder(family, dtype=dtype)
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=128)
    ids = torch.tensor([pieces.ids])
    model = load_encoder(folder)
    # The reference, in float32 from the same stored (half-precision) numbers.
    from transformers import AutoModel

    reference = AutoModel.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ).eval()
    with torch.inference_mode():
        ours = model(ids).attentions[:, 0]
        theirs = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]
    assert ours.dtype == torch.float32
    assert float((ours - theirs).abs().max()) <= 1e-5


def test_only_the_layers_asked_for_are_kept_and_later_ones_not_run(
    tiny_decoder: TinyFactory,
) -> None:
    folder = tiny_decoder("llama", num_hidden_layers=4)
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=128)
    ids = torch.tensor([pieces.ids])
    model = load_encoder(folder)
    ran = []
    for i, layer in enumerate(model.layers):
        layer.register_forward_hook(lambda *args, i=i: ran.append(i))
    with torch.inference_mode():
        every = model(ids).attentions
        ran.clear()
        some = model(ids, layers=[1]).attentions
    assert ran == [0, 1]
    assert some.shape[0] == 1
    assert torch.equal(some[0], every[1])


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_rotary_grouped_attention_equals_torch_sdpa(groups: int) -> None:
    """The same q, k, v through our attention and torch's fused one (enable_gqa)."""
    import torch.nn.functional as F

    from attnviz.model.attention import MultiHeadAttention, Rotary
    from attnviz.model.decoder import decoder_mask

    torch.manual_seed(0)
    B, T, C, nh, hs = 2, 11, 48, 8, 16
    attention = MultiHeadAttention(
        C, nh, bias=True, num_kv_heads=nh // groups, head_size=hs, out_bias=False
    ).eval()
    x = torch.randn(B, T, C) * 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2).float() / hs))
    rotary = Rotary(inv_freq, torch.arange(T), torch.float32)
    mask = decoder_mask(T, None, None, torch.device("cpu"))
    with torch.inference_mode():
        out, weights = attention(x, x, x, mask, rotary=rotary)
        q = rotary.rotate(attention.split_heads(attention.q_proj(x)))
        k = rotary.rotate(attention.split_heads(attention.k_proj(x)))
        v = attention.split_heads(attention.v_proj(x))
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=groups > 1)
        expected = attention.out_proj(heads.transpose(1, 2).reshape(B, T, nh * hs))
    assert weights.shape == (B, nh, T, T)
    assert float((out - expected).abs().max()) <= 1e-5
    assert bool((weights.triu(1) == 0).all())


def test_rotary_turns_pairs_so_scores_depend_on_distance_only() -> None:
    from attnviz.model.attention import Rotary

    hs = 8
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2).float() / hs))
    rotary = Rotary(inv_freq, torch.arange(12), torch.float32)
    q = torch.randn(hs).expand(1, 1, 12, hs)
    k = torch.randn(hs).expand(1, 1, 12, hs)
    rq, rk = rotary.rotate(q)[0, 0], rotary.rotate(k)[0, 0]
    # The same q and k, 3 positions apart, score the same wherever they sit.
    scores = [float(rq[p + 3] @ rk[p]) for p in range(8)]
    assert max(scores) - min(scores) < 1e-4
    assert torch.allclose(rotary.rotate(q).norm(dim=-1), q.norm(dim=-1), atol=1e-5)


def _edited_config(folder: Path, tmp_path: Path, **changes: object) -> Path:
    import json
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize(
    ("family", "changes", "message"),
    [
        ("llama", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "rope_type='yarn'"),
        ("llama", {"num_key_value_heads": 3}, "not a multiple of num_key_value_heads=3"),
        ("llama", {"head_dim": 7}, "even head size"),
        ("llama", {"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
        ("llama", {"num_hidden_layers": 10**9}, "num_hidden_layers=1000000000"),
        ("llama", {"hidden_act": "mish"}, "hidden_act='mish'"),
        ("gpt2", {"n_embd": 65, "n_head": 8}, "not divisible by n_head=8"),
        ("gpt2", {"scale_attn_weights": "yes"}, "scale_attn_weights='yes'"),
        ("mistral", {"sliding_window": -4}, "sliding_window=-4"),
        ("qwen2", {"layer_types": ["full_attention"]}, "layer_types="),
        (
            "mistral",
            {"sliding_window": 2, "layer_types": ["sliding_attention", "full_attention"]},
            "alternate",
        ),
    ],
)
def test_configs_attnviz_cannot_compute_are_refused_in_one_line(
    tiny_decoder: TinyFactory, tmp_path: Path, family: str, changes: dict, message: str
) -> None:
    from attnviz.errors import AttnvizError
    from attnviz.model.families import read_config

    folder = _edited_config(tiny_decoder(family), tmp_path, **changes)
    with pytest.raises(AttnvizError) as info:
        read_config(folder)
    assert "\n" not in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("weight_map", "message"),
    [
        ({"tokens.weight": "../outside.safetensors"}, "not a .safetensors file name"),
        ({"tokens.weight": "/etc/passwd"}, "not a .safetensors file name"),
        ({"tokens.weight": "model-9-of-9.safetensors"}, "missing"),
        ({"tokens.weight": 3}, "not file names"),
        ([], "no weight_map"),
    ],
)
def test_a_hostile_shard_index_is_refused_in_one_line(
    tiny_decoder: TinyFactory, tmp_path: Path, weight_map: object, message: str
) -> None:
    import json
    import shutil

    from attnviz.errors import AttnvizError

    folder = tmp_path / "model"
    shutil.copytree(tiny_decoder("gpt2", shard="30KB"), folder)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "outside.safetensors").write_bytes(b"not weights")
    with pytest.raises(AttnvizError) as info:
        load_encoder(folder)
    assert "\n" not in str(info.value) and message in str(info.value)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("odd", "wrong shape: h.0.attn.c_attn.weight (64, 190) (expected (64, 192))"),
        ("missing", "missing: h.0.attn.c_attn.weight)"),
    ],
)
def test_gpt2_weight_errors_name_the_keys_and_shapes_as_stored(
    tiny_decoder: TinyFactory, tmp_path: Path, how: str, message: str
) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    from attnviz.errors import AttnvizError

    folder = tmp_path / "model"
    shutil.copytree(tiny_decoder("gpt2"), folder)
    state = load_file(folder / "model.safetensors")
    if how == "odd":
        state["h.0.attn.c_attn.weight"] = state["h.0.attn.c_attn.weight"][:, :190].contiguous()
    else:
        del state["h.0.attn.c_attn.weight"]
    save_file(state, folder / "model.safetensors")
    with pytest.raises(AttnvizError) as info:
        load_encoder(folder)
    assert message in str(info.value)
    assert "q_attn" not in str(info.value)

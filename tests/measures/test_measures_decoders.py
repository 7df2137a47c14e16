"""The trusted measures on decoders, each checked against transformers' own modules in float64.

Tiny random GPT-2, Llama (grouped-query), Mistral (a window shorter than the text) and
Qwen2 (biases on q, k, v) checkpoints are written by tests/conftest.py. The references
share no code with attnviz.measures: transformers' model runs in float64 with forward
hooks that read each layer's input norm's output, the residual stream the feed-forward
norm reads, and the layer's output; the per-key parts are built from
transformers' own weights (v_proj and o_proj, GPT-2's c_attn and c_proj), and value
zeroing is a forward hook on the value projection that zeroes one position.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat. Unbelievable things happen."
MEASURES = ("norm", "norm-res-ln", "alti", "value-zeroing")
CASES: dict[str, tuple[str, dict]] = {
    "gpt2": ("gpt2", {}),
    "llama, 4 query heads per kv head": ("llama", {"num_key_value_heads": 2}),
    "mistral, a window shorter than the text": ("mistral", {"sliding_window": 6}),
    "qwen2 (q/k/v biases)": ("qwen2", {}),
}


def _modules(layer, cfg):  # type: ignore[no-untyped-def]
    """(input norm, output norm or None, feed-forward norm, value projection, the columns of
    its output that are the values) of a transformers decoder layer."""
    if hasattr(layer, "ln_1"):  # GPT-2: c_attn gives q, k, v side by side
        C = cfg.hidden_size
        return layer.ln_1, None, layer.ln_2, layer.attn.c_attn, slice(2 * C, 3 * C)
    attn = layer.self_attn
    if hasattr(attn, "qkv_proj"):  # Phi-3: q, k, v side by side
        hs = cfg.hidden_size // cfg.num_attention_heads
        start = (cfg.num_attention_heads + cfg.num_key_value_heads) * hs
        values = attn.qkv_proj, slice(start, None)
    else:
        values = attn.v_proj, slice(None)
    if hasattr(layer, "pre_feedforward_layernorm"):  # Gemma: a norm on the attention's output
        return (
            layer.input_layernorm,
            layer.post_attention_layernorm,
            layer.pre_feedforward_layernorm,
            *values,
        )
    return layer.input_layernorm, None, layer.post_attention_layernorm, *values


def _run(model, ids, extra=None):  # type: ignore[no-untyped-def]
    """Run the float64 model with hooks; per layer what they saw, and the attentions."""
    import torch

    seen: list[dict] = [{} for _ in _layers(model)]
    handles = []
    for index, layer in enumerate(_layers(model)):
        norm, out_norm, ff_norm, _, _ = _modules(layer, model.config)
        record = seen[index]

        def save(name, position="out", record=record):  # type: ignore[no-untyped-def]
            def hook(module, inputs, output=None):  # type: ignore[no-untyped-def]
                value = inputs[0] if position == "in" else output
                record[name] = (value[0] if isinstance(value, tuple) else value)[0]

            return hook

        handles += [
            norm.register_forward_hook(save("n")),
            ff_norm.register_forward_pre_hook(save("r", "in")),
            layer.register_forward_hook(save("out")),
        ]
        if out_norm is not None:
            handles.append(out_norm.register_forward_pre_hook(save("attended", "in")))
    for module, hook in extra or []:
        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            out = model(ids, output_attentions=True, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    return seen, out


def _layers(model):  # type: ignore[no-untyped-def]
    return model.h if hasattr(model, "h") else model.layers


def _weights(model, layer):  # type: ignore[no-untyped-def]
    """W_V (C, n_kv·hs), b_V, W_O (nh·hs, C), b_O as x @ W, from transformers' modules."""
    _, _, _, value, columns = _modules(layer, model.config)
    if hasattr(layer, "attn"):  # GPT-2's Conv1D: x @ W + b
        attn = layer.attn
        return value.weight[:, columns], value.bias[columns], attn.c_proj.weight, attn.c_proj.bias
    bias = None if value.bias is None else value.bias[columns]
    o_proj = layer.self_attn.o_proj
    return value.weight[columns].T, bias, o_proj.weight.T, o_proj.bias


def _parts(model, seen, out, index: int):  # type: ignore[no-untyped-def]
    """f (nh, T, C): f_h(n_j); parts (T, T, C): T_i(x_j); r (T, C); α (nh, T, T)."""
    import torch

    layer = _layers(model)[index]
    cfg = model.config
    nh = cfg.num_attention_heads
    hs = cfg.hidden_size // nh if not getattr(cfg, "head_dim", None) else cfg.head_dim
    groups = nh // getattr(cfg, "num_key_value_heads", nh)
    W_V, b_V, W_O, b_O = _weights(model, layer)
    n = seen[index]["n"]  # (T, C): the input norm's output, what the attention reads
    T = n.shape[0]
    values = n @ W_V + (0 if b_V is None else b_V)  # (T, n_kv·hs)
    values = values.view(T, -1, hs).transpose(0, 1)  # (n_kv, T, hs)
    f = torch.stack(
        [values[h // groups] @ W_O[h * hs : (h + 1) * hs] for h in range(nh)]
    )  # (nh, T, C)
    alpha = out.attentions[index][0]  # (nh, T, T)
    x = out.hidden_states[index][0]  # (T, C): the layer's input
    mixed = torch.einsum("hij,hjc->ijc", alpha, f)  # (T, T, C): Σ_h α_ij f_h(n_j)
    bias = 0 if b_O is None else b_O
    out_norm = _modules(layer, cfg)[1]
    if out_norm is not None:  # Gemma: (1 + w) ⊙ a_i / rms(a_i), the scale fixed per query
        attended = seen[index]["attended"]  # (T, C): the attention's output
        scale = (attended.pow(2).mean(-1, keepdim=True) + out_norm.eps).sqrt()  # (T, 1)
        mixed = (1 + out_norm.weight) * mixed / scale[:, None]
        bias = (1 + out_norm.weight) * bias / scale
    parts = mixed + torch.eye(T, dtype=x.dtype)[:, :, None] * x  # the residual: x_i at j = i
    r = seen[index]["r"]  # (T, C): the residual stream the feed-forward norm reads
    # the parts sum to the stream (to float32's digits where the model's norms round there)
    atol = 1e-8 if out_norm is None else 1e-5
    torch.testing.assert_close(parts.sum(1) + bias, r, atol=atol, rtol=0)
    return f, parts, r, alpha


def _reference(folder: Path, name: str, ids) -> np.ndarray:  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager").double().eval()
    torch.set_grad_enabled(False)
    try:
        return _measured(model, name, ids)
    finally:
        torch.set_grad_enabled(True)


def _measured(model, name: str, ids) -> np.ndarray:  # type: ignore[no-untyped-def]
    import torch

    seen, out = _run(model, ids)
    L = model.config.num_hidden_layers
    result = []
    for index in range(L):
        f, parts, r, alpha = _parts(model, seen, out, index)
        if name == "norm":
            result.append(alpha * torch.linalg.norm(f, dim=-1)[:, None, :])
        elif name == "norm-res-ln":
            result.append(torch.linalg.norm(parts, dim=-1))
        elif name == "alti":
            distance = (r[:, None, :] - parts).abs().sum(-1)  # (T, T): ‖r_i − T_i(x_j)‖₁
            closeness = (r.abs().sum(-1)[:, None] - distance).clamp_min(0)
            result.append(closeness / closeness.sum(-1, keepdim=True))
        else:
            result.append(torch.from_numpy(_value_zeroing(model, ids, index, seen)))
    return torch.stack(result).numpy()


def _value_zeroing(model, ids, index: int, seen) -> np.ndarray:  # type: ignore[no-untyped-def]
    import torch

    layer = _layers(model)[index]
    _, _, _, value, columns = _modules(layer, model.config)
    original = seen[index]["out"]  # (T, C)
    T = original.shape[0]
    distance = np.zeros((T, T))
    for j in range(T):

        def zero_j(module, inputs, output, j=j):  # type: ignore[no-untyped-def]
            output = output.clone()
            output[:, j, columns] = 0.0  # key j's value vector, in every key/value head
            return output

        moved, _ = _run(model, ids, [(value, zero_j)])
        cos = torch.nn.functional.cosine_similarity(original, moved[index]["out"], dim=-1)
        distance[:, j] = (1 - cos).clamp_min(0).numpy()
    distance[np.triu_indices(T, 1)] = 0.0  # later keys cannot move a token: rounding noise
    return distance / distance.sum(-1, keepdims=True)


def _analysis(folder: Path) -> attnviz.Analysis:
    return attnviz.analyse(TEXT, model=str(folder), cache=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", MEASURES)
@pytest.mark.parametrize("case", list(CASES))
def test_each_measure_equals_transformers_hooked_in_float64(
    tiny_decoder: TinyFactory, case: str, name: str
) -> None:
    import torch

    family, overrides = CASES[case]
    folder = tiny_decoder(family, **overrides)
    analysis = _analysis(folder)
    ours = analysis.measure(name)
    L, H, T, _ = analysis.attentions.shape
    assert T > 12  # longer than the window, so that it hides keys
    assert ours.shape == ((L, H, T, T) if name == "norm" else (L, T, T))
    ids = torch.tensor([analysis.prepared.pieces.ids])
    np.testing.assert_allclose(ours, _reference(folder, name, ids), atol=1e-4, rtol=0)


# The families of attnviz.model's newer decoders, written by tests/model/test_decoder_families.py:
# QK-norm (Qwen3, Gemma 3), soft-capping (Gemma 2), a norm on the attention's output
# (Gemma 2 and 3), q, k and v in one projection (Phi-3).
NEWER = ("gemma2", "gemma3_text", "qwen3", "phi3")
_written: dict[str, Path] = {}


@pytest.mark.slow
@pytest.mark.parametrize("name", MEASURES)
@pytest.mark.parametrize("family", NEWER)
def test_each_measure_on_the_newer_families(
    tmp_path_factory: pytest.TempPathFactory, family: str, name: str
) -> None:
    import torch

    newer = pytest.importorskip(
        "tests.model.test_decoder_families", reason="needs the newer decoders"
    )
    if family not in _written:
        _written[family] = newer.write_checkpoint(tmp_path_factory.mktemp(family), family)
    analysis = _analysis(_written[family])
    ours = analysis.measure(name)
    ids = torch.tensor([analysis.prepared.pieces.ids])
    np.testing.assert_allclose(ours, _reference(_written[family], name, ids), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", MEASURES)
def test_masked_cells_are_exactly_zero_and_rows_as_the_encoders(
    tiny_decoder: TinyFactory, name: str
) -> None:
    """Later keys, and keys past a sliding window, give exactly 0; ALTI and value zeroing
    rows sum to 1, the norms' rows to the norm added."""
    analysis = _analysis(tiny_decoder("mistral", sliding_window=6))
    values = analysis.measure(name)
    T = values.shape[-1]
    query, key = np.arange(T)[:, None], np.arange(T)[None, :]
    hidden = (key > query) | (key <= query - 6)  # (T, T): the causal mask and the window
    assert (values[..., hidden] == 0).all()
    if name != "alti":  # ALTI clips the keys that pull a token away from its output to 0
        assert (values[..., ~hidden] > 0).all()
    if name in ("alti", "value-zeroing"):
        np.testing.assert_allclose(values.sum(-1), 1.0, atol=1e-9)


def test_the_first_token_of_a_decoder_is_all_its_own(tiny_decoder: TinyFactory) -> None:
    """The first token sees only itself: every row-normalised measure gives it 1."""
    analysis = _analysis(tiny_decoder("llama", num_key_value_heads=2))
    for name in ("alti", "value-zeroing"):
        np.testing.assert_allclose(analysis.measure(name)[:, 0, 0], 1.0, atol=1e-12)


def test_a_family_not_checked_is_refused_in_one_line(tiny_decoder: TinyFactory) -> None:
    """A decoder family with no row of facts (where its norms sit) is refused by name."""
    from attnviz.measures.contributions import check_decoder_comparison, check_model

    prepared = attnviz.prepare(TEXT, model=str(tiny_decoder("llama")), cache=False)
    other = dataclasses.replace(prepared.shape, model_type="falcon", family="Falcon")
    unchecked = SimpleNamespace(shape=other, source=prepared.source)
    with pytest.raises(attnviz.BadInput, match="alti has not been checked on Falcon decoders"):
        check_model(unchecked, "alti")  # type: ignore[arg-type]
    with pytest.raises(attnviz.BadInput, match="not checked on Falcon decoders"):
        check_decoder_comparison(unchecked)  # type: ignore[arg-type]
    check_model(unchecked, "weight")  # type: ignore[arg-type]  (the weights are always there)
    prepared.check(measure="alti", compared=True)  # Llama is checked


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "qwen2"])
def test_compare_measures_and_rollout_of_alti_on_a_decoder(
    tiny_decoder: TinyFactory, family: str
) -> None:
    import json

    model = ("--model", str(tiny_decoder(family)))
    out = _cli("compare-measures", TEXT, *model, "--query", "seat", "--layer", "1")
    assert all(name in out for name in ("weight", "norm-res-ln", "alti", "value-zeroing"))
    record = json.loads(
        _cli("rollout", TEXT, *model, "--measure", "alti", "--units", "tokens", "--json")
    )
    expected = np.eye(len(record["tokens"]))  # ALTI carries the residual: its rows chain as is
    for layer in _analysis(tiny_decoder(family)).measure("alti"):
        expected = layer @ expected
    assert record["measure"] == "alti"
    np.testing.assert_allclose(record["rollout"], expected, atol=1e-9)
    assert not np.triu(expected, 1).any()  # nothing flows back from a later token

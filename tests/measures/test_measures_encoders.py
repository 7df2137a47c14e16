"""Measures beyond the weights, each checked against transformers' own modules in float64.

The references share no code with attnviz.measures.contributions: they read the dense weights of
transformers' BertModel, and zero a value vector with a forward hook on its
BertSelfAttention's value projection.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import attnviz
from tests.conftest import FAMILY_TYPES

EN = "John thought: the train was full, but he found a free seat."


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(EN)


@pytest.fixture(scope="module")
def reference(embedded_folder: Path):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(str(embedded_folder), attn_implementation="eager")
    model = model.double().eval()
    tokens = AutoTokenizer.from_pretrained(str(embedded_folder))(EN, return_tensors="pt")
    with torch.no_grad():
        out = model(**tokens, output_attentions=True, output_hidden_states=True)
    return model, out


def test_norm_equals_the_papers_formula_on_transformers_weights(
    analysis: attnviz.Analysis, reference
) -> None:  # type: ignore[no-untyped-def]
    import torch

    model, out = reference
    ours = analysis.measure("norm")
    L, H, T, _ = analysis.attentions.shape
    assert ours.shape == (L, H, T, T)
    for layer in range(L):
        torch.set_grad_enabled(False)
        x = out.hidden_states[layer][0]  # (T, C): what the layer reads
        block = model.encoder.layer[layer].attention
        values = block.self.value(x)  # (T, C)
        hs = values.shape[-1] // H
        for head in range(H):
            cols = slice(head * hs, (head + 1) * hs)
            f = values[:, cols] @ block.output.dense.weight[:, cols].T  # (T, C): f_h(x_j)
            alpha = out.attentions[layer][0, head]  # (T, T)
            expected = alpha * torch.linalg.norm(f, dim=-1)[None, :]
            np.testing.assert_allclose(ours[layer, head], expected.numpy(), atol=1e-4)
    torch.set_grad_enabled(True)


@pytest.mark.slow
def test_value_zeroing_equals_a_hooked_transformers_layer(
    analysis: attnviz.Analysis, reference
) -> None:  # type: ignore[no-untyped-def]
    import torch

    model, out = reference
    ours = analysis.measure("value-zeroing")
    L, _, T, _ = analysis.attentions.shape
    assert ours.shape == (L, T, T)
    np.testing.assert_allclose(ours.sum(-1), 1.0, atol=1e-9)
    for layer in (0, 3, 5):
        block = model.encoder.layer[layer]
        x = out.hidden_states[layer]  # (1, T, C)
        with torch.no_grad():
            original = _hidden(block(x))  # (T, C)
        expected = np.zeros((T, T))
        for j in range(T):

            def zero_j(module, inputs, output, j=j):  # type: ignore[no-untyped-def]
                output = output.clone()
                output[:, j] = 0.0  # key j's value vector, in every head
                return output

            handle = block.attention.self.value.register_forward_hook(zero_j)
            try:
                with torch.no_grad():
                    moved = _hidden(block(x))  # (T, C)
            finally:
                handle.remove()
            cos = torch.nn.functional.cosine_similarity(original, moved, dim=-1)  # (T,)
            expected[:, j] = (1 - cos).clamp_min(0).numpy()
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(ours[layer], expected, atol=1e-4)


def _hidden(output):  # type: ignore[no-untyped-def]
    """A BertLayer's output states (T, C): a tuple in some transformers releases."""
    states = output[0] if isinstance(output, tuple) else output
    return states[0]


def test_measure_names_are_checked(analysis: attnviz.Analysis) -> None:
    with pytest.raises(attnviz.BadInput, match="measure 'flow' is not one of weight, norm"):
        analysis.measure("flow")
    assert analysis.measure("weight") is analysis.attentions


@pytest.mark.slow
def test_value_zeroing_finds_the_pronoun_link(analysis: attnviz.Analysis) -> None:
    """On the default model, from layer 2 on, zeroing John's value moves `he` the most."""
    vz = analysis.measure("value-zeroing")
    he, john = analysis.labels.index("he"), analysis.labels.index("John")
    assert all(int(np.argmax(vz[layer, he])) == john for layer in (2, 3, 4, 5))


def _block_decomposition(model, out, layer: int, heads: int):  # type: ignore[no-untyped-def]
    """T_i(x_j) from transformers' BertLayer in float64, and the LayerNorm's real output.

    The LayerNorm's input and output are read with a forward hook; the decomposition
    uses transformers' dense weights (value, output.dense, LayerNorm γ).
    """
    import torch

    block = model.encoder.layer[layer].attention
    seen = {}
    handle = block.output.LayerNorm.register_forward_hook(
        lambda module, inputs, output: seen.update(pre=inputs[0][0], post=output[0])
    )
    try:
        with torch.no_grad():
            model.encoder.layer[layer](out.hidden_states[layer])
    finally:
        handle.remove()
    with torch.no_grad():
        x = out.hidden_states[layer][0]  # (T, C)
        T, C = x.shape
        hs = C // heads
        values = block.self.value(x).view(T, heads, hs)  # (T, h, hs)
        dense = block.output.dense.weight.view(C, heads, hs)  # (C, h, hs)
        alpha = out.attentions[layer][0]  # (h, T, T)
        mixed = torch.einsum("hij,jhv,chv->ijc", alpha, values, dense)  # (T, T, C)
        mixed = mixed + torch.eye(T, dtype=x.dtype)[:, :, None] * x[:, None, :]  # residual
        ln = block.output.LayerNorm
        centred = mixed - mixed.mean(-1, keepdim=True)
        std = torch.sqrt(seen["pre"].var(-1, unbiased=False) + ln.eps)  # (T,)
        decomposed = ln.weight * centred / std[:, None, None]  # (T, T, C): T_i(x_j)
        bias = ln.weight * (block.output.dense.bias - block.output.dense.bias.mean())
        rebuilt = decomposed.sum(1) + bias / std[:, None] + ln.bias  # (T, C)
    return decomposed, seen["post"], rebuilt


@pytest.mark.parametrize("name", ["norm-res-ln", "alti"])
def test_residual_and_layernorm_measures_equal_transformers(
    analysis: attnviz.Analysis, reference, name: str
) -> None:  # type: ignore[no-untyped-def]
    import torch

    model, out = reference
    ours = analysis.measure(name)
    L, H, T, _ = analysis.attentions.shape
    assert ours.shape == (L, T, T)
    for layer in range(L):
        decomposed, y, rebuilt = _block_decomposition(model, out, layer, H)
        torch.testing.assert_close(rebuilt, y, atol=1e-8, rtol=0)  # the sum is the output
        if name == "norm-res-ln":
            expected = torch.linalg.norm(decomposed, dim=-1)
        else:
            distance = (y[:, None, :] - decomposed).abs().sum(-1)  # (T, T): ‖y_i − T_i(x_j)‖₁
            expected = (y.abs().sum(-1)[:, None] - distance).clamp_min(0)
            expected = expected / expected.sum(-1, keepdim=True)
        np.testing.assert_allclose(ours[layer], expected.numpy(), atol=1e-4)


def _cli(*args: str) -> str:
    import json  # noqa: F401  (the callers parse)

    from typer.testing import CliRunner

    from attnviz.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_show_draws_a_measure_and_json_says_which(analysis: attnviz.Analysis) -> None:
    import json

    record = json.loads(_cli("show", EN, "--layer", "3", "--measure", "alti", "--json"))
    assert record["measure"] == "alti" and record["head"] is None
    expected = analysis.view(3, units="words", measure="alti").matrix
    np.testing.assert_allclose(record["weights"], expected, atol=1e-12)
    np.testing.assert_allclose(np.sum(record["weights"], axis=-1), 1.0, atol=1e-9)


def test_per_layer_measures_refuse_heads_before_any_work() -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    for args in (["show", "--head", "7"], ["heads"], ["model", "--heads", "0,1"]):
        result = CliRunner().invoke(app, [*args, EN, "--measure", "value-zeroing"])
        assert result.exit_code == 2
        assert "value-zeroing is measured per layer" in result.stderr


def test_rollout_of_alti_is_the_product_of_its_layers(analysis: attnviz.Analysis) -> None:
    alti = analysis.measure("alti")  # (L, T, T), rows sum to 1: no identity added
    expected = np.eye(alti.shape[-1])
    for layer in alti[:4]:
        expected = layer @ expected
    chained = analysis.rollout(upto=3, units="tokens", measure="alti")
    np.testing.assert_allclose(chained.matrix, expected, atol=1e-12)
    assert "ALTI" in chained.title and chained.to_dict()["measure"] == "alti"


def test_export_carries_the_measure(analysis: attnviz.Analysis, tmp_path: Path) -> None:
    out = tmp_path / "x.npz"
    _cli("export", EN, "--measure", "norm", "--out", str(out))
    with np.load(out) as data:
        np.testing.assert_allclose(data["norm"], analysis.measure("norm"), rtol=1e-6)
        assert data["attentions"].shape == data["norm"].shape


@pytest.mark.slow
def test_flow_from_the_command_line() -> None:
    import json

    record = json.loads(_cli("rollout", EN, "--method", "flow", "--upto", "1", "--json"))
    assert record["method"] == "flow"
    np.testing.assert_allclose(np.sum(record["rollout"], axis=-1), 1.0, atol=1e-9)


@pytest.mark.slow  # every measure (value zeroing, ALTI, ...) on the default model
def test_compare_measures_ranks_each_measures_row(analysis: attnviz.Analysis) -> None:
    import json

    comparison = analysis.compare("he", layer=3)
    john, he = comparison.labels.index("John"), comparison.labels.index("he")
    assert comparison.ranking("value-zeroing")[0] == john
    assert comparison.ranking("alti")[0] == he  # the residual: ALTI counts the token itself
    expected = analysis.view(3, measure="alti").matrix[he]
    np.testing.assert_allclose(comparison.values[comparison.measures.index("alti")], expected)
    np.testing.assert_allclose(comparison.shares.sum(-1), 1.0)
    assert any("put 'John' first" in line for line in comparison.disagreements())
    record = json.loads(_cli("compare-measures", EN, "--query", "he", "--layer", "3", "--json"))
    assert record["query"] == "he" and set(record["measures"]) == set(comparison.measures)
    assert record["measures"]["value-zeroing"]["ranking"][0] == john
    with pytest.raises(attnviz.BadInput, match="not a word of the text"):
        analysis.compare("she")


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILY_TYPES)
def test_every_measure_on_every_encoder_family(family: str, tiny_model) -> None:  # type: ignore[no-untyped-def]
    """The measures read the same from-scratch layers in every family: each runs, finite."""
    from attnviz.measures.contributions import MEASURES

    analysis = attnviz.analyse("the bank refused the loan", model=str(tiny_model(family)))
    L, H, T, _ = analysis.attentions.shape
    for name in MEASURES:
        values = analysis.measure(name)
        assert values.shape == ((L, H, T, T) if name in ("weight", "norm") else (L, T, T))
        assert np.isfinite(values).all(), name
        if name in ("weight", "alti", "value-zeroing"):
            np.testing.assert_allclose(values.sum(-1), 1.0, atol=1e-5)

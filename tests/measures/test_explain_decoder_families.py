"""`explain` on Gemma 2, Gemma 3, Qwen3 and Phi-3: the new steps shown on real numbers.

Every number the walkthrough shows for a new step is recomputed here from the model's
own weights: q and k before and after QK-norm, the scores before and after soft-capping,
the layer's window and rotary base, the turned share of a head; and the weights are the
decoder's own attention (`analyse`), which tests/model/test_decoder_families.py holds to
transformers'.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rich.cells import cell_len

from attnviz import analyse, prepare
from attnviz.language import LANGS
from attnviz.measures.explain import Explanation, explain
from attnviz.render.explain import ExplanationView
from tests.model.test_decoder_families import TEXT, write_checkpoint
from tests.rendering import render as render_view

CHECKPOINTS: dict[str, tuple[str, dict[str, Any]]] = {
    "gemma2": ("gemma2", {}),
    "gemma3": ("gemma3_text", {}),
    "qwen3": ("qwen3", {}),
    "phi3": ("phi3", {"partial_rotary_factor": 0.5, "sliding_window": 5}),
}


@pytest.fixture(scope="module")
def explained(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Any, list[Explanation], np.ndarray]]:
    """Per checkpoint: the loaded model, explanations of (layer, head, query), attentions."""
    from attnviz.model.weights import load_encoder

    out = {}
    for name, (family, overrides) in CHECKPOINTS.items():
        folder = write_checkpoint(tmp_path_factory.mktemp(name), family, **overrides)
        prepared = prepare(TEXT, model=str(folder), cache=False)
        model = load_encoder(folder)
        T = len(prepared.pieces)
        explanations = [
            explain(prepared, layer=layer, head=head, query=q, encoder=model)
            for layer in range(4)
            for head in (0, 3)
            for q in (0, 7, T - 1)
        ]
        attentions = analyse(TEXT, model=str(folder), cache=False).attentions  # (L, H, T, T)
        out[name] = (model, explanations, attentions)
    return out


def _rms_norm(x: np.ndarray, weight: np.ndarray, gemma: bool) -> np.ndarray:
    """RMSNorm over the last axis, gain 1 + w (Gemma) or w (Qwen3), recomputed in numpy."""
    x64 = x.astype(np.float64)
    normed = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6)
    return normed * ((1 + weight) if gemma else weight)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKPOINTS))
def test_weights_are_the_decoders_attention(explained: dict, name: str) -> None:
    _, explanations, attentions = explained[name]
    for e in explanations:
        np.testing.assert_allclose(
            e.weights, attentions[e.layer, e.head, e.query], atol=1e-5, err_msg=str(e)
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma3", "qwen3"])
def test_qk_norm_before_and_after_are_the_heads_rms_normalised(explained: dict, name: str) -> None:
    model, explanations, _ = explained[name]
    for e in explanations:
        attention = model.layers[e.layer].attention
        assert e.q_unnormed is not None and e.k_unnormed is not None
        q_gain = attention.q_norm.weight.detach().numpy()
        k_gain = attention.k_norm.weight.detach().numpy()
        gemma = name == "gemma3"
        np.testing.assert_allclose(
            e.q_unrotated, _rms_norm(e.q_unnormed, q_gain, gemma), 1e-4, 1e-5
        )
        np.testing.assert_allclose(
            e.k_unrotated, _rms_norm(e.k_unnormed, k_gain, gemma), 1e-4, 1e-5
        )
        assert not np.allclose(e.q_unnormed, e.q_unrotated)  # the step changes something


@pytest.mark.slow
def test_soft_capping_bends_the_scaled_scores(explained: dict) -> None:
    _, explanations, _ = explained["gemma2"]
    for e in explanations:
        assert e.softcap == 3.0 and e.capped_scores is not None
        assert e.scale == pytest.approx(24**-0.5) and e.query_pre_attn_scalar == 24
        np.testing.assert_allclose(e.scaled_scores, e.raw_scores * e.scale, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(e.capped_scores, np.tanh(e.scaled_scores / 3) * 3, 1e-5, 1e-6)
        assert np.abs(e.capped_scores).max() < 3.0
        seen = ~e.hidden
        expected = np.exp(e.capped_scores[seen] - e.capped_scores[seen].max())
        np.testing.assert_allclose(e.weights[seen], expected / expected.sum(), atol=1e-6)
    assert any(np.abs(e.scaled_scores - e.capped_scores).max() > 0.1 for e in explanations)
    assert all(e.softcap is None for e in explained["gemma3"][1])


@pytest.mark.slow
def test_each_layer_shows_its_window_and_rotary_base(explained: dict) -> None:
    """Gemma 3: layers 0, 2, 3 slide a window of 5 and turn with θ = 37; layer 1, θ = 1000."""
    _, explanations, _ = explained["gemma3"]
    for e in explanations:
        sliding = e.layer != 1
        assert e.window == (5 if sliding else None)
        assert e.rope_local == sliding and e.rope_global_theta == 1000.0
        theta = 37.0 if sliding else 1000.0
        assert e.rope_theta == theta
        np.testing.assert_allclose(e.angles, e.query * theta ** (-np.arange(8) * 2 / 16), 1e-5)
        seen = np.flatnonzero(~e.hidden)
        first = max(0, e.query - 4) if sliding else 0
        assert seen.tolist() == list(range(first, e.query + 1))


@pytest.mark.slow
def test_phi3_turns_only_part_of_each_head(explained: dict) -> None:
    _, explanations, _ = explained["phi3"]
    for e in explanations:
        assert e.rotary_dims == 8 and e.angles is not None and len(e.angles) == 4
        np.testing.assert_allclose(e.angles, e.query * 10000.0 ** (-np.arange(4) * 2 / 8), 1e-5)
        np.testing.assert_array_equal(e.q[8:], e.q_unrotated[8:])  # the rest pass unturned
        assert e.window == 5


def render(e: Explanation, lang: str) -> str:
    return render_view(ExplanationView(e, lang), 80, colour=False)


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_the_text_shows_the_new_steps(explained: dict, lang: str) -> None:
    gemma2 = next(e for e in explained["gemma2"][1] if e.query == 7 and e.layer == 0)
    out = render(gemma2, lang)
    flat = " ".join(out.split())
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    top = int(np.argmax(np.where(gemma2.hidden, -np.inf, gemma2.raw_scores)))
    assert "attn_logit_softcapping = 3" in flat and "tanh(sⱼ / 3) × 3" in flat
    assert f"{gemma2.capped_scores[top]:.2f}" in flat
    assert "query_pre_attn_scalar" in flat and f"{gemma2.scale:.4f}" in flat
    assert "2a." not in out  # Gemma 2 has no QK-norm

    gemma3 = next(e for e in explained["gemma3"][1] if e.query == 7 and e.layer == 0)
    out = render(gemma3, lang)
    flat = " ".join(out.split())
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "2a. QK-norm" in out
    assert f"{np.linalg.norm(gemma3.q_unnormed):.2f}" in flat
    assert f"{np.linalg.norm(gemma3.q_unrotated):.2f}" in flat
    assert "θ = 37" in flat and "θ = 1000" in flat
    assert "tanh" not in flat

    phi3 = next(e for e in explained["phi3"][1] if e.query == 7)
    flat = " ".join(render(phi3, lang).split())
    assert {"en": "the first 8 of the head's 16", "pt": "os primeiros 8 dos 16"}[lang] in flat

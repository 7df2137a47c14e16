"""`explain` on decoders: the same numbers the decoder computes, the steps that differ said.

Each family's tiny random checkpoint (tests/conftest.py) is explained for every layer,
head and query; the weights must be the decoder's own attention (`analyse`), and the
attention's output for the query must be transformers' (eager attention, read with a
hook on the reference's attention module). The text must say what a decoder does
differently, in both languages, within 80 columns.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.cells import cell_len

from attnviz import analyse, prepare
from attnviz.language import LANGS
from attnviz.measures.explain import Explanation, explain
from attnviz.render.explain import ExplanationView
from tests.conftest import TinyFactory
from tests.rendering import render as render_view

# Slow: the module fixture explains every (layer, head, query) of four decoders, about a
# thousand `explain` calls (the largest setup of `make test-fast` before it was marked).
pytestmark = pytest.mark.slow

TEXT = "The cat sat on the mat, and then the dog sat on the log."

# family -> config overrides: Llama with grouped-query attention (8 query heads, 4 key/value
# heads, the fixture's default), Mistral with a window (4) far shorter than the text.
FAMILIES: dict[str, dict[str, Any]] = {
    "gpt2": {},
    "llama": {},
    "qwen2": {},
    "mistral": {"sliding_window": 4},
}


@pytest.fixture(scope="module")
def explained(tiny_decoder: TinyFactory) -> dict[str, tuple[Path, list[Explanation]]]:
    """For each family: its folder and the explanation of every (layer, head, query)."""
    from attnviz.model.weights import load_encoder

    out = {}
    for family, overrides in FAMILIES.items():
        folder = tiny_decoder(family, **overrides)
        prepared = prepare(TEXT, model=str(folder), cache=False)
        model = load_encoder(folder)
        T = len(prepared.pieces)
        out[family] = (
            folder,
            [
                explain(prepared, layer=layer, head=head, query=q, encoder=model)
                for layer in range(2)
                for head in range(8)
                for q in range(T)
            ],
        )
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_weights_are_the_decoders_attention(explained: dict, family: str) -> None:
    folder, explanations = explained[family]
    attentions = analyse(TEXT, model=str(folder), cache=False).attentions  # (L, H, T, T)
    for e in explanations:
        np.testing.assert_allclose(
            e.weights, attentions[e.layer, e.head, e.query], atol=1e-5, err_msg=str(e)
        )
        assert e.decoder and not e.causal  # the model's own mask, not the what-if
        assert not e.weights[e.query + 1 :].any()  # never a later key


@pytest.mark.parametrize("family", FAMILIES)
def test_output_is_the_reference_attention_output(explained: dict, family: str) -> None:
    """The attention's output for the query equals transformers' attention module's."""
    import torch
    from transformers import AutoModel

    folder, explanations = explained[family]
    reference = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    blocks = reference.h if family == "gpt2" else reference.layers
    outputs: dict[int, torch.Tensor] = {}
    hooks = [
        (block.attn if family == "gpt2" else block.self_attn).register_forward_hook(
            lambda module, args, kwargs, result, i=i: outputs.__setitem__(i, result[0][0]),
            with_kwargs=True,
        )
        for i, block in enumerate(blocks)
    ]
    ids = prepare(TEXT, model=str(folder), cache=False).pieces.ids
    with torch.inference_mode():
        reference(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    for e in explanations:
        np.testing.assert_allclose(
            e.output, outputs[e.layer][e.query].numpy(), atol=1e-4, rtol=1e-5, err_msg=str(e)
        )


def test_grouped_query_heads_read_their_groups_key_value_head(explained: dict) -> None:
    for e in explained["llama"][1]:
        assert (e.num_kv_heads, e.groups, e.kv_head) == (4, 2, e.head // 2)
        assert list(e.kv_columns) == list(range(8 * (e.head // 2), 8 * (e.head // 2) + 8))
    for e in explained["gpt2"][1]:
        assert e.groups == 1 and e.kv_head == e.head


def test_rotary_turns_q_and_k_without_changing_their_norms(explained: dict) -> None:
    for family in ("llama", "qwen2", "mistral"):
        for e in explained[family][1]:
            assert e.angles is not None and e.q_unrotated is not None
            assert e.k_unrotated is not None
            # position p turns pair i by p·θ^(−2i/d_k): the first pair by p radians
            expected = e.query * 10000.0 ** (-np.arange(4) * 2 / 8)
            np.testing.assert_allclose(e.angles, expected, rtol=1e-5)
            np.testing.assert_allclose(np.linalg.norm(e.q), np.linalg.norm(e.q_unrotated), 1e-5)
            np.testing.assert_allclose(
                np.linalg.norm(e.k, axis=-1), np.linalg.norm(e.k_unrotated, axis=-1), 1e-5
            )
            if e.query > 0:  # position 0 turns by nothing; later ones do
                assert not np.allclose(e.q, e.q_unrotated)
    assert all(e.angles is None for e in explained["gpt2"][1])  # learned positions


def test_sliding_window_hides_keys_further_back(explained: dict) -> None:
    for e in explained["mistral"][1]:
        seen = np.flatnonzero(~e.hidden)
        assert seen.tolist() == list(range(max(0, e.query - 3), e.query + 1))
        assert e.window == 4


def render(e: Explanation, lang: str) -> str:
    return render_view(ExplanationView(e, lang), 80, colour=False)


def _one(explained: dict, family: str, layer: int, head: int, query: int) -> Explanation:
    return next(
        e for e in explained[family][1] if (e.layer, e.head, e.query) == (layer, head, query)
    )


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_text_says_what_a_decoder_does(explained: dict, family: str, lang: str) -> None:
    e = _one(explained, family, 1, 3, 12)
    out = render(e, lang)
    flat = " ".join(out.split())
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert {"en": "decoder, causal", "pt": "decodificador, causal"}[lang] in flat
    if lang == "pt":  # the labels' words, the English one only as a gloss at the first use
        rest = flat.replace("consulta (query)", "").replace("chave (key)", "")
        rest = rest.replace("valores (values)", "").replace("(grouped-query attention)", "")
        assert not re.search(r"\b(quer(y|ies)|keys?|values?|scores?)\b", rest, re.IGNORECASE)
    assert "what-if" not in flat and "hipotética" not in flat  # the mask is the model's own
    own_mask = {"en": "The model's own causal mask", "pt": "A máscara causal do próprio modelo"}
    assert own_mask[lang] in flat
    assert ("2b." in out) == (family != "gpt2")
    if family != "gpt2":
        assert f"{e.angles[0]:.3f} rad" in flat and f"{e.angles[-1]:.4f} rad" in flat
    if family in ("llama", "qwen2", "mistral"):
        assert f"{e.kv_head} = 3 // 2" in flat
    if family == "mistral":
        assert {"en": "sliding window", "pt": "janela deslizante"}[lang] in flat
    norm = "LayerNorm" if family == "gpt2" else "RMSNorm"
    assert norm in flat
    assert f"= {e.output_norm:.2f}" in flat


def test_the_first_query_sees_only_itself(explained: dict) -> None:
    e = _one(explained, "llama", 0, 0, 0)
    assert e.weights[0] == pytest.approx(1.0)
    assert "the only key it may see is itself" in " ".join(render(e, "en").split())


def test_gpt2_scale_by_inverse_layer(tiny_decoder: TinyFactory) -> None:
    """scale_attn_by_inverse_layer_idx: layer 1's scores are divided by √d_k and by 2."""
    folder = tiny_decoder("gpt2", scale_attn_by_inverse_layer_idx=True)
    prepared = prepare(TEXT, model=str(folder), cache=False)
    e = explain(prepared, layer=1, head=2, query=6)
    assert e.scale == pytest.approx(1 / np.sqrt(8) / 2)
    np.testing.assert_allclose(e.scaled_scores, e.raw_scores * e.scale, rtol=1e-5)
    np.testing.assert_allclose(
        e.weights, analyse(TEXT, model=str(folder), cache=False).attentions[1, 2, 6], atol=1e-5
    )
    flat = " ".join(render(e, "en").split())
    assert "layer + 1 = 2" in flat and f"× {e.scale:.4f}" in flat

"""`attnviz explain`: the numbers of one query through one head, the query lookup,
the en/pt catalogue, and the rendered steps at 80 columns.

The numbers are checked against the encoder's own attention weights, against a
recomputation from the encoder's projections, and (for the contributions
‖wⱼ f(xⱼ)‖) against transformers' BertModel run on the same checkpoint.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch
from rich.cells import cell_len

from attnviz.api import prepare
from attnviz.errors import BadInput
from attnviz.i18n import CATALOGUE, placeholders, text
from attnviz.language import LANGS, default_lang
from attnviz.measures.explain import Explanation, explain, find_query
from attnviz.prepared import Prepared
from attnviz.render.explain import ExplanationView, bar, shown_rows
from tests.conftest import PT_SENTENCE, TinyFactory
from tests.rendering import render as render_view

TWO_ELE = "Ele disse que ele viria, e ele veio."
# (layer, head, query): the last layer's default head, a middle one, negative indices.
CASES = [(-1, 0, 14), (0, 3, 6), (2, 11, 0), (5, -1, -1)]


@pytest.fixture(scope="module")
def prepared() -> Prepared:
    return prepare(PT_SENTENCE)


@pytest.fixture(scope="module")
def encoder(prepared: Prepared) -> Any:
    from attnviz.model.weights import load_encoder

    return load_encoder(prepared.model.folder, prepared.config)


@pytest.fixture(scope="module")
def forward(prepared: Prepared, encoder: Any) -> dict[bool, Any]:
    """The encoder's own outputs, without and with the causal mask."""
    ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    types = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    with torch.inference_mode():
        return {c: encoder(ids, types, causal=c, keep_inputs=True) for c in (False, True)}


@pytest.fixture(scope="module")
def reference(prepared: Prepared) -> Any:
    """transformers' BertModel on the same checkpoint: every hidden state and attention."""
    from transformers import BertModel

    model = BertModel.from_pretrained(str(prepared.model.folder), attn_implementation="eager")
    model.eval()
    ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    types = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    with torch.inference_mode():
        out = model(
            input_ids=ids, token_type_ids=types, output_attentions=True, output_hidden_states=True
        )
    return model, out


@pytest.fixture(scope="module")
def explained(prepared: Prepared, encoder: Any) -> dict[tuple[int, int, int, bool], Explanation]:
    """Explanations of every case, with and without the causal mask."""
    return {
        (layer, head, query, causal): explain(
            prepared, layer=layer, head=head, query=query, causal=causal, encoder=encoder
        )
        for layer, head, query in CASES
        for causal in (False, True)
    }


def _cases(explained: dict) -> list[tuple[Explanation, bool]]:
    return [(e, key[3]) for key, e in explained.items()]


# ---------------------------------------------------------------------------
# The numbers


def test_weights_are_the_encoders_attention(explained: dict, forward: dict) -> None:
    for e, causal in _cases(explained):
        expected = forward[causal].attentions[e.layer, 0, e.head, e.query].numpy()  # (T,)
        np.testing.assert_allclose(e.weights, expected, atol=1e-6, rtol=0)
        assert e.weight_sum == pytest.approx(1.0, abs=1e-5)


def test_negative_indices_are_resolved(explained: dict, prepared: Prepared) -> None:
    e = explained[(5, -1, -1, False)]
    assert (e.layer, e.head, e.query) == (5, 11, len(prepared.pieces) - 1)
    assert explained[(-1, 0, 14, False)].layer == 5


def test_scores_scale_and_softmax_are_consistent(explained: dict) -> None:
    for e, _ in _cases(explained):
        assert e.head_size == e.hidden_size // e.num_heads == 32
        assert e.scale == pytest.approx(1 / np.sqrt(32))
        np.testing.assert_allclose(e.raw_scores, e.k @ e.q, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(e.scaled_scores, e.raw_scores * e.scale, rtol=1e-5, atol=1e-6)
        scores = np.where(e.hidden, -np.inf, e.scaled_scores.astype(np.float64))  # (T,)
        softmax = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
        np.testing.assert_allclose(e.weights, softmax, atol=1e-6, rtol=0)


def test_head_output_is_the_weighted_sum_of_values(
    explained: dict, encoder: Any, forward: dict
) -> None:
    for e, causal in _cases(explained):
        attention = encoder.layers[e.layer].attention
        with torch.inference_mode():
            x = forward[causal].layer_inputs[e.layer, 0]  # (T, C)
            values = attention.v_proj(x)[:, e.head_columns.start : e.head_columns.stop]  # (T, dk)
        expected = (e.weights.astype(np.float64)[:, None] * values.double().numpy()).sum(0)
        np.testing.assert_allclose(e.head_output, expected, atol=1e-5)


def test_output_is_the_attention_modules_output(
    explained: dict, encoder: Any, forward: dict, prepared: Prepared
) -> None:
    from attnviz.model.encoder import hiding_mask

    T = len(prepared.pieces)
    for e, causal in _cases(explained):
        attention = encoder.layers[e.layer].attention
        with torch.inference_mode():
            x = forward[causal].layer_inputs[e.layer]  # (1, T, C)
            out, _ = attention(x, x, x, hiding_mask(None, causal, T, x.device))  # (1, T, C)
        np.testing.assert_allclose(e.output, out[0, e.query].numpy(), atol=1e-5)
        assert e.output_norm == pytest.approx(float(out[0, e.query].norm()), rel=1e-5)
        assert e.joined.shape == (e.num_heads * e.head_size,) == (e.hidden_size,)


def test_contributions_match_transformers(explained: dict, reference: Any) -> None:
    """‖wⱼ f(xⱼ)‖ with f(x) = (x W_V + b_V) W_O[head], from BertModel's own tensors."""
    model, out = reference
    checked = 0
    for (_, _, _, causal), e in explained.items():
        if causal:
            continue  # BertModel has no causal what-if
        layer = model.encoder.layer[e.layer].attention
        cols = slice(e.head_columns.start, e.head_columns.stop)
        with torch.no_grad():
            x = out.hidden_states[e.layer][0].double()  # (T, C), the layer's input
            W_V, b_V = layer.self.value.weight.double(), layer.self.value.bias.double()
            W_O = layer.output.dense.weight.double()  # (C, C)
            transformed = (x @ W_V.T + b_V)[:, cols] @ W_O[:, cols].T  # (T, C)
            weights = out.attentions[e.layer][0, e.head, e.query].double()  # (T,)
            expected = (weights[:, None] * transformed).norm(dim=-1)  # (T,)
        np.testing.assert_allclose(e.contributions, expected.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            e.transformed_norms, transformed.norm(dim=-1).numpy(), rtol=1e-4, atol=1e-5
        )
        checked += 1
    assert checked == len(CASES)


def test_weight_and_contribution_rank_keys_differently_somewhere(explained: dict) -> None:
    """The point of step 7: on this sentence some head puts its largest weight on a key
    that is not the largest contributor."""
    assert any(e.top_weight != e.top_contribution for e, _ in _cases(explained))


def test_causal_hides_every_later_key(explained: dict) -> None:
    for e, causal in _cases(explained):
        later = np.arange(e.num_pieces) > e.query  # (T,)
        if causal:
            assert np.array_equal(e.hidden, later)
            assert np.all(e.weights[later] == 0.0)
            assert np.all(e.contributions[later] == 0.0)
        else:
            assert not e.hidden.any()
            assert np.all(e.weights > 0)


def test_explanation_holds_plain_read_only_arrays(explained: dict) -> None:
    e = explained[(-1, 0, 14, False)]
    for name, value in vars(e).items():
        assert not isinstance(value, torch.Tensor), name
        if isinstance(value, np.ndarray):
            assert not value.flags.writeable, name
    assert e.labels[e.query] == "el" and e.words[e.query] == "ele"
    assert e.word_pieces == (14, 15)


def test_explain_rejects_out_of_range(prepared: Prepared, encoder: Any) -> None:
    for kwargs, what in (
        ({"layer": 6, "head": 0, "query": 0}, "layer 6"),
        ({"layer": 0, "head": -13, "query": 0}, "head -13"),
        ({"layer": 0, "head": 0, "query": 28}, "^query 28"),  # the Python parameter
    ):
        with pytest.raises(BadInput, match=what):
            explain(prepared, encoder=encoder, **kwargs)


# ---------------------------------------------------------------------------
# find_query


def test_find_query_matches_words_case_insensitively(prepared: Prepared) -> None:
    pieces = prepared.pieces
    choice = find_query(pieces, token="JOÃO", index=None)
    assert (choice.index, choice.label, choice.note) == (1, "João", None)
    assert find_query(pieces, token="joão", index=None).index == 1
    assert find_query(pieces, token="[sep]", index=None).index == len(pieces) - 1


def test_find_query_first_piece_of_a_long_word(prepared: Prepared) -> None:
    choice = find_query(prepared.pieces, token="conseguiu", index=None)
    assert (choice.index, choice.label, choice.word) == (16, "con", "conseguiu")
    assert choice.word_pieces == (16, 17, 18, 19)
    assert choice.note is not None
    assert "4" in choice.note and "con, ##se, ##gui, ##u" in choice.note
    pt = find_query(prepared.pieces, token="conseguiu", index=None, lang="pt")
    assert pt.note is not None and "peças" in pt.note


def test_find_query_occurrences() -> None:
    pieces = prepare(TWO_ELE).pieces
    starts = [w.pieces[0] for w in pieces.words() if w.label.lower() == "ele"]
    assert len(starts) == 3
    assert find_query(pieces, token="ele", index=None).index == starts[0]
    assert find_query(pieces, token="ele#1", index=None).index == starts[0]
    assert find_query(pieces, token="ele#2", index=None).index == starts[1]
    assert find_query(pieces, token="ELE#3", index=None).index == starts[2]
    with pytest.raises(BadInput, match=r"3 times; use ele#1\.\.ele#3"):
        find_query(pieces, token="ele#4", index=None)
    with pytest.raises(BadInput, match=r"ele#1\.\.ele#3"):
        find_query(pieces, token="ele#0", index=None)


def test_find_query_unknown_word_lists_the_candidates(prepared: Prepared) -> None:
    with pytest.raises(BadInput) as raised:
        find_query(prepared.pieces, token="trens", index=None)
    message = str(raised.value)
    for word in ("João", "pensou", "trem", "cadeira", "livre"):
        assert word in message
    assert "did you mean 'trem'" in message
    assert "\n" not in message


def test_find_query_by_index(prepared: Prepared) -> None:
    pieces = prepared.pieces
    T = len(pieces)
    choice = find_query(pieces, token=None, index=7)
    assert (choice.index, choice.label, choice.word, choice.note) == (7, "##m", "trem", None)
    assert find_query(pieces, token=None, index=-1).index == T - 1
    assert find_query(pieces, token=None, index=-T).index == 0
    for bad in (T, -T - 1):
        with pytest.raises(BadInput, match=f"^index {bad} is out of range.*{T} pieces"):
            find_query(pieces, token=None, index=bad)


def test_find_query_needs_exactly_one_of_token_and_index(prepared: Prepared) -> None:
    with pytest.raises(BadInput, match="exactly one"):
        find_query(prepared.pieces, token="trem", index=3)
    with pytest.raises(BadInput, match="exactly one"):
        find_query(prepared.pieces, token=None, index=None)


# ---------------------------------------------------------------------------
# The catalogue


def test_catalogue_is_complete_in_every_language() -> None:
    assert set(CATALOGUE) == set(LANGS) == {"en", "pt"}
    keys = set(CATALOGUE["en"])
    for lang in LANGS:
        assert set(CATALOGUE[lang]) == keys, lang
        for key in keys:
            assert CATALOGUE[lang][key].strip(), (lang, key)
            assert placeholders(CATALOGUE[lang][key]) == placeholders(CATALOGUE["en"][key]), key
    # the two languages really differ where there is prose
    assert CATALOGUE["pt"]["step6_body"] != CATALOGUE["en"]["step6_body"]
    # the labels of every drawing, table and page (attnviz.lexicon): the same rule
    from attnviz.lexicon import LABELS

    assert set(LABELS) == set(LANGS)
    for lang in LANGS:
        assert set(LABELS[lang]) == set(LABELS["en"]), lang
        for key, english in LABELS["en"].items():
            assert LABELS[lang][key].strip(), (lang, key)
            assert placeholders(LABELS[lang][key]) == placeholders(english), key


def test_default_lang_follows_lang() -> None:
    assert default_lang({"LANG": "pt_BR.UTF-8"}) == "pt"
    assert default_lang({"LANG": "pt_PT"}) == "pt"
    assert default_lang({"LANG": "en_US.UTF-8"}) == "en"
    assert default_lang({"LANG": "C"}) == "en"
    assert default_lang({}) == "en"


def test_unknown_lang_is_bad_input() -> None:
    with pytest.raises(BadInput, match="en, pt"):
        text("fr", "step1")


# ---------------------------------------------------------------------------
# The view


def render(explanation: Explanation, lang: str, width: int = 80, colour: bool = False) -> str:
    return render_view(ExplanationView(explanation, lang), width, colour=colour)


@pytest.mark.parametrize("lang", LANGS)
def test_view_fits_80_columns_and_shows_the_numbers(explained: dict, lang: str) -> None:
    for (_, _, _, causal), e in explained.items():
        out = render(e, lang)
        widest = max(cell_len(line) for line in out.splitlines())
        assert widest <= 80, (lang, causal, widest)
        assert "d_k = d / h = 384 / 12 = 32" in out
        assert "1/√32 = 0.1768" in out
        assert "Σ wⱼ = 1.00" in out
        assert "12 × 32 = 384" in out
        assert f"= {e.output_norm:.2f}" in out
        assert "[CLS]" in out and "[SEP]" in out  # labels are text, not markup
        assert ("−∞" in out) == (causal and e.query < e.num_pieces - 1)


def test_view_language_and_contribution_remark(explained: dict) -> None:
    e = explained[(-1, 0, 14, False)]
    en, pt = render(e, "en"), render(e, "pt")
    assert "Softmax: from scores to weights" in en and "Softmax: das pontuações aos pesos" in pt
    assert "'el' of 'ele'" in en and "'el' de 'ele'" in pt
    assert "the query is its first piece" in en
    w, c = e.top_weight, e.top_contribution
    assert w != c  # this head's query is the example the remark is for
    assert f"the largest weight, {e.weights[w]:.3f}" in en
    assert f"largest contribution, {e.contributions[c]:.3f}" in " ".join(en.split())


def test_view_in_colour_fits_too(explained: dict) -> None:
    out = render(explained[(-1, 0, 14, True)], "pt", colour=True)
    from rich.text import Text

    plain = Text.from_ansi(out).plain
    assert max(cell_len(line) for line in plain.splitlines()) <= 80


def test_view_of_a_long_text_shows_the_keys_that_matter(encoder: Any) -> None:
    long = prepare(" ".join([PT_SENTENCE] * 3))
    e = explain(long, layer=-1, head=0, query=14, encoder=encoder)
    assert e.num_pieces > 64
    out = render(e, "en")
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    rows = shown_rows(e, 32)
    assert len(rows) < e.num_pieces
    assert {e.query, e.top_weight, e.top_contribution} <= set(rows)
    assert f"{len(rows)} of {e.num_pieces} keys shown" in " ".join(out.split())
    table_rows = [line for line in out.splitlines() if re.match(r"^ *\d+   \S", line)]
    assert len(table_rows) == 2 * len(rows)  # the scores table and the contributions table
    assert {int(line.split()[0]) for line in table_rows} == set(rows)


def test_explain_on_a_tiny_model(tiny_bert: TinyFactory) -> None:
    """Other shapes: d = 32, h = 4, d_k = 8 (scale 1/√8) in a random 2-layer BERT."""
    from attnviz.pipeline import compute

    tiny = prepare(PT_SENTENCE, model=str(tiny_bert()))
    e = explain(tiny, layer=1, head=-1, query=5, causal=True)
    assert (e.hidden_size, e.num_heads, e.head_size, e.head) == (32, 4, 8, 3)
    expected = compute(tiny, causal=True)[1, 3, 5]  # (T,)
    np.testing.assert_allclose(e.weights, expected, atol=1e-6)
    out = render(e, "pt")
    assert "d_k = d / h = 32 / 4 = 8" in out and "1/√8 = 0.3536" in out
    assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_bar_grows_in_eighths() -> None:
    assert bar(0.0) == " " * 8
    assert bar(1.0) == "█" * 8
    assert bar(0.5) == "████    "
    assert bar(1 / 64) == "▏       "
    assert all(cell_len(bar(f / 100)) == 8 for f in range(101))

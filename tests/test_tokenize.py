"""Tokens and words: labels from the original text, word groups, the length limit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from attnviz.errors import BadInput
from attnviz.tokenize import load_tokenizer, tokenize
from tests.conftest import PT_SENTENCE, SENTENCES


@pytest.fixture(scope="module")
def tokenizer(embedded_folder: Path):
    return load_tokenizer(embedded_folder)


def test_labels_come_from_the_original_text(tokenizer) -> None:
    pieces = tokenize(tokenizer, PT_SENTENCE, max_positions=512)
    assert pieces.tokens[:4] == ["[CLS]", "joao", "pens", "##ou"]
    assert pieces.labels[:5] == ["[CLS]", "João", "pens", "##ou", ":"]
    assert pieces.labels[-1] == "[SEP]"


def test_words_group_pieces_and_split_punctuation(tokenizer) -> None:
    pieces = tokenize(tokenizer, PT_SENTENCE, max_positions=512)
    words = pieces.words()
    labels = [w.label for w in words]
    assert labels[:6] == ["[CLS]", "João", "pensou", ":", "O", "trem"]
    assert labels[-2:] == [".", "[SEP]"]
    assert words[2].pieces == [2, 3]  # pens ##ou
    assert sorted(i for w in words for i in w.pieces) == list(range(len(pieces)))


def test_emoji_is_labelled_by_its_text_not_unk(tokenizer) -> None:
    pieces = tokenize(tokenizer, "ok 👍🏽 ok", max_positions=512)
    assert pieces.tokens[2] == "[UNK]" and pieces.labels[2] == "👍🏽"


@pytest.mark.parametrize("sentence", SENTENCES)
def test_ids_equal_transformers_tokenizer(
    tokenizer,
    embedded_folder: Path,
    sentence: str,
) -> None:
    reference = AutoTokenizer.from_pretrained(str(embedded_folder))
    expected = reference(sentence, truncation=False, padding=False)["input_ids"]
    assert tokenize(tokenizer, sentence, max_positions=512).ids == expected


def test_never_pads_and_ignores_the_tokenizers_own_128_limit(tokenizer) -> None:
    short = tokenize(tokenizer, "train", max_positions=512)
    assert len(short) == 3 and 0 not in short.ids  # the file asks for padding to 128
    long = tokenize(tokenizer, "train " * 200, max_positions=512)
    assert len(long) == 202  # the file asks for truncation at 128


def test_too_long_text_names_the_limit_and_truncate_drops_the_rest(tokenizer) -> None:
    text = "train " * 600
    with pytest.raises(
        BadInput, match="602 pieces long but the model takes at most 512.*--truncate"
    ):
        tokenize(tokenizer, text, max_positions=512)
    cut = tokenize(tokenizer, text, max_positions=512, truncate=True)
    assert len(cut) == 512 and cut.dropped == 90 and cut.tokens[-1] == "[SEP]"
    assert len(tokenize(tokenizer, text, max_positions=512, truncate=True)) == 512  # no state kept
    with pytest.raises(BadInput):
        tokenize(tokenizer, text, max_positions=512)


def test_pair_marks_second_sentence_with_token_types(tokenizer) -> None:
    pieces = tokenize(tokenizer, "O banco.", pair="Ele negou.", max_positions=512)
    assert pieces.tokens.count("[SEP]") == 2
    assert pieces.type_ids[-1] == 1 and pieces.type_ids[0] == 0
    words = [w.label for w in pieces.words()]
    assert words == ["[CLS]", "O", "banco", ".", "[SEP]", "Ele", "negou", ".", "[SEP]"]


def test_model_without_tokenizer_json_falls_back_to_vocab(
    embedded_folder: Path, tmp_path: Path
) -> None:
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        shutil.copy(embedded_folder / name, tmp_path / name)
    fallback = load_tokenizer(tmp_path)
    original = load_tokenizer(embedded_folder)
    for sentence in SENTENCES:
        a = tokenize(fallback, sentence, max_positions=512)
        b = tokenize(original, sentence, max_positions=512)
        assert a.ids == b.ids and a.labels == b.labels

"""Tokens and words: labels from the original text, word groups, the length limit."""

from __future__ import annotations

import shutil
from itertools import pairwise
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from attnviz.errors import BadInput
from attnviz.text.tokenize import load_tokenizer, tokenize
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
        BadInput, match="602 pieces long but the model takes at most 512.*truncate=True"
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


# --- byte-level BPE (RoBERTa) and sentencepiece (XLM-RoBERTa, ALBERT) tokenizers -------------

MARKS = ("Ġ", "▁")


def _pieces(tokens: list[str], spans: list[tuple[int, int]], words: list[int | None], text: str):
    from attnviz.text.pieces import Pieces

    return Pieces(
        text=text,
        pair=None,
        tokens=tokens,
        ids=list(range(len(tokens))),
        type_ids=[0] * len(tokens),
        offsets=spans,
        word_ids=words,
        sequence_ids=[None if w is None else 0 for w in words],
    )


def test_word_start_marks_are_dropped_and_continuations_get_hashes() -> None:
    """One convention for all tokenizers: a bare start, `##` on pieces that continue a word."""
    text = "João  trem 👍"
    pieces = _pieces(
        # sentencepiece: a lone ▁, a span that holds the space; byte-level: a lone Ġ with an
        # empty span, then two byte pieces of one emoji that share its span
        ["<s>", "▁", "J", "o", "ão", "▁t", "rem", "Ġ", "ðŁ", "ĳį", "</s>"],
        [
            (0, 0),
            (0, 1),
            (0, 1),
            (1, 2),
            (2, 4),
            (5, 7),
            (7, 10),
            (11, 11),
            (11, 12),
            (11, 12),
            (0, 0),
        ],
        [None, 0, 0, 0, 0, 1, 1, 2, 2, 2, None],
        text,
    )
    assert pieces.labels == [
        "<s>",
        "▁",
        "J",
        "##o",
        "##ão",
        "t",
        "##rem",
        "▁",
        "👍",
        "##👍",
        "</s>",
    ]
    assert [w.label for w in pieces.words()] == ["<s>", "João", "trem", "👍", "</s>"]


@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "albert"])
@pytest.mark.parametrize("sentence", SENTENCES)
def test_bpe_and_sentencepiece_labels_are_cut_from_the_original_text(
    tiny_model, family: str, sentence: str
) -> None:
    folder = tiny_model(family)
    pieces = tokenize(load_tokenizer(folder), sentence, max_positions=512)
    reference = AutoTokenizer.from_pretrained(str(folder))
    assert pieces.ids == reference(sentence)["input_ids"]
    for i, (token, label) in enumerate(zip(pieces.tokens, pieces.labels, strict=True)):
        if pieces.sequence_ids[i] is None:
            assert label == token  # <s>, </s>, [CLS], [SEP]
        elif label != "▁":  # not a lone word-start mark
            start, end = pieces.offsets[i]
            assert label.removeprefix("##") == sentence[start:end].strip()
            assert not label.startswith(MARKS)
    for word in pieces.words():  # a word's first text-bearing piece is bare, the rest have ##
        texted = [i for i in word.pieces if pieces.labels[i] != "▁"]
        if not texted or pieces.sequence_ids[word.pieces[0]] is None:
            continue
        labels = [pieces.labels[i] for i in texted]
        assert not labels[0].startswith("##")
        assert all(label.startswith("##") for label in labels[1:])
        spans = [pieces.offsets[i] for i in texted]
        if all(a[1] <= b[0] for a, b in pairwise(spans)):  # no character split over bytes
            assert "".join(label.removeprefix("##") for label in labels) == word.label
    words = "".join(w.label for w in pieces.words() if pieces.sequence_ids[w.pieces[0]] == 0)
    assert words == "".join(sentence.split())  # every character, accents and case kept


def test_roberta_words_split_punctuation_and_keep_accents(tiny_model) -> None:
    pieces = tokenize(
        load_tokenizer(tiny_model("roberta")), "O banco negou o empréstimo.", max_positions=512
    )
    words = [w.label for w in pieces.words()]
    assert words == ["<s>", "O", "banco", "negou", "o", "empréstimo", ".", "</s>"]


def test_albert_shows_original_case_though_it_lowercases(tiny_model) -> None:
    pieces = tokenize(load_tokenizer(tiny_model("albert")), PT_SENTENCE, max_positions=512)
    assert all(token == token.lower() for token in pieces.tokens[1:-1])  # a lowercase vocabulary
    assert pieces.labels[1].startswith("J") and pieces.words()[1].label == "João"


def test_roberta_pair_has_two_separators_and_labels_from_each_text(tiny_model) -> None:
    pieces = tokenize(
        load_tokenizer(tiny_model("roberta")), "O banco.", pair="Ele negou.", max_positions=512
    )
    words = [w.label for w in pieces.words()]
    assert words == ["<s>", "O", "banco", ".", "</s>", "</s>", "Ele", "negou", ".", "</s>"]
    assert set(pieces.type_ids) == {0}  # RoBERTa has one token type


def test_folder_without_any_tokenizer_file_is_refused(tmp_path: Path) -> None:
    from attnviz.errors import AttnvizError

    with pytest.raises(
        AttnvizError,
        match=r"no tokenizer.json or vocab.txt \(nor vocab.json or a sentencepiece model\)",
    ):
        load_tokenizer(tmp_path)

"""What the model is (casing, accents, vocabulary, languages) and the note on a poor fit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.text.vocabulary import (
    OTHER_MODELS,
    POOR_FIT_PIECES_PER_WORD,
    describe_tokenizer,
    model_languages,
    vocabulary_fit,
)
from tests.conftest import PT_SENTENCE, TinyFactory

EN = "John thought: the train was full, but he found a free seat."


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


def test_the_default_model_says_it_is_english_and_uncased(embedded_folder: Path) -> None:
    tokenizer = describe_tokenizer(embedded_folder)
    assert (tokenizer.kind, tokenizer.size) == ("WordPiece", 30522)
    assert tokenizer.normalisation == "lowercases, strips accents"
    assert model_languages(embedded_folder) == ("en",)
    model = attnviz.prepare(EN).model
    assert model.languages == ("en",) and model.tokenizer == tokenizer
    assert "language en" in model.description and "lowercases" in model.description
    code, out, _ = cli("info")
    assert code == 0
    lines = {line.split(None, 1)[0]: line for line in out.splitlines() if line.strip()}
    assert "en (model card)" in lines["language"]
    assert "lowercases, strips accents" in lines["text"]
    assert "WordPiece, 30,522 pieces" in lines["tokenizer"]


def test_languages_come_from_the_model_card_or_are_not_stated(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_bert(), folder)
    assert model_languages(folder) is None
    code, out, _ = cli("info", "--model", str(folder))
    assert code == 0 and "not stated" in out
    for card, expected in (
        ("---\nlanguage:\n- pt\n- en\nlicense: mit\n---\n# card", ("pt", "en")),
        ("---\nlicense: mit\nlanguage: [pt, 'es']\n---\n", ("pt", "es")),
        ("---\nlanguage: pt\n---\n", ("pt",)),
        ("# a card without front matter\nlanguage: pt\n", None),
    ):
        (folder / "README.md").write_text(card, encoding="utf-8")
        assert model_languages(folder) == expected, card
    (folder / "README.md").write_text("---\nlanguage: pt\n---\n", encoding="utf-8")
    code, out, _ = cli("info", "--model", str(folder))
    assert "pt (model card)" in out


@pytest.mark.parametrize("family", ["roberta", "albert"])
def test_other_tokenizers_are_described(tiny_model: TinyFactory, family: str) -> None:
    tokenizer = describe_tokenizer(tiny_model(family))
    if family == "roberta":
        assert tokenizer.kind == "byte-level BPE"
    else:
        assert tokenizer.kind.startswith("SentencePiece")
        assert tokenizer.lowercase is True  # the tiny ALBERT's normalizer lowercases


def test_fit_counts_pieces_per_word_against_the_tokens() -> None:
    for text in (EN, PT_SENTENCE):
        pieces = attnviz.prepare(text).pieces
        fit = vocabulary_fit(pieces)
        real = [w for w in pieces.words() if pieces.sequence_ids[w.pieces[0]] is not None]
        words = [w for w in real if any(ch.isalnum() for ch in w.label)]
        assert fit.words == len(words)
        assert fit.pieces == sum(len(w.pieces) for w in words)
    english = vocabulary_fit(attnviz.prepare(EN).pieces)
    portuguese = vocabulary_fit(attnviz.prepare(PT_SENTENCE).pieces)
    assert not english.poor and english.note("m") is None
    assert portuguese.pieces_per_word > POOR_FIT_PIECES_PER_WORD and portuguese.poor
    unknown = vocabulary_fit(attnviz.prepare("the bank 銀 refused").pieces)
    assert unknown.unknown == ("銀",) and unknown.poor


def test_a_poor_fit_gets_one_note_on_stderr_and_json_stays_clean() -> None:
    code, out, err = cli("show", PT_SENTENCE, "--json")
    assert code == 0
    json.loads(out)  # stdout is only the JSON
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "1.9 pieces per word" in notes[0] and "(model language: en)" in notes[0]
    for name in OTHER_MODELS:
        assert name in notes[0]
    assert "for Portuguese --model gemma-3-270m (installed, multilingual)" in notes[0]
    code, out, err = cli("find", PT_SENTENCE, "--from", "ele", "--to", "joao", "--json", "-q")
    assert code == 0 and err == ""
    json.loads(out)
    code, _, err = cli("show", EN, "--json")
    assert code == 0 and err == ""


@pytest.mark.slow  # a subprocess, for a real stdin
def test_a_too_long_text_from_stdin_says_where_it_came_from() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "attnviz", "show"],
        input="word " * 600,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "read from standard input" in result.stderr
    assert '"TEXT"' in result.stderr and "</dev/null" in result.stderr


def test_a_card_listing_thousands_of_languages_is_one_short_line() -> None:
    from attnviz.text.vocabulary import language_list

    assert language_list(("pt", "en")) == "pt, en"
    many = language_list(tuple(f"l{i}" for i in range(5000)))
    assert many.startswith("l0, l1,") and many.endswith("… (5,000 languages)")
    assert len(many) < 120


def test_symbols_the_vocabulary_lacks_are_not_a_language_and_counts_read_as_english() -> None:
    symbols = vocabulary_fit(attnviz.prepare("The shades ░▒▓█ carry the values.").pieces)
    assert symbols.unknown == () and not symbols.poor
    one = vocabulary_fit(attnviz.prepare("Pneumonoultramicroscopicsilicovolcanoconiosis").pieces)
    note = one.note("m")
    assert note is not None and " for 1 word)" in note and "words)" not in note

"""`attnviz explain` through the CLI: choosing the query, languages, and bad input."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from tests.conftest import PT_SENTENCE

runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": "80", **(env or {})})


def test_explain_a_word_in_english_fits_80_columns() -> None:
    result = run("explain", PT_SENTENCE, "--token", "TREM", "--lang", "en")
    assert result.exit_code == 0, result.stderr
    assert "d_k = d / h = 384 / 12 = 32" in result.stdout
    assert "1/√32 = 0.1768" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_explain_language_follows_lang() -> None:
    portuguese = run("explain", PT_SENTENCE, "--index", "6", env={"LANG": "pt_BR.UTF-8"})
    english = run("explain", PT_SENTENCE, "--index", "6", env={"LANG": "C.UTF-8"})
    assert portuguese.exit_code == 0 and english.exit_code == 0
    assert "Máscara" in portuguese.stdout and "Máscara" not in english.stdout


def test_portuguese_lesson_says_consulta_chave_valor_not_query_key_value() -> None:
    """The Portuguese lesson uses the labels' words (consulta, chave, valor, pontuação); the
    English term appears once, in parentheses, where each word is first used."""
    result = run("explain", PT_SENTENCE, "--token", "ele", "--lang", "pt", "--quiet")
    assert result.exit_code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    for english in (" query", " queries", " key ", " keys", " value ", " values", " score"):
        assert english not in flat, english
    glosses = ("consulta (query)", "chave (key)", "valores (values)")
    for gloss in glosses:
        assert flat.count(gloss) == 1, gloss
        word = gloss.split()[0][:5]  # the first mention of consulta, chave, valor carries it
        assert flat.lower().index(word) == flat.index(gloss), gloss
    rest = flat
    for gloss in glosses:
        rest = rest.replace(gloss, "")
    assert not re.search(r"\b(quer(y|ies)|keys?|values?|scores?)\b", rest, re.IGNORECASE)
    assert "Pontuações brutas q·kⱼ" in flat and "A consulta pergunta, cada chave" in flat


def test_explain_causal_mask_hides_later_keys() -> None:
    result = run("explain", PT_SENTENCE, "--token", "ele", "--mask", "causal", "--lang", "en")
    assert result.exit_code == 0, result.stderr
    assert "causal" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token", "avião"], "avião"),
        (["--index", "99"], "99"),
        (["--token", "ele", "--index", "3"], "pass --token WORD or --index N"),
        ([], "pass --token WORD or --index N"),
        (["--token", "ele#5"], "ele#1"),
        (["--token", "ele", "--head", "12"], "head 12 is out of range"),
        (["--token", "ele", "--lang", "fr"], "Invalid value for '--lang'"),
    ],
)
def test_explain_bad_input(args: list[str], message: str) -> None:
    result = run("explain", PT_SENTENCE, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr

"""`ablate`'s words and the ATTNVIZ_* settings from a stranger (issue 34): a word longer
than any piece of a vocabulary is refused before the tokenizer sees it, and a setting of
digits int() refuses (`²`, 5,000 of them) is the setting's own line, not an unexpected
ValueError."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.limits import ABLATE_WORD_CHARS, ATTENTION_ENV, attention_budget

runner = CliRunner()
PROMPT = "Mary met John, and he gave the bag to"


@pytest.mark.parametrize("param", ["target", "foil"])
def test_a_word_longer_than_any_piece_is_refused_before_the_model_is_read(param: str) -> None:
    words = {"target": "Mary", "foil": "John", param: "x" * 10_000_000}
    with pytest.raises(BadInput, match=f"is 10,000,000 characters.*at most {ABLATE_WORD_CHARS:,}"):
        attnviz.ablate(PROMPT, model="no/such/model/folder", **words)


def test_a_word_at_the_bound_goes_on_to_the_model() -> None:
    with pytest.raises(attnviz.AttnvizError) as error:
        attnviz.ablate(PROMPT, target="x" * ABLATE_WORD_CHARS, foil="John",
                       model="no/such/model/folder")  # fmt: skip
    assert "characters" not in str(error.value)  # refused for the model, not for the word


@pytest.mark.parametrize(
    "value",
    ["²", "٣", "9" * 5000, "-5", "1e3", "\x1b[31m"],
    ids=["superscript", "arabic digit", "5000 digits", "negative", "float", "escape"],
)
def test_attention_mb_that_is_not_a_plain_number_is_its_own_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ATTENTION_ENV, value)
    with pytest.raises(BadInput, match=f"^{ATTENTION_ENV}=.* is not a number of megabytes"):
        attention_budget()


def test_attention_mb_of_digits_int_refuses_is_one_line_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = runner.invoke(app, ["tokens", "a cat"], env={ATTENTION_ENV: "²"})
    assert result.exit_code != 0
    assert result.stderr.startswith(f"Error: {ATTENTION_ENV}='²' is not a number of megabytes")
    assert "unexpected" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_attention_mb_in_range_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ATTENTION_ENV, " 1024 ")
    assert attention_budget() == 1024 * 2**20

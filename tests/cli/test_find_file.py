"""`attnviz find --file`: a head's role over labelled examples, through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

runner = CliRunner()
SETS = Path(__file__).resolve().parents[2] / "sample_sentences"


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "100"})


@pytest.fixture
def small_set(tmp_path: Path) -> Path:
    lines = (SETS / "pronouns-en.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(lines[:4] + lines[50:54]) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_json_has_the_issue_s_keys_and_heads_ranked(small_set: Path) -> None:
    result = run("find", "--file", str(small_set), "--json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert set(record) == {"model", "examples", "units", "excluded", "heads", "baselines",
                           "held_out", "note"}  # fmt: skip
    assert record["examples"] == 8 and len(record["heads"]) == 6 * 12
    assert set(record["heads"][0]) == {"layer", "head", "accuracy", "correct", "total", "low",
                                       "high", "mean_weight"}  # fmt: skip
    assert set(record["baselines"]) == {"nearest", "first", "random"}
    assert {"layer", "head", "accuracy"} <= set(record["held_out"])
    accuracies = [h["accuracy"] for h in record["heads"]]
    assert accuracies == sorted(accuracies, reverse=True)
    assert all(h["low"] <= h["accuracy"] <= h["high"] for h in record["heads"])


@pytest.mark.slow
def test_table_shows_baselines_and_held_out_and_out_draws_a_heatmap(
    small_set: Path, tmp_path: Path
) -> None:
    result = run("find", "--file", str(small_set), "--top", "3")
    assert result.exit_code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "Baselines on the same examples: nearest" in flat
    assert "held out" in flat and "picked as the best on these same examples" in flat
    out = tmp_path / "roles.png"
    drawn = run("find", "--file", str(small_set), "--out", str(out))
    assert drawn.exit_code == 0, drawn.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_problem_is_one_line_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join([
            '{"text": "Ann met Bob and he left", "from": "he", "to": "Bob"}',
            "{oops",
            '{"text": "Ann met Bob and he left", "from": "she", "to": "Bob"}',
            '{"text": "Ann met Ann and he left", "from": "he", "to": "Ann"}',
            '{"text": "Ann met Bob", "from": "Bob", "to": "Ann", "candidates": ["Ann", "Tom"]}',
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    result = run("find", "--file", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "Error: bad.jsonl: line 2: not JSON (Expecting property name enclosed in double "
        "quotes, column 2)",
        "Error: bad.jsonl: line 3: from 'she' is not a word of the text",
        "Error: bad.jsonl: line 4: to 'Ann' is ambiguous: the text has it 2 times; write "
        "Ann#1..Ann#2",
        "Error: bad.jsonl: line 5: candidate 'Tom' is not a word of the text",
    ]
    assert "Traceback" not in result.output


def test_a_tsv_without_its_header_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("Ann met Bob and he left\the\tBob\n", encoding="utf-8")
    result = run("find", "--file", str(path))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "Error: bad.tsv: line 1: a TSV file starts with the header "
        "text<TAB>from<TAB>to<TAB>candidates"
    ]


def test_file_refuses_a_text_and_words_and_find_needs_one_or_the_other(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text('{"text": "Ann met Bob", "from": "Bob", "to": "Ann"}\n', encoding="utf-8")
    both = run("find", "Ann met Bob", "--file", str(path), "--from", "Bob")
    assert both.exit_code == 2
    assert both.stderr.strip() == (
        "Error: --file holds the texts and the words: drop TEXT and --from, or drop --file"
    )
    neither = run("find", "Ann met Bob")
    assert neither.exit_code == 2
    assert "find needs --from WORD and --to WORD (or --file FILE" in neither.stderr
    missing = run("find", "--file", str(tmp_path / "none.jsonl"))
    assert missing.exit_code == 2 and "no such file" in missing.stderr


@pytest.mark.slow
def test_find_on_one_sentence_says_one_sentence_names_no_role() -> None:
    result = run("find", "Anna lent the book to Tom, and he returned it.", "--from", "he",
                 "--to", "Anna", "--top", "2")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "One sentence names no role" in flat and "find --file" in flat


@pytest.mark.slow
def test_json_of_one_example_is_valid_json_with_no_held_out_score(tmp_path: Path) -> None:
    # One example has no halves to hold out: the score is not a number, written null
    # (JSON has no NaN; `jq` and strict readers refuse a record holding one).
    line = (SETS / "pronouns-en.jsonl").read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "one.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    result = run("find", "--file", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert "NaN" not in result.stdout
    record = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(name))
    assert record["examples"] == 1 and record["held_out"]["accuracy"] is None


def test_an_example_past_the_model_s_length_names_its_line_and_a_fix_find_file_takes(
    tmp_path: Path,
) -> None:
    # find --file takes no --truncate (the words may be anywhere in the example): the refusal
    # names the example's line in the file and says to shorten it, nothing it would refuse.
    good = (SETS / "pronouns-en.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    long = " ".join(["he said that John was there"] * 90) + " he met John."
    path = tmp_path / "long.jsonl"
    lines = [*good, "", json.dumps({"text": long, "from": "he", "to": "John"})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("find", "--file", str(path))
    assert result.exit_code != 0
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "line 4 " in message and "shorten it" in message, message
    assert "--truncate" not in message

"""`find --file` reads a stranger's labelled file (issue 34): every hostile file ends in the
examples or in one line a problem, in bounded time, never an unexpected error.

A JSON number of 5,000 digits and nesting past Python's parser, JSON's own line separators
inside a string (U+2028, U+0085, a form feed), `#²` and `#` with thousands of digits, a FIFO,
/dev/zero, a folder, a sparse file of gigabytes, a name too long for the system, a BOM with
CRLF line ends, NUL bytes, invalid UTF-8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.limits import ROLES_FILE_BYTES, ROLES_LINES
from attnviz.roles import locate, read_examples
from tests.safety.test_hostile_model_folders import HOSTILE, within

GOOD = {"text": "John thought the train was full, but he found a seat.", "from": "he",
        "to": "John", "candidates": ["John", "train", "seat"]}  # fmt: skip
runner = CliRunner()


def _write(path: Path, *records: object, raw: str = "") -> Path:
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n" + raw, encoding="utf-8", newline="")
    return path


def test_a_number_of_thousands_of_digits_is_a_problem_of_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", GOOD, raw='{"text": ' + "9" * 5000 + "}\n")
    examples, problems, _ = read_examples(path)
    assert len(examples) == 1
    assert len(problems) == 1 and problems[0].startswith("line 2: not JSON")


def test_json_nested_past_the_parser_is_a_problem_of_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", GOOD, raw="[" * 100_000 + "\n")
    examples, problems, _ = read_examples(path)
    assert len(examples) == 1 and problems == [
        "line 2: nested too deeply to read; an example is one object"
    ]


@pytest.mark.parametrize(
    "separator", ["\u2028", "\u2029", "\x85", "\x0c", "\x1e"], ids=["LS", "PS", "NEL", "FF", "RS"]
)
def test_a_line_separator_inside_a_json_string_does_not_split_the_line(
    tmp_path: Path, separator: str
) -> None:
    """JSON allows these unescaped in a string; str.splitlines splits at them, and every
    line after would be numbered wrong."""
    text = f"John thought{separator} the train was full, but he found a seat."
    path = _write(tmp_path / "x.jsonl", {**GOOD, "text": text}, {**GOOD, "from": 3})
    examples, problems, _ = read_examples(path)
    assert [e.text for e in examples] == [text]
    assert problems == ["line 2: 'from' must be a non-empty string"]  # as an editor numbers it


def test_a_bom_and_crlf_line_ends_read_as_the_same_examples(tmp_path: Path) -> None:
    plain = _write(tmp_path / "plain.jsonl", GOOD, GOOD)
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\r\n"))
    tsv = tmp_path / "x.tsv"
    tsv.write_bytes(
        b"\xef\xbb\xbftext\tfrom\tto\tcandidates\r\n"
        + f"{GOOD['text']}\the\tJohn\tJohn,train,seat\r\n".encode()
    )
    assert read_examples(crlf)[:2] == read_examples(plain)[:2]
    (row,), problems, _ = read_examples(tsv)
    first = read_examples(plain)[0][0]
    assert problems == [] and (row.text, row.source, row.target, row.candidates) == (
        first.text, first.source, first.target, first.candidates)  # fmt: skip


@pytest.mark.parametrize(
    "word",
    ["he#²", "he#" + "9" * 5000, "he#٣", "\x1b[31mhe\u202e", "x" * 1_000_000],
    ids=["superscript", "5000 digits", "arabic digit", "escapes", "a million characters"],
)
def test_a_word_that_cannot_be_found_is_a_line_saying_so(word: str) -> None:
    """`#²` is a digit to str.isdigit that int() refuses; 5,000 digits int() refuses too."""
    labels = ["john", "thought", "he", "found", "he"]
    found = locate(labels, word)
    assert isinstance(found, str) and len(found) < 200, found


def test_a_numbered_word_still_names_its_occurrence() -> None:
    labels = ["john", "thought", "he", "found", "he"]
    assert locate(labels, "he#2") == 4
    assert locate(labels, "he#3") == "'he#3': the text has it 2 times"
    assert "no occurrence" in str(locate(labels, "he#123"))


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_labelled_file_that_is_not_a_plain_file_is_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text("", encoding="utf-8")
    HOSTILE[kind](path)
    with within(10), pytest.raises(BadInput) as error:
        read_examples(path)
    message = str(error.value)
    assert "\n" not in message and "labelled file" in message, message
    assert "model's" not in message and "a the" not in message  # said for this file


def test_a_name_too_long_or_a_loop_of_links_is_one_line(tmp_path: Path) -> None:
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    for path in (tmp_path / ("a" * 5000 + ".jsonl"), loop):
        with pytest.raises(BadInput, match="cannot read"):
            read_examples(path)


def test_nul_bytes_and_invalid_utf8_are_lines_naming_the_problem(tmp_path: Path) -> None:
    nul = tmp_path / "nul.jsonl"
    nul.write_bytes(b'{"text": "John\x00 saw", "from": "he", "to": "John"}\n')
    assert read_examples(nul)[1] == ["line 1: not JSON (Invalid control character at, column 15)"]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"text": "Jo\xe3o"}\n')
    with pytest.raises(BadInput, match="not UTF-8 text .byte 12.: save it as UTF-8"):
        read_examples(latin)


def test_millions_of_blank_lines_are_read_as_no_examples(tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    path.write_text("\n" * 15_000_000, encoding="ascii")
    with within(10):
        examples, problems, _ = read_examples(path)
    assert examples == [] and problems[0].startswith("no examples")


@pytest.mark.parametrize("line", ["x", "// a comment"])
def test_millions_of_lines_are_refused_before_they_are_split(tmp_path: Path, line: str) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text((line + "\n") * 1_500_000, encoding="ascii")  # 3 to 20 MB: under 16 MB
    if path.stat().st_size > ROLES_FILE_BYTES:
        path.write_text((line + "\n") * (ROLES_FILE_BYTES // (len(line) + 1)), encoding="ascii")
    with within(10), pytest.raises(BadInput, match=f"more than {ROLES_LINES:,} lines"):
        read_examples(path)


@pytest.mark.slow
def test_the_command_prints_each_problem_on_a_line_and_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", {**GOOD, "from": "he#²"}, raw='{"a": ' + "9" * 5000 + "}")
    result = runner.invoke(app, ["find", "--file", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "Error: bad.jsonl: line 1: from 'he#²' is not a word of the text"
    assert lines[1].startswith("Error: bad.jsonl: line 2: not JSON")
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # 300 texts tokenized
def test_each_example_s_words_are_keyed_once_not_once_a_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """256 candidates over a 250-word text: the text's keys were made again for each word,
    0.25 s an example, 12 minutes for a 16 MB file before the model ran."""
    import attnviz.roles as roles

    words = [str(n) for n in range(250)]
    record = {"text": " ".join(words), "from": "0", "to": "1", "candidates": words[1:]}
    path = _write(tmp_path / "x.jsonl", *[record] * 300, {**GOOD, "from": "nobody"})
    calls = [0]
    real = roles.match_key

    def counted(text: str) -> str:
        calls[0] += 1
        return real(text)

    monkeypatch.setattr(roles, "match_key", counted)
    with pytest.raises(roles.BadExamples) as error:  # the last line: before the model runs
        roles.head_roles(path)
    assert error.value.problems == ["x.jsonl: line 301: from 'nobody' is not a word of the text"]
    # the text's units once, and each of the 251 words, an example
    assert calls[0] <= 301 * (260 + 260), calls[0]

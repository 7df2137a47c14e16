"""Corpus runs: padded batches, `attnviz stats` and `attnviz rollout` through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz.api import prepare
from attnviz.cli import app
from attnviz.measures.rollout import rollout
from attnviz.measures.stats import StatsAccumulator
from attnviz.pipeline import compute_batches, prepare_corpus
from attnviz.text.pieces import token_kinds
from attnviz.text.samples import sample_sentences
from tests.conftest import SENTENCES

runner = CliRunner()
KEYS = {"layer", "head", "entropy", "cls", "sep", "punct", "self", "prev", "next", "label"}


def run(*args: str, stdin: str | None = None):
    return runner.invoke(app, list(args), input=stdin, env={"COLUMNS": "80"})


def test_padded_batches_equal_one_sentence_at_a_time() -> None:
    corpus = prepare_corpus(SENTENCES)
    seen = set()
    for batch in compute_batches(corpus, batch_size=3, device="cpu"):
        assert batch.lengths == sorted(batch.lengths)  # shortest first, little padding
        for b, i in enumerate(batch.indices):
            T = batch.lengths[b]
            alone = prepare(SENTENCES[i]).analyse(cache=False).attentions  # (L, H, T, T)
            np.testing.assert_allclose(batch.attentions[:, b, :, :T, :T], alone, atol=1e-5)
            assert np.all(batch.attentions[:, b, :, :T, T:] == 0)  # padding keys weigh 0
            seen.add(i)
    assert seen == set(range(len(SENTENCES)))


def test_stats_json_equals_an_unbatched_accumulation() -> None:
    result = run("stats", *SENTENCES, "--json", "--batch-size", "2")
    assert result.exit_code == 0, result.stderr
    records = json.loads(result.stdout)
    assert len(records) == 6 * 12 and all(set(r) == KEYS for r in records)

    reference = StatsAccumulator(6, 12)
    for text in SENTENCES:
        analysis = prepare(text).analyse(cache=False)
        reference.add(analysis.attentions, token_kinds(analysis.pieces))
    for got, expected in zip(records, reference.result(), strict=True):
        assert got["label"] == expected["label"]
        for key in ("entropy", "cls", "sep", "punct", "self", "prev", "next"):
            assert got[key] == pytest.approx(expected[key], abs=1e-5)


def test_stats_finds_the_previous_token_head() -> None:
    """all-MiniLM-L6-v2's layer 0 head 2 puts almost all its weight on the previous token."""
    records = json.loads(run("stats", "--json", "--sort", "prev", "--top", "1").stdout)
    assert (records[0]["layer"], records[0]["head"]) == (0, 2)
    assert records[0]["prev"] > 0.9 and records[0]["label"] == "previous-token"


def test_stats_reads_a_file_and_stdin(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sample_sentences()[:3]) + "\n\n", encoding="utf-8")
    from_file = run("stats", "--file", str(corpus), "--json")
    from_stdin = run("stats", "--file", "-", "--json", stdin=corpus.read_text())
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.stderr
    assert json.loads(from_file.stdout) == json.loads(from_stdin.stdout)


def test_stats_table_fits_80_columns_and_sorts() -> None:
    result = run("stats", "--sort", "entropy", "--top", "5")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "over 6 sentences" in result.stdout


@pytest.mark.slow  # stats over the sample corpus, and an image
def test_stats_figure(tmp_path: Path) -> None:
    out = tmp_path / "heads.png"
    result = run("stats", "--out", str(out), "--top", "1")
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "content", "message"),
    [
        (["--file", "{tmp}/empty.txt"], "\n \n", "has no sentences"),
        (["--file", "{tmp}/missing.txt"], None, "no such file"),
        (["--file", "{tmp}"], None, "it is a folder"),
        (["--file", "{tmp}/latin1.txt"], b"ol\xe1\n", "not valid UTF-8"),
        (["--sort", "size"], None, "Invalid value for '--sort'"),
        (["--top", "0"], None, "Invalid value for '--top'"),
        (["--batch-size", "0"], None, "Invalid value for '--batch-size'"),
        (["--out", "{tmp}/x.npz"], None, "unknown extension"),
        (["--annotate", "--out", "{tmp}/x.png"], None, "--annotate does not apply"),
    ],
)
def test_stats_bad_input(tmp_path: Path, args: list[str], content, message: str) -> None:
    if content is not None:
        name = next(a for a in args if a.startswith("{tmp}/")).split("/", 1)[1]
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run("stats", *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_rollout_json_in_tokens_is_the_rollout_of_the_models_attention() -> None:
    text = SENTENCES[1]
    result = run("rollout", text, "--json", "--units", "tokens", "--upto", "3")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    analysis = prepare(text).analyse(cache=False)
    assert record["tokens"] == analysis.pieces.labels
    expected = rollout(analysis.attentions, 3)
    np.testing.assert_allclose(record["rollout"], expected, atol=1e-6)
    np.testing.assert_allclose(np.sum(record["rollout"], axis=1), 1.0, atol=1e-6)


def test_rollout_lists_what_each_word_draws_from() -> None:
    result = run("rollout", "O trem estava cheio.", "--top", "2")
    assert result.exit_code == 0, result.stderr
    assert "rollout through layer 5" in result.stdout
    assert re.search(r"2 trem +← 0 \[CLS\] 0\.\d\d  6 \[SEP\] 0\.\d\d", result.stdout)
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_rollout_upto_out_of_range() -> None:
    result = run("rollout", "O trem.", "--upto", "6")
    assert result.exit_code == 2
    assert "--upto 6 is out of range" in result.stderr


def test_long_sentences_run_in_smaller_batches() -> None:
    """A batch's attention array stays under the byte budget, whatever --batch-size says."""
    from attnviz.pipeline import BATCH_ATTENTION_BYTES, Corpus, _batches

    corpus = prepare_corpus(SENTENCES)
    long = corpus.pieces[0]
    fake = Corpus(corpus.model, corpus.config, [long] * 10)
    maps = 6 * 12
    per_sentence = maps * len(long) ** 2 * 4
    budget_batches = list(_batches(fake.pieces, 32, maps))
    assert sum(len(b) for b in budget_batches) == 10
    assert all(
        len(b) * per_sentence <= max(BATCH_ATTENTION_BYTES, per_sentence) for b in budget_batches
    )


def test_a_sentence_the_model_cannot_take_is_named() -> None:
    result = run("stats", "Uma frase boa.", "\u200b\u200b")
    assert result.exit_code == 2
    assert "sentence 2" in result.stderr and "nothing the tokenizer keeps" in result.stderr

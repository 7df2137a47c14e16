"""Head statistics on decoders: the first token (the attention sink) in place of [CLS].

A decoder's first query may see only itself, so its row is left out; the rest are
checked against the same means computed directly from `analyse`'s attention.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import analyse, head_stats
from attnviz.errors import BadInput
from attnviz.text.pieces import is_punctuation
from tests.conftest import TinyFactory

SENTENCES = ["The cat sat on the mat.", "A dog ate the bone, and then it slept.", "It rained."]


def _direct(folder: str) -> dict[str, np.ndarray]:
    """Pooled means over every query but each sentence's first: (L, H) per statistic."""
    sums: dict[str, np.ndarray] = {}
    queries = 0
    for text in SENTENCES:
        analysis = analyse(text, model=folder, cache=False)
        A = analysis.attentions.astype(np.float64)  # (L, H, T, T)
        T = A.shape[-1]
        punct = np.array([is_punctuation(label) for label in analysis.pieces.labels])  # (T,)
        rows = A[:, :, 1:]  # (L, H, T-1, T): queries 1..T-1
        q = np.arange(1, T)
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(rows > 0, rows * np.log(rows), 0.0)
        parts = {
            "entropy": -plogp.sum(-1),
            "first": rows[..., 0],
            "punct": rows @ punct.astype(np.float64),
            "self": A[:, :, q, q],
            "prev": A[:, :, q, q - 1],
        }
        for name, values in parts.items():
            sums[name] = sums.get(name, 0) + values.sum(-1)
        queries += T - 1
    return {name: total / queries for name, total in sums.items()}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoder_statistics_are_the_means_over_queries_after_the_first(
    family: str, tiny_decoder: TinyFactory
) -> None:
    folder = str(tiny_decoder(family))
    stats = head_stats(SENTENCES, model=folder, batch_size=2)
    expected = _direct(folder)
    assert stats.decoder
    assert stats.queries == sum(len(analyse(t, model=folder).pieces) - 1 for t in SENTENCES)
    for record in stats.records:
        assert set(record) == {
            "layer",
            "head",
            "entropy",
            "first",
            "punct",
            "self",
            "prev",
            "label",
        }
        for name, grid in expected.items():
            assert record[name] == pytest.approx(grid[record["layer"], record["head"]], abs=1e-5)
    # Llama's tokenizer puts <s> first; GPT-2's adds nothing and attnviz puts the model's
    # start token in front; read as typed (bos=False) the first token is a word in both.
    assert stats.first_token == "<s>"
    typed = head_stats(SENTENCES, model=folder, batch_size=2, bos=False)
    assert typed.first_token is None  # Llama's own <s> is taken off too


def test_a_first_token_head_is_labelled_and_sorted_by_first(tiny_decoder: TinyFactory) -> None:
    stats = head_stats(SENTENCES, model=str(tiny_decoder("llama")))
    ordered = stats.sorted("first")
    assert [r["first"] for r in ordered] == sorted((r["first"] for r in ordered), reverse=True)
    with pytest.raises(BadInput, match="a decoder has no \\[CLS\\]; its first token is column"):
        stats.sorted("cls")


def test_stats_command_on_a_decoder(tiny_decoder: TinyFactory) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    folder = str(tiny_decoder("llama"))
    runner = CliRunner()
    table = runner.invoke(app, ["stats", *SENTENCES, "--model", folder], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.stderr
    flat = " ".join(table.stdout.split())
    assert "first punct self prev label" in flat and "CLS" not in flat and "next" not in flat
    assert "the first token (<s>, which the tokenizer puts first)" in flat
    assert "The first query, which sees only itself, is left out." in flat
    records = json.loads(
        runner.invoke(app, ["stats", *SENTENCES, "--model", folder, "--json"]).stdout
    )
    assert len(records) == 16 and all("first" in r and "cls" not in r for r in records)
    for column, message in [
        ("cls", "a decoder has no [CLS]; its first token is column 'first'"),
        ("next", "a decoder's mask hides the next token; sort by another column"),
    ]:
        refused = runner.invoke(app, ["stats", "x y", "--model", folder, "--sort", column])
        assert refused.exit_code == 2 and "Traceback" not in refused.output
        assert f"cannot sort by '{column}': {message}" in refused.stderr
    refused = runner.invoke(app, ["stats", "x y", "--sort", "first"])
    assert refused.exit_code == 2
    assert "it is a decoder's column; an encoder's is 'cls'" in refused.stderr


def test_one_piece_sentences_on_a_decoder_are_refused(tiny_decoder: TinyFactory) -> None:
    with pytest.raises(BadInput, match="a first token sees only itself"):
        head_stats(["The"], model=str(tiny_decoder("gpt2")), bos=False)
    assert head_stats(["The"], model=str(tiny_decoder("gpt2"))).queries == 1  # <s> The


def test_decoder_records_name_a_sink_head_and_keep_no_cls_sep_next() -> None:
    from attnviz.measures.stats import HeadRecord, decoder_records

    encoder_like = HeadRecord(
        layer=0,
        head=0,
        entropy=0.4,
        cls=0.7,
        sep=0.0,
        punct=0.1,
        self=0.1,
        prev=0.1,
        next=0.0,
        label="[CLS]",
    )
    (record,) = decoder_records([encoder_like], uniform_entropy=2.0)
    assert record["label"] == "first-token" and record["first"] == 0.7
    assert not {"cls", "sep", "next"} & set(record)
    broad = HeadRecord(
        layer=0,
        head=1,
        entropy=1.7,
        cls=0.2,
        sep=0.0,
        punct=0.1,
        self=0.2,
        prev=0.2,
        next=0.0,
        label="mixed",
    )
    assert decoder_records([broad], uniform_entropy=2.0)[0]["label"] == "broad"  # 1.7 >= 0.8·2

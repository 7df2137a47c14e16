"""Head statistics without some pieces (`exclude=`), as the views drop them.

The excluded pieces go as keys and queries, each row left is renormalised over the keys
left, and the statistics are those of the shorter sentence (a decoder's first query left
then sees only itself and is left out). Checked against the same means computed directly
from `analyse`'s attention through the views' own `UnitMap`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import analyse, head_stats
from attnviz.errors import BadInput
from attnviz.measures.select import UnitMap
from attnviz.text.pieces import token_kinds
from tests.conftest import TinyFactory

SENTENCES = ["The cat sat on the mat.", "A dog ate the bone, and then it slept.", "It rained."]


def _direct(folder: str | None, exclude: str, decoder: bool) -> dict[str, np.ndarray]:
    """Pooled means (L, H) per statistic of the rows the views show with `exclude`."""
    sums: dict[str, np.ndarray] = {}
    queries = 0
    for text in SENTENCES:
        analysis = analyse(text, model=folder, cache=False)
        units = UnitMap.checked(analysis.pieces, "tokens", exclude)
        A = units.matrix(analysis.attentions.astype(np.float64))  # (L, H, n, n) renormalised
        kinds = token_kinds(analysis.pieces, first=decoder)
        keep = units.keep()
        n = A.shape[-1]
        q = np.arange(1 if decoder else 0, n)  # a decoder's first query kept sees only itself
        rows = A[:, :, q]  # (L, H, queries, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(rows > 0, rows * np.log(rows), 0.0)
        first = kinds.cls[keep].astype(np.float64)  # (n,): the first piece, if it was kept
        parts = {
            "entropy": -plogp.sum(-1),
            "first" if decoder else "cls": rows @ first,
            "punct": rows @ kinds.punct[keep].astype(np.float64),
            "self": A[:, :, q, q],
            "prev": np.where(q > 0, A[:, :, q, np.maximum(q - 1, 0)], 0.0),
        }
        if not decoder:
            parts["sep"] = rows @ kinds.sep[keep].astype(np.float64)
        for name, values in parts.items():
            sums[name] = sums.get(name, 0) + values.sum(-1)
        queries += len(q)
    return {name: total / queries for name, total in sums.items()}


@pytest.mark.parametrize("exclude", ["first", "punct"])
def test_decoder_statistics_without_excluded_pieces(
    exclude: str, tiny_decoder: TinyFactory
) -> None:
    folder = str(tiny_decoder("llama"))
    stats = head_stats(SENTENCES, model=folder, batch_size=2, exclude=exclude)
    everything = head_stats(SENTENCES, model=folder, batch_size=2)
    expected = _direct(folder, exclude, decoder=True)
    for record in stats.records:
        assert record["excluded"] == [exclude]
        for name, grid in expected.items():
            assert record[name] == pytest.approx(grid[record["layer"], record["head"]], abs=1e-5)
    if exclude == "first":  # the sink is gone: no weight on it, and the rest shares what it had
        assert all(record["first"] == 0.0 for record in stats.records)
        assert max(r["first"] for r in everything.records) > 0.05
        assert stats.queries == everything.queries - len(SENTENCES)
    else:
        assert all(record["punct"] == 0.0 for record in stats.records)
    assert "without" in stats.title and "rows renormalised" in stats.title
    assert stats.sorted("entropy") != everything.sorted("entropy")


@pytest.mark.slow
def test_encoder_statistics_without_special_tokens(embedded_folder: Path) -> None:
    stats = head_stats(SENTENCES, exclude="special")
    expected = _direct(None, "special", decoder=False)
    for record in stats.records:
        assert record["cls"] == 0.0 and record["sep"] == 0.0
        for name, grid in expected.items():
            assert record[name] == pytest.approx(grid[record["layer"], record["head"]], abs=1e-5)


@pytest.mark.slow
def test_exclusion_on_a_long_input_equals_the_whole_array(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=3))
    text = (
        "John thought: the train was full, but he found a free seat near the window, and "
        "he sat there reading until the last station."
    )
    texts = [text, "he found a seat."]
    whole = head_stats(texts, model=folder, exclude=["first", "punct"])
    plain = head_stats(texts, model=folder)
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 3 * 8 * 30 * 30 * 4)  # blocks
    monkeypatch.setattr("attnviz.measures.long.BLOCK", 5)  # several blocks of queries
    blocked = head_stats(texts, model=folder, exclude=["first", "punct"])
    for a, b in zip(plain.records, head_stats(texts, model=folder).records, strict=True):
        for column in ("entropy", "first", "punct", "self", "prev"):
            assert a[column] == pytest.approx(b[column], abs=1e-5)  # type: ignore[literal-required]
    assert blocked.queries == whole.queries
    for a, b in zip(whole.records, blocked.records, strict=True):
        assert a["label"] == b["label"] and b["first"] == 0.0 and b["punct"] == 0.0
        for column in ("entropy", "self", "prev"):
            assert a[column] == pytest.approx(b[column], abs=1e-5)  # type: ignore[literal-required]


def test_excluding_everything_is_refused_in_one_line(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama"))
    with pytest.raises(BadInput, match="leaves nothing to measure"):
        head_stats(["The ."], model=folder, exclude=["first", "punct"], bos=False)
    with pytest.raises(BadInput, match="cannot exclude 'commas'"):
        head_stats(SENTENCES, model=folder, exclude="commas")


@pytest.mark.slow
def test_stats_command_says_what_it_excluded(tiny_decoder: TinyFactory) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    folder = str(tiny_decoder("llama"))
    runner = CliRunner()
    result = runner.invoke(app, ["stats", *SENTENCES, "--model", folder, "--exclude", "sink",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    records = json.loads(result.stdout)
    assert all(r["excluded"] == ["first"] and r["first"] == 0.0 for r in records)
    table = runner.invoke(app, ["stats", *SENTENCES, "--model", folder, "-x", "first"],
                          env={"COLUMNS": "200"})  # fmt: skip
    assert table.exit_code == 0, table.stderr
    assert "without the first token" in " ".join(table.stdout.split())
    refused = runner.invoke(app, ["stats", "x y", "--model", folder, "--exclude", "nothing"])
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert len(refused.stderr.strip().splitlines()) == 1
    assert attnviz.head_stats is head_stats

"""A reviewer's findings on the long-input features, each a test that failed before its fix.

Four were first written as strict xfails (a huge --pool's unbounded block, pooling blocks
of queries that start inside a block of the map, a long row's masked keys, the distance
table at 80 columns) and pass since their fixes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.measures.long import BLOCK, LongReducer, pool_edges
from attnviz.pipeline import compute_blocked
from tests.conftest import TinyFactory
from tests.measures.test_long_equals_whole import _pooled

TEXT = "Alice gave the book to Bob because she had finished reading it."


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from attnviz.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_piece_index_out_of_range_suggests_indices_that_work(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    T = len(attnviz.analyse(TEXT, model=folder, cache=False).pieces.labels)
    code, _, err = _cli("show", TEXT, "--model", folder, "--query", "#99999")
    assert code != 0 and "\n" not in err.strip() and f"{T} pieces" in err
    last = re.search(r"\.\.(#\d+)", err)  # the last index it offers, as the option takes it
    assert last, err
    code, out, err = _cli("show", TEXT, "--model", folder, "--query", last.group(1), "--json")
    assert code == 0, err
    assert json.loads(out)["query_index"] == T - 1


def test_a_negative_piece_index_counts_from_the_end_on_any_text(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    T = len(attnviz.analyse(TEXT, model=folder, cache=False).pieces.labels)
    code, out, err = _cli("show", TEXT, "--model", folder, "--query", "#-1", "--json")
    assert code == 0, err
    code, last, err = _cli("show", TEXT, "--model", folder, "--query", f"#{T - 1}", "--json")
    assert code == 0, err
    assert json.loads(out) == json.loads(last)


@pytest.mark.parametrize(
    ("extra", "named"),
    [(["--exclude", "first"], "--exclude"), (["--measure", "norm"], "--measure")],
)
def test_a_piece_index_refuses_what_its_row_cannot_honour(
    extra: list[str], named: str, tiny_decoder: TinyFactory
) -> None:
    """`--query '#3'` reads the weights over every piece a block at a time: an --exclude or
    a --measure given with it was dropped without a word; it is refused, and the suggestion
    (the query by its word) works."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    code, _, err = _cli("show", TEXT, "--model", folder, "--query", "#3", *extra)
    assert code != 0 and "\n" not in err.strip() and named in err and "--query WORD" in err
    code, _, err = _cli("show", TEXT, "--model", folder, "--query", "she", *extra)
    assert code == 0, err


def test_the_queries_per_block_stay_bounded_whatever_the_pool() -> None:
    for pool in (300, 4_096, 16_384, 1_000_000):
        assert LongReducer(30, 9, 16_384, pool=pool).block <= BLOCK


def test_pooling_works_with_blocks_that_are_not_a_multiple_of_the_pool(
    tiny_decoder: TinyFactory,
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    whole = attnviz.analyse(TEXT, model=folder, cache=False)
    A = whole.attentions.astype(np.float64)  # (L, H, T, T)
    L, H, T, _ = A.shape
    pool = 5
    reducer = LongReducer(L, H, T, pool=pool, causal=True)
    compute_blocked(whole.prepared, reducer, block=4)
    expected = _pooled(A, pool, "mean")  # the share of each query block's attention
    np.testing.assert_allclose(reducer.pooled(), expected, atol=1e-5)


def test_a_long_row_marks_the_keys_a_decoder_cannot_see(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, query="#5")
    row = long.row(-1, 0)
    assert row.masked is not None
    np.testing.assert_array_equal(row.masked, np.array(row.indices) > 5)


@pytest.mark.parametrize(
    "args",
    [
        ["distance", "--layer", "99"],
        ["show", "--pool", "4", "--head", "9"],
        ["show", "--pool", "4", "--layer", "-9"],
        ["heads", "--pool", "4", "--layer", "5"],
        ["show", "--query", "#2", "--layer", "5"],
    ],
)
def test_a_long_view_refuses_a_layer_or_head_before_the_model_runs(
    args: list[str], tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a long input the run takes minutes: a --layer or --head the model lacks was refused
    only after it."""

    def ran(*_: object, **__: object) -> None:
        raise AssertionError("the model ran before the layer and head were checked")

    folder = str(tiny_decoder("llama", num_hidden_layers=2))  # 2 layers, 4 heads
    monkeypatch.setattr("attnviz.pipeline.compute_blocked", ran)
    code, _, err = _cli(args[0], TEXT, "--model", folder, *args[1:])
    assert code != 0 and "\n" not in err.strip() and "out of range" in err, err


@pytest.mark.parametrize("command", ["show", "heads"])
def test_a_text_past_the_whole_bound_is_refused_naming_pool_and_the_pool_works(
    command: str, tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the decoder's bound the refusal named only --truncate (losing the rest of the
    text), though `--pool N` reads it whole; the N it names works."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr("attnviz.model.families.DECODER_TOKENS", 30)  # TEXT is longer
    code, _, err = _cli(command, TEXT, "--model", folder, "--no-cache")
    assert code != 0 and "\n" not in err.strip()
    found = re.search(r"--pool (\d+)", err)
    assert found and "--truncate" in err, err
    assert ("--query WORD" in err) == (command == "show")
    code, out, err = _cli(command, TEXT, "--model", folder, "--no-cache", "--pool", found[1])
    assert code == 0, err
    assert f"blocks of {found[1]} pieces" in " ".join(out.split())


def test_the_model_view_pools_a_text_past_the_whole_bound(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    T = len(attnviz.analyse(TEXT, model=folder, cache=False).pieces.labels)
    monkeypatch.setattr("attnviz.model.families.DECODER_TOKENS", 30)
    code, out, err = _cli("model", TEXT, "--model", folder, "--no-cache")
    assert code == 0, err
    pool = -(-T // 64)
    assert f"blocks of {pool} pieces" in " ".join(out.split()) and f"--pool {pool}" in err


def test_a_piece_index_out_of_range_in_python_names_the_text_not_the_model(
    tiny_decoder: TinyFactory,
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    with pytest.raises(attnviz.BadInput, match=r"the text has \d+ pieces, use 0\.\.\d+ "):
        attnviz.analyse_long(TEXT, model=folder, query=-999)


def test_a_pooled_map_over_the_budget_is_refused_before_the_run_naming_a_pool_that_fits(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--pool 1` on a long text kept L·H·T·T float64 sums (6.7 GB on 1,493 pieces of a
    SmolLM2-shaped decoder): only a page was bounded. Refused first; the pool named works."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    twice = f"{TEXT} {TEXT}"  # past 64 pieces: a map of 64 blocks a side is always kept
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 50_000)
    real = compute_blocked

    def guarded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model ran before the pooled map's size was checked")

    monkeypatch.setattr("attnviz.pipeline.compute_blocked", guarded)
    code, _, err = _cli("show", twice, "--model", folder, "--pool", "1")
    assert code != 0 and "\n" not in err.strip(), err
    found = re.search(r"use --pool (\d+) or more", err)
    assert found, err
    monkeypatch.setattr("attnviz.pipeline.compute_blocked", real)
    code, out, err = _cli("show", twice, "--model", folder, "--pool", found[1])
    assert code == 0, err
    assert f"blocks of {found[1]} pieces" in " ".join(out.split())
    with pytest.raises(attnviz.BadInput, match="pool 1: the pooled map"):
        attnviz.analyse_long(twice, model=folder, pool=1)


def test_the_distance_table_stays_readable_in_80_columns() -> None:
    import io

    from rich.console import Console

    from attnviz.measures.long import LongResult, bin_label, distance_bins

    T, L, H = 702, 2, 4
    bins = distance_bins(T)
    profile = np.random.default_rng(0).random((L, H, len(bins))) / T  # (L, H, bins)
    result = LongResult(
        model="m", T=T, layers=L, heads=H, pool=None, pool_by="mean", pooled=None,
        pool_labels=[], profile=profile.astype(np.float32),
        bin_labels=[bin_label(a, b) for a, b in bins], sink=np.zeros((L, H), np.float32),
    )  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=80).print(result.profile_table())
    assert "…" not in out.getvalue(), out.getvalue()


def test_distance_refuses_a_layer_its_image_would_drop(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    """`distance --layer 1 --out d.png` printed layer 1's table but drew every layer."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    image = tmp_path / "d.png"
    code, _, err = _cli("distance", TEXT, "--model", folder, "--layer", "1", "--out", str(image))
    assert code != 0 and "\n" not in err.strip() and "--layer" in err and "--out" in err
    assert not image.exists()
    code, out, err = _cli("distance", TEXT, "--model", folder, "--layer", "1")
    assert code == 0 and "kind" in out, err


def test_a_pooled_view_marks_the_blocks_a_decoder_cannot_see(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=8)
    edges = pool_edges(long.T, 8)
    hidden = np.array([[k0 > q1 for k0, _ in edges] for _, q1 in edges])  # (n, n)
    for view in (long.view(1, 0), long.view(1)):
        assert view.masked is not None
        np.testing.assert_array_equal(view.masked, hidden)
    grid = long.model_view()
    assert grid.masked is not None


def test_a_piece_index_with_pool_is_refused_as_a_word_is(tiny_decoder: TinyFactory) -> None:
    """`show --query '#3' --pool 4` printed the row and dropped --pool without a word."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    for query in ("#3", "she"):
        code, _, err = _cli("show", TEXT, "--model", folder, "--query", query, "--pool", "4")
        assert code != 0 and "\n" not in err.strip() and "--pool" in err and "--query" in err


def test_show_json_past_the_whole_bound_names_no_pool_it_would_refuse(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr("attnviz.model.families.DECODER_TOKENS", 30)
    code, _, err = _cli("show", TEXT, "--model", folder, "--no-cache", "--json")
    assert code != 0 and "\n" not in err.strip() and "--pool" not in err and "--truncate" in err


def test_a_pool_past_the_text_is_one_block_of_the_whole_text(tiny_decoder: TinyFactory) -> None:
    """A --pool larger than the text was named as it was given ("blocks of 1000000 pieces")."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=1_000_000)
    assert long.pool == long.T and long.pool_labels == [f"0–{long.T - 1}"]
    assert f"blocks of {long.T} pieces" in long.view(0).title
    assert long.pooled is not None and long.pooled.shape[-2:] == (1, 1)

"""Pooled views as data (`show`/`heads`/`model --pool N --json`): each block of queries'
attention shared out over the blocks of keys (a row sums to 1 over the blocks it can see),
the blocks named, masked blocks marked; a --max-tokens past the whole views' bound refused
naming the --pool that reads it."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from attnviz.cli.app import app
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat. The cat sat on the mat."


def _run(*args: str) -> dict:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_pooled_show_json_rows_share_out_the_attention() -> None:
    found = _run("show", TEXT, "--pool", "4", "--layer", "2", "--head", "3", "--json")
    assert (found["layer"], found["head"], found["pool"]) == (2, 3, 4)
    blocks = found["blocks"]
    assert blocks[0] == [0, 3] and blocks[-1][1] == found["pieces"] - 1
    grid = np.array(found["map"])
    assert grid.shape == (len(blocks), len(blocks))
    np.testing.assert_allclose(grid.sum(axis=1), 1.0, atol=1e-5)
    assert found["masked"] is None  # an encoder sees every block


def test_pooled_heads_and_model_json_on_a_decoder_mark_the_masked_blocks(
    tiny_decoder: TinyFactory,
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    heads = _run("heads", TEXT, "--model", folder, "--pool", "3", "--layer", "1", "--json")
    masked = np.array(heads["masked"])
    n = len(heads["blocks"])
    assert masked.shape == (n, n) and masked[0, 1] and not masked[1, 0]  # keys after: hidden
    for record in heads["heads"]:
        grid = np.array(record["map"])
        np.testing.assert_allclose(grid.sum(axis=1), 1.0, atol=1e-5)
        assert np.all(grid[masked] == 0)
    model = _run("model", TEXT, "--model", folder, "--pool", "3", "--json")
    assert [layer["layer"] for layer in model["layers"]] == [0, 1]
    assert model["layers"][1]["heads"][0]["map"] == heads["heads"][0]["map"]


def test_json_on_heads_without_a_pool_is_one_line() -> None:
    result = CliRunner().invoke(app, ["heads", TEXT, "--json"])
    assert result.exit_code != 0
    assert "--json prints a pooled map: add --pool N" in result.stderr


def test_a_max_tokens_past_the_whole_views_names_the_pool_that_reads_it(
    tiny_decoder: TinyFactory, monkeypatch
) -> None:
    monkeypatch.setenv("ATTNVIZ_ATTENTION_MB", "16")  # one layer's whole attention: ~1,000
    folder = str(tiny_decoder("llama", num_hidden_layers=2, max_position_embeddings=4096))
    for command in ("model", "heads", "show"):
        result = CliRunner().invoke(
            app, [command, TEXT, "--model", folder, "--max-tokens", "2000", "--truncate"]
        )
        assert result.exit_code != 0
        line = result.stderr.strip()
        assert "--max-tokens" in line and "--pool 32" in line, (command, line)

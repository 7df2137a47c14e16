"""`head_stats_on_dask`, `head_roles_on_dask` and `--dask` against a real Dask cluster: a
`LocalCluster` of two worker processes on 127.0.0.1. The result equals the single-process run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app

# `make install` installs the [dask] extra, so CI (CI=true) fails instead of skipping without it.
if os.environ.get("CI"):
    import distributed
else:
    distributed = pytest.importorskip("distributed", reason="pip install 'attnviz[dask]'")

SENTENCES = [f"Row {n}: birds sang" + ", and the rain fell" * (n % 3) + "." for n in range(19)]
EXAMPLES = Path(__file__).parents[2] / "sample_sentences" / "pronouns-en.jsonl"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        yield local


@pytest.mark.slow
def test_stats_on_two_workers_equal_the_single_process_run(cluster, tmp_path: Path) -> None:
    whole = attnviz.head_stats(SENTENCES, batch_size=1)
    spread = attnviz.head_stats_on_dask(SENTENCES, cluster.scheduler_address, batch_size=1)
    assert json.dumps(spread.records) == json.dumps(whole.records)
    assert (spread.sentences, spread.queries) == (whole.sentences, whole.queries)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    runner = CliRunner()
    base = ["stats", "--file", str(corpus), "--batch-size", "1", "--json"]
    one = runner.invoke(app, base)
    two = runner.invoke(app, [*base, "--dask", cluster.scheduler_address])
    assert one.exit_code == two.exit_code == 0, two.stderr
    assert two.stdout == one.stdout


@pytest.mark.slow
def test_roles_on_two_workers_equal_the_single_process_run(cluster, tmp_path: Path) -> None:
    examples = tmp_path / "pronouns.jsonl"
    examples.write_text("".join(EXAMPLES.read_text().splitlines(keepends=True)[:10]))
    whole = attnviz.head_roles(examples, batch_size=1)
    spread = attnviz.head_roles_on_dask(examples, cluster.scheduler_address, batch_size=1)
    assert json.dumps(spread.to_dict()) == json.dumps(whole.to_dict())
    assert spread.source == "pronouns.jsonl"


@pytest.mark.slow
def test_a_worker_s_refusal_comes_back_as_one_line(cluster) -> None:
    with pytest.raises(attnviz.BadInput) as raised:
        attnviz.head_stats_on_dask(SENTENCES, cluster.scheduler_address, batch_size=0)
    assert "batch_size" in str(raised.value) and "\n" not in str(raised.value)

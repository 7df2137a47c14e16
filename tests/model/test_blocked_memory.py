"""The views made for length reserve no whole attention: a blocked run of 16,384 pieces
(8 heads: one layer's weights would be 8 GiB) keeps to its blocks under a 3 GiB cap on the
address space, where reserving [1, 8, T, T] up front once failed as "out of memory"."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TinyFactory

ROOT = Path(__file__).resolve().parents[2]

TEXT = " ".join(["the cat sat on the mat."] * 3000)


@pytest.mark.slow  # a subprocess over 16,384 pieces
def test_distance_at_16384_pieces_runs_under_a_3_gib_cap(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    folder = tiny_decoder(
        "llama", num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=8,
        max_position_embeddings=16_384,
    )  # fmt: skip
    cap = 3 * 2**30

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    args = ["distance", TEXT, "--model", str(folder), "--max-tokens", "16384", "--truncate"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "100",
           "ATTNVIZ_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "attnviz", *args], capture_output=True, text=True, env=env,
        preexec_fn=cap_memory, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "16,384 pieces" in result.stdout.replace("\n", " ")

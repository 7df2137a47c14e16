"""Encoder-decoder rows of the benchmark: on a tiny random T5 (the tests' shape: 2 encoder
layers, 3 decoder layers, 4 heads), `attnviz show --target` cold (a fresh process each run),
and in one process the parts: loading transformers' model, the three stacks, and greedy
generation of N tokens (`--generate N`). Medians of RUNS runs.

    python benchmarks/seq2seq.py [RUNS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SOURCE = "The cat sat on the mat."
TARGET = "O gato sentou no tapete."


def _cold(folder: Path, env: dict[str, str], *extra: str) -> float:
    command = [sys.executable, "-m", "attnviz", "show", SOURCE, "--model", str(folder), "-q"]
    start = time.perf_counter()
    subprocess.run(
        [*command, *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env,
    )  # fmt: skip
    return time.perf_counter() - start


def _timed(work) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def measure(folder: Path, runs: int) -> list[tuple[str, float]]:
    """(row, median seconds)."""
    from attnviz.model.seq2seq import generate_greedy, load_seq2seq, run_stacks

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    given = [_cold(folder, env, "--target", TARGET) for _ in range(runs)]
    written = [_cold(folder, env, "--generate", "20") for _ in range(runs)]
    rows = [("show --target, cold process", given), ("show --generate 20, cold process", written)]
    loads = [_timed(lambda: load_seq2seq(folder)) for _ in range(runs)]
    model = load_seq2seq(folder)
    source = list(range(3, 18))  # 15 source pieces
    target = [0, *range(3, 19)]  # 17 target pieces, start token first
    stacks = [_timed(lambda: run_stacks(model, source, target)) for _ in range(runs)]
    writes = [_timed(lambda: generate_greedy(model, source, 100)) for _ in range(runs)]
    rows += [
        ("load transformers' model (in process)", loads),
        ("three stacks, 15 source x 17 target pieces", stacks),
        ("greedy generation, up to 100 tokens", writes),
    ]
    return [(name, statistics.median(times)) for name, times in rows]


if __name__ == "__main__":
    from tests.model.test_encoder_decoder import write_seq2seq

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="attnviz-bench-t5-") as tmp:
        folder = write_seq2seq(Path(tmp) / "tiny-t5", "t5")
        for name, seconds in measure(folder, runs):
            print(f"{name:48} {seconds:7.2f} s")

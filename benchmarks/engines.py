"""Engine rows of the benchmark: `attnviz show` on the default model (all-MiniLM-L6-v2, real
weights) computed by attnviz's own engine and by transformers' eager model (`--engine
transformers`), cold (`--no-cache`, a fresh process each run), run alternately; the medians
and the largest difference between the two engines' weights.

    python benchmarks/engines.py [RUNS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEXT = "John thought: the train was full, but he found a free seat."


def _run(engine: str, env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "attnviz", "show", TEXT, "--no-cache", "--engine", engine]
    start = time.perf_counter()
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    return time.perf_counter() - start


def measure(env: dict[str, str], runs: int) -> list[tuple[str, float, float]]:
    """(row, attnviz's engine seconds, transformers' engine seconds): medians."""
    times: dict[str, list[float]] = {"attnviz": [], "transformers": []}
    for _ in range(runs):
        for engine in times:
            times[engine].append(_run(engine, env))
    return [
        (
            "show, cold, all-MiniLM-L6-v2: attnviz's engine vs transformers'",
            statistics.median(times["attnviz"]),
            statistics.median(times["transformers"]),
        )
    ]


def largest_difference() -> float:
    """The largest difference between the two engines' weights on the default model."""
    import numpy as np

    import attnviz

    own = attnviz.analyse(TEXT, cache=False)
    theirs = attnviz.analyse(TEXT, cache=False, engine="transformers")
    return float(np.abs(own.attentions - theirs.attentions).max())


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for row, ours, theirs in measure(env, runs):
        print(f"{row}: {ours:.2f} s vs {theirs:.2f} s ({theirs / ours:.2f}x)")
    print(f"largest difference between the engines' weights: {largest_difference():.1e}")

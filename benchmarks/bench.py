"""Start-up benchmark: each attnviz command timed side by side with its floor.

Run with `make bench`. Every measurement is the median of several runs, and
each pair (command, reference) is run alternately in the same loop so that a
noisy shared machine slows both alike. Ratios are what matter; seconds vary.

    attnviz --help      vs  python -c "import typer, rich"
    attnviz show        vs  python -c "import torch"      (cold: a fresh process)
    attnviz heads --out vs  python -c "import torch"      (PNG of a 12-head grid)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = sys.executable
ATTNVIZ = [PYTHON, "-m", "attnviz"]
SENTENCE = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."


def _time(command: list[str]) -> float:
    env = {**os.environ, "COLUMNS": "100", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    return time.perf_counter() - start


def side_by_side(command: list[str], reference: list[str], runs: int) -> tuple[float, float]:
    """Medians of `command` and `reference`, run alternately after one warm-up each."""
    _time(command), _time(reference)
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(_time(command))
        theirs.append(_time(reference))
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per command")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        png = str(Path(tmp) / "grid.png")
        cases = [
            ("attnviz --help", [*ATTNVIZ, "--help"], "import typer, rich", 3.0),
            ("attnviz show (cold)", [*ATTNVIZ, "show", SENTENCE], "import torch", 1.3),
            (
                "attnviz heads --out grid.png",
                [*ATTNVIZ, "heads", SENTENCE, "--layer", "3", "--out", png],
                "import torch",
                None,
            ),
        ]
        rows = []
        for name, command, reference, target in cases:
            ours, theirs = side_by_side(command, [PYTHON, "-c", reference], args.runs)
            rows.append((name, ours, reference, theirs, target))

    import torch

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}; median of {args.runs} runs\n"
    )
    print("| command | seconds | reference | seconds | ratio | target |")
    print("|---|---:|---|---:|---:|---|")
    for name, ours, reference, theirs, target in rows:
        ratio = ours / theirs
        verdict = "" if target is None else f"≤ {target}×: {'met' if ratio <= target else 'MISSED'}"
        print(
            f'| {name} | {ours:.2f} | `python -c "{reference}"` | {theirs:.2f} '
            f"| {ratio:.2f}× | {verdict} |"
        )


if __name__ == "__main__":
    main()

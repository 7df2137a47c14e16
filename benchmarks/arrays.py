"""Your own attention: time and peak memory of `from_attentions` (its checks and the copy to
float32) and of `--load` (`load_attentions`, every header checked first), at the shape of
all-MiniLM-L6-v2 (6 layers × 12 heads) and 512 or 1,024 pieces.

Each case runs in a fresh Python process of its own, which reports its wall time and its peak
resident memory (`ru_maxrss`) above what it held before the call (the caller's arrays,
for `from_attentions`, are made before and not counted; a file to load is written by another
process), so one case's memory never counts in another's.
Run with `python benchmarks/arrays.py [--sizes 512,1024]`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import sys
import numpy as np
T, path = int(sys.argv[1]), sys.argv[2]
x = np.empty((6, 12, T, T), dtype=np.float32)
np.random.default_rng(0).random(out=x, dtype=np.float32)
x /= x.sum(axis=-1, keepdims=True)
tokens = np.array(["[CLS]"] + [f"w{i}" for i in range(T - 2)] + ["[SEP]"])
np.savez(path, attentions=x, tokens=tokens)
"""

RUNNER = """
import resource, sys, time
import numpy as np
import attnviz
T, case, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if case == "from":  # the caller's arrays, made in place: they are not counted
    x = np.empty((6, 12, T, T), dtype=np.float32)
    np.random.default_rng(0).random(out=x, dtype=np.float32)
    x /= x.sum(axis=-1, keepdims=True)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(T - 2)] + ["[SEP]"]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
a = attnviz.load_attentions(path) if case == "load" else attnviz.from_attentions(x, tokens)
a.view(-1)
seconds = time.perf_counter() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(seconds, grown * 1024)
"""

CASES = {
    "from_attentions (numpy float32) and the last layer's view": "from",
    "load_attentions (.npz: attentions and tokens) and the last layer's view": "load",
}


def run(size: int, case: str) -> tuple[float, int]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/a.npz"
        if case == "load":  # written by another process, so its memory is not counted
            subprocess.run([sys.executable, "-c", WRITER, str(size), path], check=True, env=env)
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, str(size), case, path],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    seconds, grown = done.stdout.split()
    return float(seconds), int(grown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,1024", help="pieces per input, comma-separated")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    print("| case | pieces | attention | seconds | peak memory added |")
    print("|---|---|---|---|---|")
    for size in sizes:
        megabytes = 6 * 12 * size * size * 4 / 2**20
        for name, case in CASES.items():
            seconds, grown = run(size, case)
            print(
                f"| {name} | {size} | {megabytes:.0f} MB | {seconds:.2f} | {grown / 2**20:.0f} MB |"
            )


if __name__ == "__main__":
    main()

"""Long inputs: time and peak memory of the views made for length on a SmolLM2-135M-shaped
decoder (random weights, benchmarks/decoder.py), at 2,048 and 8,192 pieces.

Each case runs in a fresh Python process of its own, which reports its wall time and its
peak resident memory (`resource.getrusage(RUSAGE_SELF).ru_maxrss`), so one case's memory
never counts in another's. Run alone with `python benchmarks/long.py [--sizes 2048,8192]`;
`make bench` runs it with the other rows (`--only long`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# What each case runs, in a fresh process: `folder`, `text`, `out` and `attnviz` are bound.
CASES = {
    "pooled model view (PNG, page), distance profiles, sink shares": (
        "r = attnviz.analyse_long(text, model=folder, max_tokens=T, truncate=True, pool=POOL)\n"
        "r.model_view().save(out / 'model.png')\n"
        "r.profile_figure().savefig(out / 'profile.png')\n"
        "page = r.html('model')\n"
        "print(f'page {len(page.encode()) / 1e6:.2f} MB')\n"
    ),
    "stats (layer by layer)": (
        "s = attnviz.head_stats([text], model=folder, max_tokens=T, truncate=True)\n"
        "assert len(s.sorted()) == 270\n"
    ),
    "show --query (one row, every layer)": (
        "r = attnviz.analyse_long(text, model=folder, max_tokens=T, truncate=True, query=-1)\n"
    ),
}
# The existing views at 2,048 pieces (one layer, or the model view pooled automatically).
WHOLE_CASES = {
    "show (last layer, head mean, PNG)": (
        "a = attnviz.analyse(text, model=folder, max_tokens=T, truncate=True, cache=False, "
        "layers=[-1])\na.view(-1).save(out / 'show.png')\n"
    ),
    "heads (last layer, PNG)": (
        "a = attnviz.analyse(text, model=folder, max_tokens=T, truncate=True, cache=False, "
        "layers=[-1])\na.heads(-1).save(out / 'heads.png')\n"
    ),
}

# The process releases freed memory as the commands do (attnviz.perf.return_freed_memory).
RUNNER = """
import resource, sys, time
from pathlib import Path
import attnviz
from attnviz.perf import return_freed_memory
return_freed_memory()
folder, T, POOL, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
text = Path(sys.argv[5]).read_text()
start = time.perf_counter()
exec(sys.argv[6])
seconds = time.perf_counter() - start
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def run_case(folder: Path, T: int, code: str, work: Path) -> tuple[float, int, str]:
    """(seconds, peak bytes, what else it printed) of `code` in a fresh process."""
    text = work / "text.txt"
    if not text.exists():
        from benchmarks.decoder import long_text

        text.write_text(long_text(8 * 8192))
    pool = max(1, T // 64)
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(folder), str(T), str(pool), str(work), str(text), code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), **_env()},
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"case failed:\n{code}\n{done.stderr[-2000:]}")
    *said, last = done.stdout.strip().splitlines()
    seconds, peak = last.split()
    return float(seconds), int(peak), " ".join(said)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def measure(sizes: list[int], work: Path, only: str = "") -> list[tuple[str, int, float, int]]:
    from benchmarks.decoder import write_decoder

    folder = work / "smol"
    if not (folder / "config.json").exists():
        write_decoder(folder)
    rows = []
    for T in sizes:
        cases = dict(CASES)
        if T <= 2048:
            cases.update(WHOLE_CASES)
        for name, code in cases.items():
            if only not in name:
                continue
            seconds, peak, said = run_case(folder, T, code, work)
            rows.append((name, T, seconds, peak))
            print(f"{name:62} {T:6,} pieces {seconds:7.1f} s {peak / 2**30:6.2f} GB {said}",
                  flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2048,8192")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    parser.add_argument("--cases", default="", help="only the cases whose name has this word")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure([int(s) for s in args.sizes.split(",")], Path(tmp), args.cases)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()

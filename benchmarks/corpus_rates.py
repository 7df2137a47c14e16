"""bench.py's "stats" and "roles" groups: attnviz over a corpus against its transformers loop.

`stats_rates`: `attnviz stats --file` against benchmarks/stats_reference.py, in sentences
per second with the start-up subtracted: each runs the whole corpus and its first batch,
and the rate is the extra sentences over the extra seconds, so importing torch (and
transformers) and loading the weights do not count. At 1 and 2 threads.

`roles_rows`: `attnviz find --file` on each shipped labelled set against
benchmarks/roles_reference.py, whole runs (the sets are short: start-up is most of a run),
after checking that both give every head the same accuracy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

PYTHON = sys.executable
ATTNVIZ = [PYTHON, "-m", "attnviz"]
HERE = Path(__file__).resolve().parent
STATS_REFERENCE = str(HERE / "stats_reference.py")
ROLES_REFERENCE = str(HERE / "roles_reference.py")
SHIPPED_SETS = ("pronouns-en", "objects-en", "pronouns-pt", "objects-pt")
SideBySide = Callable[[list[str], list[str], int, dict[str, str]], tuple[float, float]]


def stats_rates(
    corpus: Path, env: dict[str, str], runs: int, side_by_side: SideBySide, batch: int = 32
) -> list[tuple[int, float, float]]:
    """(threads, attnviz's sentences/s, the reference's) at 1 and 2 threads."""
    lines = corpus.read_text(encoding="utf-8").splitlines()
    head = corpus.with_name(corpus.stem + "-head.txt")
    head.write_text("\n".join(lines[:batch]) + "\n", encoding="utf-8")
    extra = len(lines) - batch
    rows = []
    for threads in (1, 2):
        ours_all, theirs_all = side_by_side(*_stats_commands(corpus, threads, batch), runs, env)
        ours_head, theirs_head = side_by_side(*_stats_commands(head, threads, batch), runs, env)
        rows.append((threads, extra / (ours_all - ours_head), extra / (theirs_all - theirs_head)))
    return rows


def _stats_commands(path: Path, threads: int, batch: int) -> tuple[list[str], list[str]]:
    batching = ["--threads", str(threads), "--batch-size", str(batch)]
    ours = [*ATTNVIZ, "stats", "--file", str(path), *batching, "--json"]
    return ours, [PYTHON, STATS_REFERENCE, str(path), *batching]


def print_stats_rates(rows: list[tuple[int, float, float]], sentences: int) -> None:
    print(
        f"\n`attnviz stats`, {sentences} sentences of ~100 pieces, batch 32, against "
        "benchmarks/stats_reference.py (transformers, the same statistics); sentences/s with "
        "the start-up subtracted (the whole corpus less its first batch)\n"
    )
    print("| threads | attnviz sentences/s | transformers sentences/s | ratio | target |")
    print("|---:|---:|---:|---:|---|")
    for threads, ours, theirs in rows:
        ratio = ours / theirs
        print(
            f"| {threads} | {ours:.1f} | {theirs:.1f} | {ratio:.2f}× "
            f"| ≥ 1.2×: {'met' if ratio >= 1.2 else 'MISSED'} |"
        )


def roles_rows(
    env: dict[str, str], runs: int, side_by_side: SideBySide, threads: int
) -> list[tuple[str, float, float]]:
    """(set, attnviz find --file seconds, the reference's) for each shipped labelled set,
    each checked first: every head's accuracy the same in both."""
    from attnviz.text.samples import sample_dir

    rows = []
    for name in SHIPPED_SETS:
        ours = [*ATTNVIZ, "find", "--file", f"{name}.jsonl", "--json", "--top", "1000"]
        theirs = [PYTHON, ROLES_REFERENCE, str(sample_dir() / f"{name}.jsonl")]
        theirs += ["--threads", str(threads)]  # find runs on torch's own thread count
        check_accuracies(name, ours, theirs, env)
        rows.append((name, *side_by_side(ours, theirs, runs, env)))
    return rows


def check_accuracies(name: str, ours: list[str], theirs: list[str], env: dict[str, str]) -> None:
    """Stop the benchmark when attnviz and the reference score any head differently."""
    found = json.loads(subprocess.run(ours, check=True, capture_output=True, env=env).stdout)
    reference = json.loads(subprocess.run(theirs, check=True, capture_output=True, env=env).stdout)
    heads = found["heads"]
    assert len(heads) == len(reference) * len(reference[0]), f"{name}: not every head listed"
    for head in heads:
        expected = reference[head["layer"]][head["head"]]
        assert abs(head["accuracy"] - expected) < 1e-12, (
            f"{name}: L{head['layer']} H{head['head']} scores {head['accuracy']} in attnviz, "
            f"{expected} in the transformers loop"
        )


def print_roles_rows(rows: list[tuple[str, float, float]], threads: int) -> None:
    print(
        "\n`attnviz find --file SET` against benchmarks/roles_reference.py (transformers, the "
        f"same accuracies, checked head by head), whole runs, {threads} threads\n"
    )
    print("| shipped set | attnviz s | transformers s | ratio |")
    print("|---|---:|---:|---:|")
    for name, ours, theirs in rows:
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}× |")

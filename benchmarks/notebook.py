"""What a notebook cell costs: the time and size of each result's display, as a kernel asks
for it (`_repr_png_` for a figure, `_repr_html_` for the rest), on the default model and
the README's sentence.

Each time is the median of `--repeat` runs in this process, after the analysis is
computed (the display only, not the attention). Run with `python benchmarks/notebook.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEXT = "John thought: the train was full, but he found a free seat."
CORPUS = ["I saw John and Mary yesterday.", "They were together."]


def _png(figure: object) -> bytes:
    from attnviz.render.inline import figure_png

    return figure_png(figure)  # type: ignore[arg-type]


def _stats_html(layers: int, heads: int) -> Callable[[], str]:
    """Head statistics of a model of `layers` × `heads` (made-up numbers: only the size of
    the table counts here)."""
    from attnviz.measures.stats import HeadRecord, HeadStats

    records = [
        HeadRecord(layer=layer, head=head, entropy=1.0, punct=0.1, self=0.2, prev=0.3,
                   label="mixed", cls=0.2, sep=0.1, next=0.1)
        for layer in range(layers) for head in range(heads)
    ]  # fmt: skip
    return HeadStats(records, "made-up", layers, heads, sentences=1, queries=10)._repr_html_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import attnviz

    a = attnviz.analyse(TEXT)
    explanation = a.explain("he", layer=3, head=7)
    stats = attnviz.head_stats(CORPUS)
    links = a.find("he", "john")
    compared = a.compare("he", layer=3)
    details = attnviz.model_info()
    # A figure: drawn, then its PNG (what the cell does); the rest: the display only.
    cases: dict[str, Callable[[], bytes | str]] = {
        "a.figure('heads', layer=0)  png": lambda: _png(a.figure("heads", layer=0)),
        "a.figure('model')           png": lambda: _png(a.figure("model")),
        "a.view(3, 7).figure()       png": lambda: _png(a.view(3, 7).figure()),
        "a.explain('he', 3, 7)       html": explanation._repr_html_,
        "head_stats(2 sentences)     html": stats._repr_html_,
        "a.find('he', 'john')        html": links._repr_html_,
        "a.compare('he', layer=3)    html": compared._repr_html_,
        "attnviz.model_info()        html": details._repr_html_,
        "stats table, 30 × 9 heads   html": _stats_html(30, 9),
        "stats table, 32 × 32 heads  html": _stats_html(32, 32),
    }
    print(f"{'the cell ends in':36} {'median':>9} {'size':>10}")
    for name, show in cases.items():
        times, size = [], 0
        for _ in range(args.repeat):
            start = time.perf_counter()
            size = len(show())
            times.append(time.perf_counter() - start)
        print(f"{name:36} {statistics.median(times):8.3f}s {size / 1000:8.1f} KB")


if __name__ == "__main__":
    main()

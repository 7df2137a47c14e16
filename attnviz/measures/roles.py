"""A head's role over many labelled sentences, after Clark et al. 2019 ("What Does BERT Look At?").

Each example names a query word (`from`), the word it should attend to (`to`) and the
candidates `to` competes with. A head gets an example right when, in the query's row,
`to` weighs more than every other candidate (a tie is not a hit). Its accuracy is the
share of examples it gets right, with a 95% Wilson interval; beside it, the baselines on
the same examples: `nearest` (the candidate closest before the query, else the first
after it), `first` (the candidate that comes first) and `random` (the expected accuracy of
a uniform pick, the mean of 1 / candidates). A head picked as the best of many on the same
examples it is scored on looks better than it is: `held_out` picks on one half of the
examples and scores on the other, both ways (the halves are the examples at even and at
odd positions: deterministic). Numpy only; the rows come from `attnviz.roles`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz import lexicon
from attnviz.limits import TOP, check_range
from attnviz.measures.drawn import save_image, write_figure
from attnviz.measures.select import exclusion_note
from attnviz.output import ImageStyle

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.render.roles import RolesTable

__all__ = [
    "BASELINES",
    "Example",
    "HeadRole",
    "HeadRoles",
    "RoleScores",
    "baseline_picks",
    "held_out",
    "wilson",
]

BASELINES: tuple[str, ...] = ("nearest", "first", "random")
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


@dataclass(frozen=True)
class Example:
    """One labelled example, its words resolved to positions in the view's units."""

    line: int  # its line in the file (1-based), or its place in the list given
    text: str
    source: int  # the query unit (`from`)
    target: int  # the unit it should attend to (`to`)
    candidates: tuple[int, ...]  # the units `to` competes with, `to` included, in text order


def wilson(correct: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `correct` out of `total` (95% by default); (0, 1) for
    no trials."""
    if total <= 0:
        return 0.0, 1.0
    p = correct / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def baseline_picks(example: Example) -> tuple[bool, bool, float]:
    """Whether `nearest` and `first` pick `to` in this example, and the chance a uniform
    pick does."""
    before = [c for c in example.candidates if c < example.source]
    after = [c for c in example.candidates if c > example.source]
    nearest = max(before) if before else min(after)
    first = min(example.candidates)
    return nearest == example.target, first == example.target, 1 / len(example.candidates)


def score_row(row: np.ndarray, example: Example) -> tuple[np.ndarray, np.ndarray]:
    """Every head's hit and weight on `to` from the query's rows `row` (L, H, N) in units:
    (L, H) bool (`to` above every other candidate) and (L, H) float."""
    others = [c for c in example.candidates if c != example.target]
    weight = row[:, :, example.target]  # (L, H)
    if not others:
        return np.ones(weight.shape, dtype=bool), weight
    rival = row[:, :, others].max(axis=-1)  # (L, H): the strongest other candidate
    return weight > rival, weight


class RoleScores:
    """Every head's hits and weights, example by example, with the baselines' picks.

    `add(example, row)` in any order; the arrays come out in the examples' order."""

    def __init__(self, layers: int, heads: int) -> None:
        self.layers, self.heads = layers, heads
        self._hits: dict[int, np.ndarray] = {}  # example's place -> (L, H) bool
        self._weights: dict[int, np.ndarray] = {}  # example's place -> (L, H) float

    def add(self, place: int, example: Example, row: np.ndarray) -> None:
        """Score example number `place` from its query's rows (L, H, N)."""
        hits, weights = score_row(np.asarray(row, dtype=np.float64), example)
        self._hits[place], self._weights[place] = hits, weights

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(E, L, H) bool hits and (E, L, H) float weights on `to`, in the examples' order."""
        order = sorted(self._hits)
        shape = (0, self.layers, self.heads)
        if not order:
            return np.zeros(shape, dtype=bool), np.zeros(shape)
        return (
            np.stack([self._hits[i] for i in order]),
            np.stack([self._weights[i] for i in order]),
        )


def best_head(hits: np.ndarray) -> tuple[int, int]:
    """The head with the most hits in (E, L, H), ties in layer, head order."""
    counts = hits.sum(axis=0)  # (L, H)
    flat = int(np.argmax(counts.reshape(-1)))  # the first of the largest
    return divmod(flat, counts.shape[1])


def held_out(hits: np.ndarray) -> tuple[float, list[dict[str, Any]]]:
    """The accuracy of picking the best head on one half and scoring it on the other, both
    ways, pooled over every example; and each pick. The halves: even and odd positions."""
    E = hits.shape[0]
    halves = {"even": np.arange(0, E, 2), "odd": np.arange(1, E, 2)}
    if E < 2:
        return float("nan"), []
    picks = []
    right = 0
    for name, other in (("even", "odd"), ("odd", "even")):
        layer, head = best_head(hits[halves[name]])
        scored = hits[halves[other], layer, head]
        right += int(scored.sum())
        picks.append(
            {
                "picked_on": name,
                "layer": layer,
                "head": head,
                "accuracy": float(scored.mean()),
                "total": len(scored),
            }
        )
    return right / E, picks


@dataclass(frozen=True)
class HeadRole:
    """One head's score over the examples."""

    layer: int
    head: int
    accuracy: float  # correct / total
    correct: int
    total: int
    low: float  # the 95% Wilson interval of the accuracy
    high: float
    mean_weight: float  # the mean weight from `from` on `to`

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "head": self.head,
            "accuracy": self.accuracy,
            "correct": self.correct,
            "total": self.total,
            "low": self.low,
            "high": self.high,
            "mean_weight": self.mean_weight,
        }


@dataclass(frozen=True, eq=False, repr=False)
class HeadRoles:
    """Every head scored over labelled examples, ranked by accuracy, with the baselines.

    `attnviz.head_roles` returns it. `hits` (E, L, H) says which head got which example
    right, `weights` (E, L, H) the weight on `to`; `heads` holds every head, best first
    (ties in layer, head order). `rich.print(roles)` prints the table `attnviz find --file`
    prints; `figure`/`save` draw the layers × heads accuracy.
    """

    hits: np.ndarray = field(repr=False)  # (E, L, H) bool
    weights: np.ndarray = field(repr=False)  # (E, L, H) float
    examples: list[Example]
    model: str
    units: str = "words"
    excluded: tuple[str, ...] = ()
    source: str = ""  # where the examples came from (a file's name), for titles
    lang: str = "en"
    top: int = 10

    def __post_init__(self) -> None:
        if self.hits.shape[0] != len(self.examples) or not self.examples:
            raise ValueError("need one row of hits per example, and at least one example")

    def __repr__(self) -> str:
        L, H = self.accuracy.shape
        return f"<HeadRoles {self.model}: {L}×{H} heads, {len(self.examples)} examples>"

    @property
    def accuracy(self) -> np.ndarray:
        """(L, H): each head's share of examples right."""
        return self.hits.mean(axis=0)

    @property
    def heads(self) -> list[HeadRole]:
        """Every head, best first (ties in layer, head order)."""
        counts = self.hits.sum(axis=0)  # (L, H)
        means = self.weights.mean(axis=0)  # (L, H)
        E, H = len(self.examples), counts.shape[1]
        ranked = []
        for flat in np.argsort(-counts, axis=None, kind="stable"):
            layer, head = divmod(int(flat), H)
            correct = int(counts[layer, head])
            low, high = wilson(correct, E)
            ranked.append(
                HeadRole(layer, head, correct / E, correct, E, low, high, float(means[layer, head]))
            )
        return ranked

    def best(self, top: int | None = None) -> list[HeadRole]:
        """The `top` best heads (None: `self.top`)."""
        return self.heads[: self.top if top is None else check_range(top, "top", TOP)]

    @property
    def baselines(self) -> dict[str, float]:
        """The baselines' accuracies on the same examples: nearest, first, random."""
        picks = np.array([baseline_picks(e) for e in self.examples], dtype=np.float64)  # (E, 3)
        return dict(zip(BASELINES, (float(v) for v in picks.mean(axis=0)), strict=True))

    @property
    def held_out(self) -> dict[str, Any]:
        """The head ranked first, and the held-out accuracy of picking a head this way."""
        first = self.heads[0]
        accuracy, halves = held_out(self.hits)
        return {"layer": first.layer, "head": first.head, "accuracy": accuracy, "halves": halves}

    def beating(self) -> list[HeadRole]:
        """The heads whose whole interval lies above the best baseline."""
        bar = max(self.baselines.values())
        return [role for role in self.heads if role.low > bar]

    @property
    def note(self) -> str:
        """Which heads beat the best baseline (their intervals clear of it), or that none
        does; and that the first head was picked on these examples."""
        baselines = self.baselines
        best = max(baselines, key=lambda k: baselines[k])
        name = lexicon.label(self.lang, f"baseline_{best}")
        beating = self.beating()
        if beating:
            shown = ", ".join(f"L{r.layer} H{r.head}" for r in beating[:8])
            more = f" and {len(beating) - 8} more" if len(beating) > 8 else ""
            verdict = lexicon.label(
                self.lang, "roles_beat", n=len(beating), heads=shown + more,
                baseline=name, value=f"{baselines[best]:.2f}",
            )  # fmt: skip
        else:
            verdict = lexicon.label(
                self.lang, "roles_none", baseline=name, value=f"{baselines[best]:.2f}"
            )
        kept = self.held_out
        if math.isnan(kept["accuracy"]):
            return verdict
        first = self.heads[0]
        return verdict + " " + lexicon.label(
            self.lang, "roles_held_out", layer=first.layer, head=first.head,
            accuracy=f"{first.accuracy:.2f}", held=f"{kept['accuracy']:.2f}",
        )  # fmt: skip

    @property
    def title(self) -> str:
        where = f" · {self.source}" if self.source else ""
        return (
            f"{self.model}{where} · "
            + lexicon.label(self.lang, "roles_title", n=len(self.examples))
            + exclusion_note(self.excluded, self.lang)
        )

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The record `attnviz find --file --json` prints: every head (or the best `top`)."""
        return {
            "model": self.model,
            "examples": len(self.examples),
            "units": self.units,
            "excluded": list(self.excluded),
            "heads": [role.to_dict() for role in (self.heads if top is None else self.best(top))],
            "baselines": self.baselines,
            "held_out": self.held_out,
            "note": self.note,
        }

    def caption(self) -> str:
        """The baselines in one line, as the table's and the figure's captions say them."""
        b = self.baselines
        return lexicon.label(
            self.lang, "roles_baselines", nearest=f"{b['nearest']:.2f}",
            first=f"{b['first']:.2f}", random=f"{b['random']:.2f}",
        )  # fmt: skip

    def table(self, top: int | None = None) -> RolesTable:
        """The best `top` heads (None: `self.top`) as a terminal table."""
        from attnviz.render.roles import RolesTable

        return RolesTable(
            [role.to_dict() for role in self.best(top)],
            title=self.title,
            caption=self.caption(),
            note=self.note,
            held_out=self.held_out,
            lang=self.lang,
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table()

    def _repr_html_(self) -> str:
        """A notebook cell that ends in the scores shows the table `find --file` prints."""
        from attnviz.render.notebook import rich_html

        return rich_html(self.table())

    def figure(self, *, cmap: str = "viridis", theme: str = "light") -> Figure:
        """A layers × heads heatmap of accuracy, the baselines in its caption."""
        from attnviz.render.roles import roles_figure

        return roles_figure(
            self.accuracy, title=self.title, caption=self.caption(), cmap=cmap, theme=theme,
            lang=self.lang,
        )  # fmt: skip

    def save(
        self,
        path: str | Path,
        *,
        dpi: int = 200,
        cmap: str = "viridis",
        theme: str = "light",
        transparent: bool = False,
    ) -> Path:
        """Write the heatmap as .png, .svg or .pdf, all or nothing."""

        def write(path: Path, style: ImageStyle) -> None:
            write_figure(self.figure(cmap=cmap, theme=theme), path, style)

        return save_image(path, ImageStyle(dpi, cmap, theme, transparent), write)

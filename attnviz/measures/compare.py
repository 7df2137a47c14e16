"""One query, every measure: how each ranks the keys, side by side, and where they disagree.

For the query word's row in one layer, each measure gives a value per key: the
weight and the norm are the mean over the layer's heads; ALTI, norm-res-ln and value
zeroing are per layer already. Rows are compared as shares (each row divided by its
sum), since the norms do not sum to 1. numpy only; drawing is in render/compare.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.lexicon import label
from attnviz.measures.drawn import Drawn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Comparison"]


@dataclass(frozen=True, eq=False, repr=False)
class Comparison(Drawn):
    """The query's row under each measure: `shares[m, j]` is key j's share by measure m."""

    title: str
    query: int  # the query's index in `labels`
    labels: list[str]
    layer: int
    measures: list[str]
    values: np.ndarray  # (M, N): each measure's row as computed
    top: int = 5
    lang: str = "en"  # the language of its title and labels: "en" or "pt"

    @property
    def shares(self) -> np.ndarray:
        totals = self.values.sum(axis=-1, keepdims=True)  # (M, 1)
        return self.values / np.where(totals > 0, totals, 1.0)  # (M, N), rows sum to 1

    def ranking(self, measure: str) -> list[int]:
        """Key indices from the largest value to the smallest, by `measure`."""
        row = self.values[self.measures.index(measure)]
        return [int(j) for j in np.argsort(-row, kind="stable")]

    def disagreements(self, lang: str = "en") -> list[str]:
        """Plain sentences on where the measures' top keys differ (or that they agree), in
        `lang` ("en", as `to_dict` keeps them, or "pt")."""
        firsts = {m: self.ranking(m)[0] for m in self.measures}
        distinct = sorted(set(firsts.values()), key=list(firsts.values()).index)
        name = self.labels
        if len(distinct) == 1:
            return [label(lang, "compare_all_first", word=repr(name[distinct[0]]))]
        lines = []
        for key in distinct:
            which = [m for m, first in firsts.items() if first == key]
            one = "compare_puts_first" if len(which) == 1 else "compare_put_first"
            lines.append(label(lang, one, measures=", ".join(which), word=repr(name[key])))
        reference = self.ranking(self.measures[0])[: self.top]
        for m in self.measures[1:]:
            shared = len(set(reference) & set(self.ranking(m)[: self.top]))
            lines.append(
                label(
                    lang,
                    "compare_shares",
                    measure=m,
                    shared=shared,
                    first=self.measures[0],
                    top=self.top,
                )
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.labels[self.query],
            "layer": self.layer,
            "tokens": self.labels,
            "measures": {
                m: {
                    "values": self.values[i].tolist(),
                    "shares": self.shares[i].tolist(),
                    "ranking": self.ranking(m),
                }
                for i, m in enumerate(self.measures)
            },
            "disagreements": self.disagreements(),
        }

    def __repr__(self) -> str:
        return f"<Comparison of {self.labels[self.query]!r}, layer {self.layer}: {self.measures}>"

    def _renderable(self) -> Any:
        from attnviz.render.compare import ComparisonTable

        return ComparisonTable(self)

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        """One bar chart per measure: the top keys' shares."""
        from attnviz.render.compare import comparison_figure

        return comparison_figure(self, theme=theme)

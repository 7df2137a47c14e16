"""What a decoder looked at while writing: one row per new token (`StepsView`).

Row k is the attention of the query that wrote new token k, over the tokens read before
it (the prompt and the new tokens before k); the keys it could not yet see are NaN, drawn
blank. Plain data that draws itself, as the other views do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.measures.drawn import DrawnView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["StepsView"]


@dataclass(frozen=True, eq=False, repr=False)
class StepsView(DrawnView):
    """(N, T) weights: rows are the new tokens, columns the tokens read; NaN not yet written."""

    matrix: np.ndarray  # (N, T) float32, NaN right of each row's step
    rows: list[str]  # the new tokens
    keys: list[str]  # the tokens read: the prompt, then the new tokens but the last
    title: str
    model: str
    layer: int
    head: int | None  # None: the mean over the layer's heads

    def to_dict(self) -> dict[str, Any]:
        """The rows as lists, each as long as the tokens its step had read."""
        return {
            "model": self.model,
            "layer": self.layer,
            "head": self.head,
            "new_tokens": self.rows,
            "keys": self.keys,
            "weights": [[float(w) for w in row[~np.isnan(row)]] for row in self.matrix],
        }

    def _renderable(self) -> Any:
        from attnviz.render.terminal import Heatmap

        return Heatmap(self.matrix, self.rows, self.keys, title=self.title)

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import heatmap_figure

        return heatmap_figure(
            self.matrix,
            self.rows,
            self.keys,
            title=self.title,
            cmap=cmap,
            theme=theme,
            annotate=annotate,
            axis_names=("new_token", "key"),
        )

"""The logit lens as plain data (`Lens`): each layer's top next-token guess at each position.

Layer l's guess at position i is the token the LM head ranks first when it reads layer
l's output there, after the final norm: at the last layer, the model's own next token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.measures.drawn import Drawn

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["Lens"]


@dataclass(frozen=True, eq=False, repr=False)
class Lens(Drawn):
    """`ids[l, i]`, `guesses[l][i]` and `probabilities[l, i]`: layer l's top guess after
    position i (the token it would write next) and its probability."""

    ids: np.ndarray  # (L, T) int
    probabilities: np.ndarray  # (L, T) float32
    guesses: list[list[str]]  # (L, T) decoded text of each guess
    labels: list[str]  # (T,) the tokens read
    title: str

    @property
    def matrix(self) -> np.ndarray:
        return self.probabilities

    def first_layer(self, position: int = -1) -> int:
        """The first layer from which every later layer guesses the final answer at
        `position` (where in depth the answer appears)."""
        final = self.ids[-1, position]
        layer = self.ids.shape[0] - 1
        while layer > 0 and self.ids[layer - 1, position] == final:
            layer -= 1
        return layer

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.labels,
            "guesses": self.guesses,
            "guess_ids": self.ids.tolist(),
            "probabilities": self.probabilities.tolist(),
        }

    def _renderable(self, width: int = 100) -> Any:
        from attnviz.render.lens import lens_table

        return lens_table(self.guesses, self.probabilities, self.labels, self.title, width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._renderable(options.max_width)

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.lens import lens_figure

        return lens_figure(
            self.guesses, self.probabilities, self.labels, title=self.title, cmap=cmap, theme=theme
        )

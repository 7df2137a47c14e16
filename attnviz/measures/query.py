"""One query's attention as a sorted list: the way to read exact values, and long texts.

`AttentionView.row("ele")` (and `attnviz show --query ele`) picks one row of a view
and lists its keys, largest weight first. It draws as a list with bars in the
terminal (`render.bars`) and as a horizontal bar chart in an image. Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from attnviz import lexicon
from attnviz.errors import BadInput
from attnviz.measures.drawn import Drawn
from attnviz.text.match import find_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["OneMatrix", "QueryRow", "query_row"]


class OneMatrix(Protocol):
    """What a row is read from: one attention matrix and its labels (an `AttentionView`)."""

    @property
    def matrix(self) -> np.ndarray: ...  # (N, M) float: M keys (M == N unless a rectangle)
    @property
    def labels(self) -> list[str]: ...  # (N,) as drawn (sentence B's first marked `B:`)
    @property
    def tokens(self) -> list[str]: ...  # (N,) without the mark
    @property
    def columns(self) -> list[str]: ...  # (M,) the keys' labels (`labels` unless a rectangle)
    @property
    def title(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def layer(self) -> int: ...
    @property
    def head(self) -> int | None: ...
    @property
    def units(self) -> str: ...
    @property
    def excluded(self) -> tuple[str, ...]: ...
    @property
    def lang(self) -> str: ...  # the language of its title and labels
    @property
    def masked(self) -> np.ndarray | None: ...  # (N, N) bool: keys the model could not see


@dataclass(frozen=True, eq=False, repr=False)
class QueryRow(Drawn):
    """One query's weights over the keys of a view, largest first; they sum to 1.

    `keys[i]` (a label of the view) has weight `weights[i]` and is column
    `indices[i]` of the view's matrix.
    """

    query: str  # the query's label
    index: int  # the query's row in the view
    keys: list[str]  # (N,) labels, largest weight first
    indices: list[int]  # (N,) their columns in the view
    weights: np.ndarray  # (N,) float, descending
    title: str
    model: str
    layer: int
    head: int | None
    units: str
    excluded: tuple[str, ...] = ()
    lang: str = "en"  # the language of its title and labels: "en" or "pt"
    # (N,) bool, in the order of `keys`: True for a key the model could not see (weight 0.0);
    # None when nothing is masked.
    masked: np.ndarray | None = None

    def weight(self, key: str) -> float:
        """The weight on the key named `key` (a label, matched like the query)."""
        if not isinstance(key, str):
            raise BadInput(f"{{key}} must be a key's label (a str), got {type(key).__name__}",
                           param="key")  # fmt: skip
        return float(self.weights[find_label(self.keys, key, "key")])

    def to_dict(self) -> dict[str, Any]:
        """The record `attnviz show --query WORD --json` prints."""
        return {
            "model": self.model,
            "layer": self.layer,
            "head": self.head,
            "query": self.query,
            "query_index": self.index,
            "units": self.units,
            "excluded": list(self.excluded),
            "keys": [
                {"index": j, "token": label, "weight": float(w), "masked": hidden}
                for j, label, w, hidden in zip(
                    self.indices, self.keys, self.weights, self._masked_list(), strict=True
                )
            ],
        }

    def _masked_list(self) -> list[bool]:
        if self.masked is None:
            return [False] * len(self.keys)
        return [bool(m) for m in self.masked]

    def _renderable(self) -> Any:
        from attnviz.render.bars import BarList

        return BarList(
            self.keys,
            self.weights,
            title=self.title,
            indices=self.indices,
            lang=self.lang,
            masked=self._masked_list(),
        )

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.figures import bars_figure

        return bars_figure(
            self.keys,
            self.weights,
            title=self.title,
            cmap=cmap,
            theme=theme,
            annotate=annotate,
            lang=self.lang,
        )


def query_row(view: OneMatrix, query: str | int) -> QueryRow:
    """Row `query` of `view` (a word or a row index), its keys sorted by weight."""
    n = len(view.tokens)
    if isinstance(query, str):
        i = find_label(view.tokens, query, "query")
    elif isinstance(query, bool) or not isinstance(query, int | np.integer):
        raise BadInput(f"the query must be a word or a row number, got {query!r}")
    elif not -n <= query < n:
        raise BadInput(f"query row {query} is out of range: the view has rows 0..{n - 1}")
    else:
        i = int(query) % n
    row = np.asarray(view.matrix[i], dtype=float)  # (N,)
    order = np.argsort(-row, kind="stable")  # (N,): largest first, ties in text order
    masked = None
    if view.masked is not None:  # the keys it could not see last, after any real zero
        hidden = np.asarray(view.masked[i], dtype=bool)  # (N,)
        order = order[np.argsort(hidden[order], kind="stable")]
        masked = hidden[order]
    return QueryRow(
        query=view.labels[i],
        index=i,
        keys=[view.columns[j] for j in order],
        indices=[int(j) for j in order],
        weights=row[order],
        title=f"{view.title} · {lexicon.label(view.lang, 'query_named', label=view.labels[i])}",
        model=view.model,
        layer=view.layer,
        head=view.head,
        units=view.units,
        excluded=view.excluded,
        lang=view.lang,
        masked=masked,
    )

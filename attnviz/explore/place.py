"""Where the explorer is: layer, head, query, units, exclusions and measure; and the moves.

Pure data: each key's move is a function from one `Place` to the next, so the app only
draws the place it is given, and tests check the moves without a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attnviz.measures.contributions import MEASURES as MEASURED
from attnviz.measures.contributions import PER_LAYER

__all__ = ["MEASURES", "Place", "move_head", "move_layer", "move_query", "next_measure"]

# What `w` cycles through: the weight, the per-head norm, then the per-layer measures.
MEASURES: tuple[str, ...] = tuple(MEASURED)


@dataclass(frozen=True)
class Place:
    """What is on the screen. `layer` is an index into the layers the analysis holds;
    `head` None is the mean of the heads; `query` is a row of the view (its units)."""

    layer: int = 0
    head: int | None = 0
    query: int = 0
    units: str = "words"
    exclude: tuple[str, ...] = ()
    measure: str = "weight"
    rollout: bool = False

    @property
    def per_layer(self) -> bool:
        """True when the measure has one matrix a layer (no heads)."""
        return self.measure in PER_LAYER

    @property
    def has_heads(self) -> bool:
        """True when ←/→ and `a` pick heads: not a rollout, not a per-layer measure."""
        return not self.rollout and not self.per_layer


def move_head(place: Place, step: int, heads: int) -> Place:
    """The previous (-1) or next (+1) head, round the layer; from the mean, the first or
    the last head."""
    if place.head is None:
        return replace(place, head=0 if step > 0 else heads - 1)
    return replace(place, head=(place.head + step) % heads)


def move_layer(place: Place, step: int, layers: int) -> Place:
    """The previous or next layer (of the `layers` held), stopping at the ends."""
    return replace(place, layer=min(max(place.layer + step, 0), layers - 1))


def move_query(place: Place, step: int, queries: int) -> Place:
    """The previous or next query, round the text."""
    return replace(place, query=(place.query + step) % queries)


def next_measure(measure: str, per_layer: bool = True) -> str:
    """The measure after `measure` in `MEASURES` (the per-layer ones left out unless
    `per_layer`), back to the weight after the last."""
    shown = [m for m in MEASURES if per_layer or m not in PER_LAYER]
    at = shown.index(measure) if measure in shown else -1
    return shown[(at + 1) % len(shown)]

"""What the explorer reads from an analysis: a protocol the face's `Analysis` satisfies.

The app never imports the face (a floor above); it calls these methods on whatever it is
given, and a `Retext` callback for a new text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from attnviz.text.match import match_key

if TYPE_CHECKING:
    from attnviz.measures.explain import Explanation
    from attnviz.measures.find import HeadLinks
    from attnviz.measures.views import AttentionView, RolloutView

__all__ = ["Explorable", "ModelFacts", "Retext", "word_name"]


class ModelFacts(Protocol):
    """The model's shape, as `ModelInfo` holds it."""

    @property
    def name(self) -> str: ...
    @property
    def layers(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def decoder(self) -> bool: ...
    @property
    def has_model(self) -> bool: ...


class Explorable(Protocol):
    """An analysis: its model, the layers it holds, and the views the app draws."""

    @property
    def model(self) -> ModelFacts: ...
    @property
    def layers(self) -> tuple[int, ...] | None: ...
    @property
    def rectangle(self) -> bool: ...

    def view(
        self,
        layer: int = -1,
        head: int | None = None,
        units: str = "words",
        *,
        exclude: str | Sequence[str] | None = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> AttentionView: ...

    def rollout(
        self,
        upto: int | None = None,
        units: str = "words",
        top: int = 3,
        *,
        exclude: str | Sequence[str] | None = None,
        measure: str = "weight",
        method: str = "rollout",
        progress: Callable[[int], None] | None = None,
        lang: str | None = None,
    ) -> RolloutView: ...

    def explain(
        self,
        token: str | None = None,
        *,
        index: int | None = None,
        layer: int = -1,
        head: int = 0,
        lang: str | None = None,
    ) -> Explanation: ...

    def find(
        self,
        source: str,
        target: str,
        *,
        units: str = "words",
        exclude: str | Sequence[str] | None = None,
        top: int = 10,
        lang: str | None = None,
    ) -> HeadLinks: ...


Retext = Callable[[str], Explorable]  # a new text -> its analysis, with the same model


def word_name(labels: Sequence[str], index: int) -> str:
    """How a word is named to `find` and `explain`: `labels[index]`, with `#n` when it is
    the n-th of several that match alike (`ele#2`)."""
    key = match_key(labels[index])
    before = sum(1 for label in labels[:index] if match_key(label) == key)
    return labels[index] if before == 0 else f"{labels[index]}#{before + 1}"

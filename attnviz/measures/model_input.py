"""What a measure that runs the model reads of its input: a Protocol, so the measures
need not know the face's `attnviz.Prepared` (which has these attributes and more)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.text.pieces import Pieces

__all__ = ["ModelInput"]


class ModelInput(Protocol):
    """A tokenized input and the model it is for (`attnviz.Prepared` is one)."""

    @property
    def source(self) -> ModelSource:
        """Where the model's files are (its name, its folder)."""

    @property
    def config(self) -> dict[str, Any]:
        """The model's config.json."""

    @property
    def pieces(self) -> Pieces:
        """The tokenized input."""

    @property
    def shape(self) -> ModelShape:
        """What the config says about the model (layers, heads, a decoder's config)."""

    @property
    def engine(self) -> str:
        """What computes the weights: "attnviz" (its own modules) or "transformers"."""

    def refuse_internals(self, what: str, *, param: str | None = None) -> None:
        """Refuse `what`, which needs the model's internals, on transformers' engine."""

    def note_engine(self) -> None:
        """One line on stderr when transformers' engine computed the weights."""

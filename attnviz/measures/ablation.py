"""A head's effect on the output as plain data (`Ablation`): what removing or patching it does.

The measure is the next token's logit(target) − logit(foil) after the prompt. Ablation
(`method` "zero" or "mean"): each head's effect is the difference with that head removed less
the clean one, so a head that pushed the target over the foil has a negative effect. Patching
(`method` "patch"): the share of the clean − corrupted difference that the head's clean output
restores when patched into the corrupted run (1: all of it, 0: none). Heads are ranked by the
size of their effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from attnviz.measures.drawn import Drawn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Ablation", "Piece"]

SHOWN = 12  # heads the terminal table lists


@dataclass(frozen=True)
class Piece:
    """A target or foil: the word asked for, the vocabulary piece used, its id."""

    word: str
    text: str  # the piece as it decodes, with its leading space (" Mary")
    id: int


@dataclass(frozen=True, eq=False, repr=False)
class Ablation(Drawn):
    """Each head's logit difference, `logit_diffs[i, h]` for head h of layer `layers[i]`, and
    its effect (see the module's docstring)."""

    model: str
    prompt: str
    input_ids: list[int]
    tokens: list[str]
    target: Piece
    foil: Piece
    method: str  # "zero", "mean" or "patch"
    clean: float
    corrupted: float | None  # patching: the corrupted prompt's logit difference
    patch: str | None  # patching: the corrupted prompt
    layers: list[int]
    logit_diffs: np.ndarray  # (len(layers), H) float64
    title: str = ""  # default: the model, the method and the two pieces
    default_cmap: ClassVar[str] = "RdBu_r"  # an effect has a sign: colours diverge from 0

    def __post_init__(self) -> None:
        if not self.title:
            what = "patching" if self.method == "patch" else f"{self.method} ablation"
            pieces = f"logit({self.target.text!r}) − logit({self.foil.text!r})"
            object.__setattr__(self, "title", f"{self.model} · {what} · {pieces}")

    @property
    def effects(self) -> np.ndarray:
        """(len(layers), H): ablation, logit_diff − clean; patching, the share restored."""
        if self.corrupted is None:
            return self.logit_diffs - self.clean
        return (self.logit_diffs - self.corrupted) / (self.clean - self.corrupted)

    @property
    def matrix(self) -> np.ndarray:
        return self.effects

    def ranked(self) -> list[tuple[int, int, float, float]]:
        """(layer, head, logit difference, effect) of every head, the largest effect first."""
        effects, diffs = self.effects, self.logit_diffs
        cells = [(i, h) for i in range(effects.shape[0]) for h in range(effects.shape[1])]
        cells.sort(key=lambda c: (-abs(float(effects[c])), c))
        return [(self.layers[i], h, float(diffs[i, h]), float(effects[i, h])) for i, h in cells]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": self.prompt,
            "input_ids": self.input_ids,
            "tokens": self.tokens,
            "target": self.target.text,
            "target_id": self.target.id,
            "foil": self.foil.text,
            "foil_id": self.foil.id,
            "method": self.method,
            "clean": self.clean,
            "corrupted": self.corrupted,
            "patch": self.patch,
            "heads": [
                {"layer": layer, "head": head, "logit_diff": diff, "effect": effect}
                for layer, head, diff, effect in self.ranked()
            ],
        }

    def _lines(self) -> list[str]:
        pieces = (
            f"target {self.target.text!r} (id {self.target.id}), foil {self.foil.text!r} "
            f"(id {self.foil.id}), the next token after {len(self.tokens)} pieces"
        )
        if self.corrupted is None:
            how = "zeros" if self.method == "zero" else "its mean over the prompt's positions"
            return [
                pieces,
                f"clean logit difference {self.clean:+.3f}; each head's output replaced by {how}",
                "effect: the difference without the head less the clean one (negative: the "
                "head pushed the target over the foil)",
            ]
        return [
            pieces,
            f"clean {self.clean:+.3f}, corrupted {self.corrupted:+.3f} ({self.patch!r})",
            "effect: the share of clean − corrupted a head restores when its clean output is "
            "patched into the corrupted run (1: all of it)",
        ]

    def _renderable(self) -> Any:
        from attnviz.render.ablation import ablation_table

        rows = self.ranked()
        effect = "share restored" if self.corrupted is not None else "effect"
        return ablation_table(
            rows[:SHOWN], title=self.title, lines=self._lines(), effect=effect, total=len(rows)
        )

    def figure(
        self, *, cmap: str = "RdBu_r", theme: str = "light", annotate: bool = False
    ) -> Figure:
        from attnviz.render.ablation import ablation_figure

        patched = self.corrupted is not None
        label = "share of clean − corrupted restored" if patched else "change in logit difference"
        caption = (
            f"clean {self.clean:+.2f}, corrupted {self.corrupted:+.2f}"
            if self.corrupted is not None
            else f"clean logit difference {self.clean:+.2f}"
        )
        return ablation_figure(
            self.effects, self.layers, title=self.title, label=label, caption=caption,
            cmap=cmap, theme=theme, annotate=annotate,
        )  # fmt: skip

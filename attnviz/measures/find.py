"""Which heads link two words: every (layer, head) ranked by one query-to-key weight.

`Analysis.find("he", "John")` (and `attnviz find --from he --to John`) reads, in
every head of every layer, how much the query word puts on the target word, and
ranks the heads by it. For each head it also says where the target ranks among that
query's keys, what the query's top key is, and how many other words attend to the
target more than the query does: a head where many words look at the target is a
broad column (everyone looks at the first word), not a link between these two.

Words are matched ignoring case and accents (`joao` finds `João`), `#N` picks a
repeat. In words, the weight to a word is the sum over its pieces and the weight
from a word the mean over its pieces, as in every view. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz import lexicon
from attnviz.errors import BadInput
from attnviz.limits import TOP, check_range
from attnviz.measures.drawn import Drawn
from attnviz.measures.select import exclusion_note
from attnviz.measures.views import Source
from attnviz.text.match import find_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["HeadLink", "HeadLinks", "find_links"]


@dataclass(frozen=True)
class HeadLink:
    """One head's link from the query word to the target word."""

    layer: int
    head: int
    weight: float  # the query's weight on the target
    rank: int  # the target's place among the query's keys: 1 is its largest
    top_key: str  # the query's largest key (the target itself when rank is 1)
    top_weight: float  # its weight
    others_above: int  # other words (not the query, not the target) weighing the target more
    sink: float = 0.0  # share of the queries that see the target putting over half on it

    def to_dict(self) -> dict[str, Any]:
        """Its fields by name (each head of `HeadLinks.to_dict`)."""
        return asdict(self)


@dataclass(frozen=True, eq=False, repr=False)
class HeadLinks(Drawn):
    """Every head's weight from `source` to `target`, and the heads ranked by it.

    `weights[l, h]` is that weight in layer l, head h; `links` holds every head,
    strongest first (ties in layer, head order); `top` is how many the terminal shows.
    """

    source: str  # the query word, as the text spells it
    target: str  # the key word
    source_index: int  # their positions in the view's units
    target_index: int
    weights: np.ndarray  # (L, H) float
    links: list[HeadLink]
    title: str
    model: str
    units: str
    excluded: tuple[str, ...] = ()
    top: int = 10
    note: str = ""  # why the ranking may mislead (the target is a sink), and what to do
    lang: str = "en"  # the language of its title and labels: "en" or "pt"

    def best(self, top: int | None = None) -> list[HeadLink]:
        """The `top` strongest heads (None: `self.top`)."""
        return self.links[: self.top if top is None else check_range(top, "top", TOP)]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The record `attnviz find --json` prints: the strongest `top` heads."""
        return {
            "model": self.model,
            "source": self.source,
            "target": self.target,
            "units": self.units,
            "excluded": list(self.excluded),
            "note": self.note,
            "heads": [link.to_dict() for link in self.best(top)],
        }

    def _renderable(self) -> Any:
        from attnviz.render.find import LinkTable

        return LinkTable(
            self.best(), self.source, self.target, title=self.title, note=self.note, lang=self.lang
        )

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        """A layers × heads heatmap of the weight from `source` to `target`."""
        from attnviz.render.figures import heatmap_figure

        L, H = self.weights.shape
        return heatmap_figure(
            self.weights,
            [str(layer) for layer in range(L)],
            [str(head) for head in range(H)],
            title=self.title,
            cmap=cmap,
            theme=theme,
            annotate=annotate,
            axis_names=("layer", "head"),
            lang=self.lang,
        )


def check_direction(labels: Sequence[str], q: int, k: int, causal: bool) -> None:
    """Refuse a link from a word to a later one when the attention only looks back."""
    if causal and k > q:
        raise BadInput(
            f"{labels[k]!r} comes after {labels[q]!r}, and this model's tokens look only back "
            f"(a causal mask), so every head gives it 0: look for the link the other way, "
            f"{{source}} {labels[k]} {{target}} {labels[q]}",
            param=("source", "target"),
        )


def find_links(
    src: Source,
    source: str,
    target: str,
    *,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
    top: int = 10,
    causal: bool = False,
) -> HeadLinks:
    """Rank every head of `src` by the weight from the word `source` to the word `target`.

    `causal`: the attention only looks back (a decoder), so a later target is refused.
    In a rectangle (`src.keys`: queries and keys from two inputs, e.g. cross-attention)
    `source` is a query word and `target` a key word: which head aligns them.
    """
    top = check_range(top, "top", TOP)
    for param, word in (("source", source), ("target", target)):
        if not isinstance(word, str):
            raise BadInput(
                f"{{{param}}} must be a word of the text (a str), got {type(word).__name__}",
                param=param,
            )
    unit_map = src.units(units, exclude)
    labels = unit_map.labels()  # the queries (rows)
    key_labels = unit_map.key_labels()  # the keys (columns): the same unless a rectangle
    rectangle = src.keys is not None
    causal = causal and not rectangle
    q = find_label(labels, source, "source")
    k = find_label(key_labels, target, "target")
    check_direction(labels, q, k, causal)
    matrices = unit_map.matrix(src.attentions)  # (L, H, N, M), rows sum to 1
    rows = matrices[:, :, q, :]  # (L, H, N): the query's row in every head
    weights = rows[:, :, k]  # (L, H)
    H = weights.shape[1]
    ranks = 1 + (rows > weights[..., None]).sum(axis=-1)  # (L, H)
    tops = rows.argmax(axis=-1)  # (L, H)
    column = matrices[:, :, :, k]  # (L, H, N): every query's weight on the target
    others = np.ones(len(labels), dtype=bool)  # (N,)
    others[[q] if rectangle else [q, k]] = False
    above = (column[:, :, others] > weights[..., None]).sum(axis=-1)  # (L, H)
    seeing = np.arange(len(labels)) >= k if causal else np.ones(len(labels), dtype=bool)  # (N,)
    if causal:  # a decoder's first query sees only the first key: its weight there is forced
        seeing[0] = False
    sinks = (  # (L, H)
        (column[:, :, seeing] > SINK_SHARE).mean(axis=-1) if seeing.any() else 0 * weights
    )
    order = np.argsort(-weights, axis=None, kind="stable")  # strongest first
    links = []
    for flat in order:
        layer, head = divmod(int(flat), H)
        links.append(
            HeadLink(
                layer=layer,
                head=head,
                weight=float(weights[layer, head]),
                rank=int(ranks[layer, head]),
                top_key=key_labels[int(tops[layer, head])],
                top_weight=float(rows[layer, head, tops[layer, head]]),
                others_above=int(above[layer, head]),
                sink=float(sinks[layer, head]),
            )
        )
    return HeadLinks(
        source=labels[q],
        target=key_labels[k],
        source_index=q,
        target_index=k,
        weights=weights,
        links=links,
        title=f"{src.model} · "
        + lexicon.label(src.lang, "in_every_head", source=labels[q], target=key_labels[k])
        + exclusion_note(unit_map.exclude, src.lang),
        model=src.model,
        units=units,
        excluded=unit_map.exclude,
        top=top,
        note=sink_note(key_labels[k], k == 0 and bool(unit_map.key_side().keep()[0]), links[:top]),
        lang=src.lang,
    )


SINK_SHARE = 0.5  # a query parks on a key when it puts over half its weight there


def sink_note(target: str, first: bool, strongest: Sequence[HeadLink]) -> str:
    """A line saying the target is the first token or the attention sink of most of the
    `strongest` heads, so their weight may be parking, not a link; "" when neither."""
    parked = sum(link.sink >= SINK_SHARE for link in strongest)
    sunk = parked * 2 >= len(strongest) > 0
    if not first and not sunk:
        return ""
    where = f"{target!r} is the first token" if first else f"{target!r}"
    if sunk:
        where += f"{' and' if first else ' is'} the attention sink of {parked} of these " + (
            f"{len(strongest)} heads (most queries put over half their weight on it)"
        )
    elif first:
        where += ", where a decoder parks attention whatever it reads (the attention sink)"
    fix = (
        "read the text with a start token in front (attnviz's default; --no-bos takes it "
        "off) so that the start token takes the sink's place"
        if first
        else "trust the heads whose sink share is low"
    )
    return f"{where}: a high weight there is parking, not a link; {fix}"

"""Picking from the attention array: a layer's head (or head mean), words, exclusions.

Pure numpy functions of the attention array `[layers, heads, T, T]` (rows are queries,
columns keys) and the tokenized input; the views (attnviz.measures.views) are built
from them.

Units: "words" merges word pieces back into the words of the text (attention TO a
word is the sum over its pieces, FROM a word the mean over its pieces, so rows still
sum to 1); "tokens" keeps the model's own pieces. `UnitMap` takes a matrix over
pieces to the chosen units.

Exclusion: `exclude=("special", "punct")` drops the special tokens ([CLS], [SEP], a
decoder's start token, special tokens typed in the text) and the punctuation, and
`"first"` (alias `"sink"`) the first position (its word, in words) whatever it is: a
decoder without a start token parks attention on its first word, the attention sink.
Each is dropped as keys and as queries, and each remaining row renormalised over the
keys left, so it sums to 1 again: where a head parks most of its attention on [CLS] or
the first word, what is left shows how the rest is shared. Exclusion comes last, after heads
are picked, words merged or layers chained, so the numbers before renormalising are
the model's own.

Masked cells: `hidden_keys` is what a causal mask (and a sliding window) hides over
the pieces, computed from the model's mask, never from the weights (a visible key can
underflow to exactly 0); `UnitMap.masked` takes it to the view's units: a word cell is
masked when every pair of its pieces is, and exclusion drops the same rows and columns
as it drops from the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.lexicon import label
from attnviz.limits import check_choice, resolve_index
from attnviz.text.pieces import Pieces, token_kinds

__all__ = [
    "EXCLUDABLE",
    "PAIR_MARK",
    "UNITS",
    "UnitMap",
    "check_exclude",
    "check_units",
    "excluded_pieces",
    "exclusion_note",
    "hidden_keys",
    "merge_masked",
    "merge_words",
    "pair_marked",
    "renormalise",
    "select",
]

UNITS: tuple[str, ...] = ("words", "tokens")
EXCLUDABLE: tuple[str, ...] = ("special", "punct", "first")  # what `exclude=` can drop
ALIASES = {"sink": "first"}  # other names `exclude=` takes
PAIR_MARK = "B:"
_CHOICES = "'special', 'punct' or 'first' (alias 'sink')"


def check_units(units: str) -> str:
    """`units` when it is "words" or "tokens"; else BadInput naming the parameter `units`."""
    return check_choice(units, UNITS, "units")


def check_exclude(exclude: str | Sequence[str] | None) -> tuple[str, ...]:
    """`exclude` as a tuple in EXCLUDABLE order: None, "special", "punct", "first" (alias
    "sink") or a list of them."""
    if exclude is None:
        return ()
    if not isinstance(exclude, str | Sequence) or isinstance(exclude, bytes):
        raise BadInput(
            f"{{exclude}} must be {_CHOICES} or a list of them, got {type(exclude).__name__}",
            param="exclude",
        )
    given = [exclude] if isinstance(exclude, str) else list(exclude)
    if len(given) > len(EXCLUDABLE) * 4:  # by its length, before reading the entries
        raise BadInput(f"{{exclude}} lists {len(given):,} names: use {_CHOICES}", param="exclude")
    names = []
    for name in given:
        name = ALIASES.get(name, name) if isinstance(name, str) else name
        if not isinstance(name, str) or name not in EXCLUDABLE:
            shown = repr(name)[:40] if isinstance(name, str) else type(name).__name__
            raise BadInput(f"cannot exclude {shown}: use {_CHOICES}")
        names.append(name)
    return tuple(name for name in EXCLUDABLE if name in names)


def excluded_pieces(pieces: Pieces, exclude: Sequence[str], *, words: bool = False) -> np.ndarray:
    """(T,) bool, True for the pieces `exclude` drops: special tokens, punctuation, the
    first piece (with `words`, the first word's pieces)."""
    kinds = token_kinds(pieces)
    dropped = np.zeros(len(pieces), dtype=bool)  # (T,)
    if "special" in exclude:
        dropped |= kinds.cls | kinds.sep
    if "punct" in exclude:
        dropped |= kinds.punct
    if "first" in exclude:
        dropped[pieces.words()[0].pieces if words else 0] = True
    return dropped


def exclusion_note(exclude: Sequence[str], lang: str = "en") -> str:
    """What a title adds for `exclude`: ` · without special tokens (rows renormalised)`."""
    if not exclude:
        return ""
    names = label(lang, "and").join(label(lang, f"excluded_{name}") for name in exclude)
    return label(lang, "without", names=names)


def hidden_keys(T: int, causal: bool, window: int | None = None) -> np.ndarray | None:
    """(T, T) bool, True where query (row) q cannot see key (column) k: k > q under a causal
    mask, and q - k >= `window` outside a sliding window, as the decoder masks them. None
    when nothing is hidden (an encoder without the causal what-if)."""
    if not causal:
        return None
    query = np.arange(T)[:, None]  # (T, 1)
    key = np.arange(T)[None, :]  # (1, T)
    hidden = key > query  # (T, T): the future
    if window is not None:
        hidden |= query - key >= window  # only the last `window` tokens are seen
    return hidden


def renormalise(matrix: np.ndarray) -> np.ndarray:
    """Each row (last axis) divided by its sum, so it sums to 1; rows summing to 0 stay 0."""
    sums = matrix.sum(axis=-1, keepdims=True)  # (..., N, 1)
    return np.divide(matrix, sums, out=np.zeros_like(matrix), where=sums > 0)


def select(attentions: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """One layer's attention for one head, or the mean over its heads when `head` is None."""
    L, H = attentions.shape[:2]
    per_layer = attentions[resolve_index(layer, L, "layer")]  # (H, T, T)
    if head is None:
        return per_layer.mean(axis=0)  # (T, T)
    return per_layer[resolve_index(head, H, "head")]  # (T, T)


def merge_words(matrix: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Attention between words instead of pieces.

    Attention TO a word is the sum over its pieces (the query's weight spread over
    the word); attention FROM a word is the mean over its pieces. Rows that summed
    to 1 still do. `matrix` is (..., T, T); the result is (..., W, W).

    Linear in the size of `matrix`: two segmented sums (`np.add.reduceat`) over the
    pieces in word order, instead of products with a (T, W) membership matrix, which
    cost T·T·W (126 s at 12k pieces).
    """
    T = matrix.shape[-1]
    sizes = np.array([len(pieces) for pieces in groups], dtype=np.int64)  # (W,)
    if len(groups) == 0 or sizes.min() < 1:
        raise ValueError("every word must have at least one piece")
    order = np.concatenate([np.asarray(pieces, dtype=np.int64) for pieces in groups])  # (T,)
    if len(order) != T or order.min() < 0 or order.max() >= T:
        raise ValueError("every piece must belong to exactly one word")
    if not np.array_equal(np.bincount(order, minlength=T), np.ones(T, dtype=np.int64)):
        raise ValueError("every piece must belong to exactly one word")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # (W,): each word's first position
    in_order = np.array_equal(order, np.arange(T))  # words are runs of pieces: no reordering
    rows = matrix if in_order else matrix[..., order, :]
    # Rows first: summing whole rows is contiguous, and halves what the key sum reads.
    from_words = _run_sums(rows, starts, sizes, axis=-2)  # (..., W, T): sum over a query word
    keys = from_words if in_order else from_words[..., order]
    summed = _run_sums(keys, starts, sizes, axis=-1)  # (..., W, W): sum over a key word's pieces
    return summed / sizes.astype(summed.dtype)[:, None]  # the sum over query pieces -> mean


def merge_masked(hidden: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., T, T) bool over pieces -> (..., W, W) over words: a word pair is masked when
    every pair of its pieces is (then its merged weight is exactly 0 too)."""
    order = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])  # (T,)
    if np.array_equal(order, np.arange(hidden.shape[-1])):  # words are runs of pieces
        starts = np.cumsum([0] + [len(g) for g in groups[:-1]])  # (W,)
        rows = np.logical_and.reduceat(hidden, starts, axis=-2)  # (..., W, T)
        return np.logical_and.reduceat(rows, starts, axis=-1)  # (..., W, W)
    visible = (~hidden).astype(np.float32)  # (..., T, T): pieces out of order
    return merge_words(visible, groups) == 0


def _run_sums(a: np.ndarray, starts: np.ndarray, sizes: np.ndarray, axis: int) -> np.ndarray:
    """Sums of `a` over the runs `starts[w] .. starts[w] + sizes[w]` along `axis`.

    The k-th piece of every word at once, for k up to the longest word: each element
    of `a` is read once. (`np.add.reduceat` does the same but took 4 s on 12k x 12k.)
    """
    a = np.moveaxis(a, axis, 0)
    total = a[starts]  # (W, ...): every word's first piece (fancy indexing copies)
    for k in range(1, int(sizes.max())):
        longer = np.flatnonzero(sizes > k)  # words with a (k+1)-th piece
        total[longer] += a[starts[longer] + k]
    return np.moveaxis(total, 0, axis)


def pair_marked(labels: Sequence[str], start: int | None) -> list[str]:
    """`labels` with the first piece (or word) of a sentence pair's B, at `start`, marked `B:`."""
    marked = list(labels)
    if start is not None:
        marked[start] = PAIR_MARK + marked[start]
    return marked


# ---------------------------------------------------------------- units


@dataclass(frozen=True)
class UnitMap:
    """How a matrix over pieces becomes one over the chosen units (words or tokens), with
    the excluded tokens dropped; and the labels of those units."""

    pieces: Pieces
    words: bool  # merge pieces into words ("words"); False keeps the pieces ("tokens")
    exclude: tuple[str, ...] = ()  # dropped as keys and queries; rows renormalised

    @classmethod
    def checked(
        cls, pieces: Pieces, units: str, exclude: str | Sequence[str] | None = None
    ) -> UnitMap:
        """The map to `units` ("words" or "tokens") without `exclude`, both checked; BadInput
        when the exclusion leaves nothing of the text."""
        unit_map = cls(pieces, check_units(units) == "words", check_exclude(exclude))
        if unit_map.exclude and not unit_map.keep().any():
            raise BadInput(
                f"{{exclude}} {','.join(unit_map.exclude)} leaves nothing of this text: "
                "exclude less",
                param="exclude",
            )
        return unit_map

    def keep(self) -> np.ndarray:
        """(N,) bool over these units: False for what `exclude` drops (a word, when all
        its pieces are dropped)."""
        dropped = excluded_pieces(self.pieces, self.exclude, words=self.words)  # (T,)
        if self.words:
            dropped = np.array([dropped[w.pieces].all() for w in self.pieces.words()], dtype=bool)
        return ~dropped

    def matrix(self, matrix: np.ndarray) -> np.ndarray:
        """(..., T, T) over pieces -> (..., N, N) in these units, exclusions dropped."""
        if self.words:
            matrix = merge_words(matrix, [w.pieces for w in self.pieces.words()])
        if not self.exclude:
            return matrix
        kept = np.flatnonzero(self.keep())
        return renormalise(matrix[..., kept[:, None], kept])  # (..., n, n)

    def masked(self, hidden: np.ndarray) -> np.ndarray:
        """(..., T, T) bool over pieces (True: hidden from the query) -> (..., N, N) in these
        units: a word cell is masked when every pair of its pieces is; exclusions dropped."""
        if self.words:
            hidden = merge_masked(hidden, [w.pieces for w in self.pieces.words()])
        if not self.exclude:
            return hidden
        kept = np.flatnonzero(self.keep())
        return hidden[..., kept[:, None], kept]  # (..., n, n)

    def labels(self) -> list[str]:
        words = self.pieces.words()
        return self._kept([w.label for w in words] if self.words else list(self.pieces.labels))

    def pair_start(self) -> int | None:
        """Where sentence B starts, in these units; None without a pair."""
        pieces = self.pieces
        firsts = [w.pieces[0] for w in pieces.words()] if self.words else range(len(pieces))
        seqs = self._kept([pieces.sequence_ids[i] for i in firsts])
        return next((i for i, seq in enumerate(seqs) if seq == 1), None)

    def _kept(self, items: list[Any]) -> list[Any]:
        if not self.exclude:
            return items
        return [item for item, kept in zip(items, self.keep(), strict=True) if kept]

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


def merge_words(
    matrix: np.ndarray,
    groups: Sequence[Sequence[int]],
    key_groups: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """Attention between words instead of pieces.

    Attention TO a word is the sum over its pieces (the query's weight spread over
    the word); attention FROM a word is the mean over its pieces. Rows that summed
    to 1 still do. `matrix` is (..., T, T); the result is (..., W, W). A rectangle
    (..., Tq, Tk), queries and keys from different inputs, takes the keys' words in
    `key_groups` (None: the keys are the queries) and gives (..., Wq, Wk).

    Linear in the size of `matrix`: two segmented sums (`np.add.reduceat`) over the
    pieces in word order, instead of products with a (T, W) membership matrix, which
    cost T·T·W (126 s at 12k pieces).
    """
    sizes, order, starts = _word_runs(groups, matrix.shape[-2])  # queries: (Wq,), (Tq,), (Wq,)
    if key_groups is None:
        key_sizes, key_order, key_starts = sizes, order, starts
    else:
        key_sizes, key_order, key_starts = _word_runs(key_groups, matrix.shape[-1])
    in_order = np.array_equal(order, np.arange(len(order)))  # runs of pieces: no reordering
    keys_in_order = np.array_equal(key_order, np.arange(len(key_order)))
    rows = matrix if in_order else matrix[..., order, :]
    # Rows first: summing whole rows is contiguous, and halves what the key sum reads.
    from_words = _run_sums(rows, starts, sizes, axis=-2)  # (..., Wq, Tk): sum over a query word
    keys = from_words if keys_in_order else from_words[..., key_order]
    summed = _run_sums(keys, key_starts, key_sizes, axis=-1)  # (..., Wq, Wk): over a key word
    return summed / sizes.astype(summed.dtype)[:, None]  # the sum over query pieces -> mean


def _word_runs(
    groups: Sequence[Sequence[int]], T: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each word's size (W,), the pieces in word order (T,) and each word's first position
    in that order (W,); ValueError unless every one of the T pieces is in exactly one word."""
    sizes = np.array([len(pieces) for pieces in groups], dtype=np.int64)  # (W,)
    if len(groups) == 0 or sizes.min() < 1:
        raise ValueError("every word must have at least one piece")
    order = np.concatenate([np.asarray(pieces, dtype=np.int64) for pieces in groups])  # (T,)
    if len(order) != T or order.min() < 0 or order.max() >= T:
        raise ValueError("every piece must belong to exactly one word")
    if not np.array_equal(np.bincount(order, minlength=T), np.ones(T, dtype=np.int64)):
        raise ValueError("every piece must belong to exactly one word")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # (W,): each word's first position
    return sizes, order, starts


def merge_masked(
    hidden: np.ndarray,
    groups: Sequence[Sequence[int]],
    key_groups: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """(..., T, T) bool over pieces -> (..., W, W) over words: a word pair is masked when
    every pair of its pieces is (then its merged weight is exactly 0 too). A rectangle
    takes the keys' words in `key_groups`, as `merge_words` does."""
    keyed = groups if key_groups is None else key_groups
    order = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])  # (Tq,)
    key_order = np.concatenate([np.asarray(g, dtype=np.int64) for g in keyed])  # (Tk,)
    if np.array_equal(order, np.arange(hidden.shape[-2])) and np.array_equal(
        key_order, np.arange(hidden.shape[-1])
    ):  # words are runs of pieces
        starts = np.cumsum([0] + [len(g) for g in groups[:-1]])  # (Wq,)
        key_starts = np.cumsum([0] + [len(g) for g in keyed[:-1]])  # (Wk,)
        rows = np.logical_and.reduceat(hidden, starts, axis=-2)  # (..., Wq, Tk)
        return np.logical_and.reduceat(rows, key_starts, axis=-1)  # (..., Wq, Wk)
    visible = (~hidden).astype(np.float32)  # (..., Tq, Tk): pieces out of order
    return merge_words(visible, groups, key_groups) == 0


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
    the excluded tokens dropped; and the labels of those units.

    A rectangle, queries from one input and keys from another (an encoder-decoder's
    cross-attention, or arrays given so), names the keys' pieces in `keys`: the rows go
    by `pieces`, the columns by `keys`. None: the keys are the queries (a square)."""

    pieces: Pieces
    words: bool  # merge pieces into words ("words"); False keeps the pieces ("tokens")
    exclude: tuple[str, ...] = ()  # dropped as keys and queries; rows renormalised
    keys: Pieces | None = None  # the keys' pieces when they are not the queries'

    @classmethod
    def checked(
        cls,
        pieces: Pieces,
        units: str,
        exclude: str | Sequence[str] | None = None,
        keys: Pieces | None = None,
    ) -> UnitMap:
        """The map to `units` ("words" or "tokens") without `exclude`, both checked; BadInput
        when the exclusion leaves nothing of the text (of the queries or of the keys)."""
        unit_map = cls(pieces, check_units(units) == "words", check_exclude(exclude), keys)
        if unit_map.exclude and not (unit_map.keep().any() and unit_map.key_side().keep().any()):
            raise BadInput(
                f"{{exclude}} {','.join(unit_map.exclude)} leaves nothing of this text: "
                "exclude less",
                param="exclude",
            )
        return unit_map

    def key_side(self) -> UnitMap:
        """The map of the keys, as a square's (itself when the keys are the queries)."""
        if self.keys is None:
            return self
        return UnitMap(self.keys, self.words, self.exclude)

    def keep(self) -> np.ndarray:
        """(N,) bool over these units (the queries): False for what `exclude` drops (a
        word, when all its pieces are dropped)."""
        dropped = excluded_pieces(self.pieces, self.exclude, words=self.words)  # (T,)
        if self.words:
            dropped = np.array([dropped[w.pieces].all() for w in self.pieces.words()], dtype=bool)
        return ~dropped

    def _groups(self) -> tuple[list[list[int]], list[list[int]] | None]:
        """The queries' words and (for a rectangle) the keys' words, as piece indices."""
        queries = [w.pieces for w in self.pieces.words()]
        return queries, None if self.keys is None else [w.pieces for w in self.keys.words()]

    def _kept_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows and the columns that exclusion keeps: (n,) and (m,) indices."""
        return np.flatnonzero(self.keep()), np.flatnonzero(self.key_side().keep())

    def matrix(self, matrix: np.ndarray) -> np.ndarray:
        """(..., Tq, Tk) over pieces -> (..., N, M) in these units, exclusions dropped."""
        if self.words:
            matrix = merge_words(matrix, *self._groups())
        if not self.exclude:
            return matrix
        rows, cols = self._kept_cells()
        return renormalise(matrix[..., rows[:, None], cols])  # (..., n, m)

    def masked(self, hidden: np.ndarray) -> np.ndarray:
        """(..., Tq, Tk) bool over pieces (True: hidden from the query) -> (..., N, M) in
        these units: a word cell is masked when every pair of its pieces is; exclusions
        dropped."""
        if self.words:
            hidden = merge_masked(hidden, *self._groups())
        if not self.exclude:
            return hidden
        rows, cols = self._kept_cells()
        return hidden[..., rows[:, None], cols]  # (..., n, m)

    def labels(self) -> list[str]:
        """The queries' labels (the rows), in these units."""
        words = self.pieces.words()
        return self._kept([w.label for w in words] if self.words else list(self.pieces.labels))

    def key_labels(self) -> list[str]:
        """The keys' labels (the columns), in these units."""
        return self.key_side().labels()

    def pair_start(self) -> int | None:
        """Where sentence B starts among the queries, in these units; None without a pair."""
        pieces = self.pieces
        firsts = [w.pieces[0] for w in pieces.words()] if self.words else range(len(pieces))
        seqs = self._kept([pieces.sequence_ids[i] for i in firsts])
        return next((i for i, seq in enumerate(seqs) if seq == 1), None)

    def _kept(self, items: list[Any]) -> list[Any]:
        if not self.exclude:
            return items
        return [item for item, kept in zip(items, self.keep(), strict=True) if kept]

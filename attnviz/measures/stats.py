"""Head statistics over a corpus, after Clark et al. 2019 ("What Does BERT Look At?").

For every layer and head, the mean over all query positions of all sentences of:

- `entropy`: the entropy of the query's attention row, −Σ p·log p in nats (0·log 0 = 0);
- `cls`, `sep`, `punct`: the attention weight the query puts on [CLS], on [SEP] (every
  other special token) and on punctuation pieces;
- `self`, `prev`, `next`: the weight on the query itself, on the token just before it
  and on the token just after it (the first position counts 0 for `prev`, the last
  counts 0 for `next`).

Every piece is a query, special tokens included. Means are pooled: the sum over all
query positions of all sentences divided by the number of query positions, so a long
sentence weighs more than a short one.

A decoder has no [CLS] or [SEP], and its mask hides the next token: its statistics are
`entropy`, `first` (the weight on each sentence's first token, the "attention sink":
the BOS when the tokenizer adds one), `punct`, `self` and `prev`. Its first query may
see only itself, so its row is forced (weight 1 on itself, the first token) and is
left out; the uniform reference for "broad" is a uniform row over the keys each query
may see, log(q + 1), not log T. `decoder_records` makes these records.

Exclusion (`exclude=`, as on the views: attnviz.measures.select): the excluded pieces are
dropped as keys and as queries and each row left is renormalised over the keys left, so it
sums to 1 again (a row with nothing left stays 0); the statistics are then those of the
shorter sentence: `prev` is the previous piece kept, the uniform reference counts the keys
kept, and a decoder's first query kept, which then sees only itself, is left out as the
first query is. The share of what was excluded is 0 (`first` with `exclude="first"`).
`StatsAccumulator.add_excluding` does it for a batch.

Memory stays bounded: `StatsAccumulator` keeps running (L, H) sums and counters, never the
attention arrays. numpy; torch only for tensors already on a GPU, imported there.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np

from attnviz import lexicon
from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import TOP, check_range, resolve_index
from attnviz.measures.drawn import save_image, write_figure
from attnviz.measures.select import exclusion_note
from attnviz.output import ImageStyle
from attnviz.text.pieces import TokenKinds

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.render.stats import StatsTable

__all__ = [
    "BROAD_FRACTION",
    "DECODER_SHARES",
    "DOMINANT_SHARE",
    "LABELS",
    "LABEL_SHARES",
    "SHARES",
    "SORT_COLUMNS",
    "STATISTICS",
    "HeadRecord",
    "HeadStats",
    "StatsAccumulator",
    "check_sort_column",
    "decoder_records",
    "head_record",
    "label_for",
    "sort_records",
    "statistics_of",
]

SHARES: tuple[str, ...] = ("cls", "sep", "punct", "self", "prev", "next")
STATISTICS: tuple[str, ...] = ("entropy", *SHARES)
DECODER_SHARES: tuple[str, ...] = ("first", "punct", "self", "prev")  # a decoder's shares

# Labels. A head is named after a pattern when its mean share exceeds DOMINANT_SHARE;
# when several do (they can overlap: [CLS] is also "self" for the first query), the
# largest share wins, and an exact tie goes to the earlier entry of _PATTERNS. A head
# with no dominant pattern is "broad" when its mean entropy is at least BROAD_FRACTION
# of the entropy that uniform attention would have over the same queries (the pooled
# mean of log T, see StatsAccumulator.uniform_entropy), else "mixed".
DOMINANT_SHARE = 0.5
BROAD_FRACTION = 0.8
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("prev", "previous-token"),
    ("next", "next-token"),
    ("self", "self"),
    ("cls", "[CLS]"),
    ("sep", "[SEP]"),
    ("first", "first-token"),
    ("punct", "punctuation"),
)
BROAD = "broad"
MIXED = "mixed"
LABELS: tuple[str, ...] = (*(label for _, label in _PATTERNS), BROAD, MIXED)
LABEL_SHARES: dict[str, str] = {label: key for key, label in _PATTERNS}  # label -> its share

# Columns `sort_records` accepts: "layer" is layer, head order; the rest are statistics
# (an encoder's or a decoder's: records hold one set or the other).
SORT_COLUMNS: tuple[str, ...] = ("layer", *STATISTICS, "first")


class _Record(TypedDict):
    layer: int
    head: int
    entropy: float
    punct: float
    self: float
    prev: float
    label: str


class HeadRecord(_Record, total=False):
    """One head's statistics: the shape of the `--json` output.

    An encoder's records have `cls`, `sep` and `next`; a decoder's have `first` instead.
    """

    cls: float
    sep: float
    next: float
    first: float  # a decoder's: the weight on the first token (the attention sink)
    excluded: list[str]  # with `exclude=`: what was dropped before renormalising rows


# ---------------------------------------------------------------- accumulator


class StatsAccumulator:
    """Running sums of the head statistics over many sentences.

    Feed sentences with `add` (one at a time) or `add_batch` (a padded batch), then
    read `result()`. Only (L, H) sums and counters are kept. `sentences` and
    `queries` count what was added.
    """

    def __init__(self, layers: int, heads: int) -> None:
        if layers < 1 or heads < 1:
            raise ValueError(f"need at least one layer and one head, got {layers}, {heads}")
        self.layers = layers
        self.heads = heads
        self.sentences = 0
        self.queries = 0
        self._sums = np.zeros((len(STATISTICS), layers, heads), dtype=np.float64)  # (S, L, H)
        self._log_t_sum = 0.0  # Σ over queries of log T (T = its sentence's length)

    @property
    def uniform_entropy(self) -> float:
        """The mean entropy uniform attention would have: the pooled mean of log T."""
        return self._log_t_sum / self.queries if self.queries else 0.0

    def totals(self) -> tuple[np.ndarray, float]:
        """A copy of the raw sums (S, L, H) and of Σ log T: what `from_totals` takes back."""
        return self._sums.copy(), self._log_t_sum

    @classmethod
    def from_totals(
        cls, sums: np.ndarray, log_t_sum: float, sentences: int, queries: int
    ) -> StatsAccumulator:
        """An accumulator holding sums added up elsewhere (attnviz.partials: shards merged)."""
        made = cls(sums.shape[1], sums.shape[2])
        if sums.shape != made._sums.shape:
            raise ValueError(f"sums must be {made._sums.shape}, got {sums.shape}")
        made._sums[:] = sums
        made._log_t_sum = float(log_t_sum)
        made.sentences, made.queries = sentences, queries
        return made

    def add(self, attentions: np.ndarray, kinds: TokenKinds) -> None:
        """Add one sentence: attentions (L, H, T, T), rows are queries summing to 1."""
        values = np.asarray(attentions)
        if values.ndim != 4:
            raise ValueError(f"attentions must be (L, H, T, T), got shape {values.shape}")
        self.add_batch(values[:, None], [values.shape[-1]], [kinds])  # (L, 1, H, T, T)

    def add_batch(
        self, attentions: Any, lengths: Sequence[int], kinds: Sequence[TokenKinds]
    ) -> None:
        """Add a padded batch: attentions (L, B, H, Tmax, Tmax), a numpy array or a torch tensor.

        Sentence b is real in its first `lengths[b]` rows and columns; padding keys
        must carry weight 0 (padding query rows are ignored, whatever they hold).
        Every sum is accumulated in float64. A tensor on the CPU is read through a
        numpy view (no copy); one on another device (CUDA) is summed where it is, so
        only the (7, L, H) sums cross to the host.
        """
        values = _on_host(attentions)
        self._check_batch(values, lengths, kinds)
        if values.shape[1] == 0:
            return
        if isinstance(values, np.ndarray):
            self._sums += _sums_numpy(values, lengths, kinds)
        else:
            self._sums += _sums_torch(values, lengths, kinds)
        self.sentences += len(lengths)
        self.queries += int(sum(lengths))
        self._log_t_sum += float(sum(n * math.log(n) for n in lengths))

    def add_sums(self, sums: np.ndarray, lengths: Sequence[int]) -> None:
        """Add sums (S, L, H) computed elsewhere over sentences of `lengths` pieces: a long
        input's, accumulated a block of queries at a time (attnviz.measures.long)."""
        if sums.shape != self._sums.shape:
            raise ValueError(f"sums must be {self._sums.shape}, got {sums.shape}")
        self._sums += sums
        self.sentences += len(lengths)
        self.queries += int(sum(lengths))
        self._log_t_sum += float(sum(n * math.log(n) for n in lengths))

    def add_excluding(
        self,
        attentions: Any,
        lengths: Sequence[int],
        kinds: Sequence[TokenKinds],
        keeps: Sequence[np.ndarray],
        *,
        first_forced: bool,
    ) -> None:
        """Add a padded batch (L, B, H, Tmax, Tmax) with the pieces `keeps[b]` (n,) False
        for dropped as keys and queries, each row left renormalised (see the module).

        `first_forced` (a decoder): the first query kept sees only itself once the rest is
        dropped, so it is left out as `drop_first_queries` leaves out the first. A sentence
        with nothing left to measure adds nothing.
        """
        values = _on_host(attentions)
        self._check_batch(values, lengths, kinds)
        for b, (kind, keep) in enumerate(zip(kinds, keeps, strict=True)):
            kept = np.flatnonzero(np.asarray(keep, dtype=bool)[: lengths[b]])  # (n,)
            n = len(kept)
            if n - first_forced < 1:
                continue
            reduced = _kept_rows(values[:, b], kept, first_forced)  # (L, H, n, n)
            left = TokenKinds(cls=kind.cls[kept], sep=kind.sep[kept], punct=kind.punct[kept])
            self.add_batch(reduced[:, None], [n], [left])  # (L, 1, H, n, n)
            if first_forced:
                self.forget_first_queries([n])

    def forget_first_queries(self, lengths: Sequence[int]) -> None:
        """Take back the count of the first query of sentences of `lengths` pieces whose first
        row was added as zeros: q queries left, each with the uniform reference log(q + 1)."""
        self.queries -= len(lengths)
        self._log_t_sum += sum(math.lgamma(n + 1) - n * math.log(n) for n in lengths)

    def _check_batch(
        self, values: Any, lengths: Sequence[int], kinds: Sequence[TokenKinds]
    ) -> None:
        if values.ndim != 5 or values.shape[3] != values.shape[4]:
            raise ValueError(f"attentions must be (L, B, H, T, T), got shape {values.shape}")
        L, B, H, Tmax, _ = values.shape
        if (self.layers, self.heads) != (L, H):
            raise ValueError(
                f"attentions have {L} layers and {H} heads, the statistics {self.layers} "
                f"and {self.heads}"
            )
        if len(lengths) != B or len(kinds) != B:
            raise ValueError(f"{B} sentences but {len(lengths)} lengths and {len(kinds)} kinds")
        for n, kind in zip(lengths, kinds, strict=True):
            if not 1 <= n <= Tmax:
                raise ValueError(f"sentence length {n} is outside 1..{Tmax}")
            if len(kind) != n:
                raise ValueError(f"token kinds for {len(kind)} pieces, sentence has {n}")

    def drop_first_queries(self, kinds: Sequence[TokenKinds]) -> None:
        """Take back what `add_batch` counted for the first query of each of these sentences.

        For a decoder, whose `kinds` mark the first piece as `cls` (`token_kinds(first=True)`):
        its first query may see only itself, so its row is 1 on the first token, whatever
        the head does. That row added entropy 0, 1 to `cls` and `self`, 1 to `punct` when
        the first piece is punctuation, 0 to `sep`, `prev` and `next`, and log T to the
        uniform reference, which becomes log(q + 1) for each query q left: the entropy of a
        uniform row over the q + 1 keys it may see.
        """
        if not all(kind.cls[0] and not kind.sep[0] for kind in kinds):
            raise ValueError("drop_first_queries is for a decoder's kinds: token_kinds(first=True)")
        index = {name: s for s, name in enumerate(STATISTICS)}
        self._sums[index["cls"]] -= len(kinds)
        self._sums[index["self"]] -= len(kinds)
        self._sums[index["punct"]] -= sum(bool(kind.punct[0]) for kind in kinds)
        # Σ_{q<T} log(q + 1) = log T! replaces T log T (the first query's log 1 is 0).
        self.forget_first_queries([len(kind) for kind in kinds])

    def means(self) -> np.ndarray:
        """The pooled means, float64 (S, L, H) in the order of STATISTICS."""
        if not self.queries:
            raise AttnvizError(
                "head statistics need at least one sentence, and none was added: "
                "give a text with at least one non-empty line"
            )
        return self._sums / self.queries

    def result(self) -> list[HeadRecord]:
        """One record per head, in layer, head order, each with its label."""
        means = self.means()  # (S, L, H)
        reference = self.uniform_entropy
        records: list[HeadRecord] = []
        for layer in range(self.layers):
            for head in range(self.heads):
                values = {name: float(means[s, layer, head]) for s, name in enumerate(STATISTICS)}
                records.append(head_record(layer, head, values, reference))
        return records


def _on_host(attentions: Any) -> Any:
    """A numpy array for numpy input and CPU tensors (a view), the tensor itself elsewhere."""
    torch = sys.modules.get("torch")  # a tensor can only exist once torch is imported
    if torch is not None and isinstance(attentions, torch.Tensor):
        if attentions.device.type != "cpu":
            return attentions.detach()
        attentions = attentions.detach()
        if attentions.dtype != torch.float64:
            attentions = attentions.float()  # a no-op for float32; numpy has no bfloat16
        attentions = attentions.numpy()  # shares the tensor's memory
    values = np.asarray(attentions)
    return values if np.issubdtype(values.dtype, np.floating) else values.astype(np.float64)


def _kept_rows(values: Any, kept: np.ndarray, first_forced: bool) -> Any:
    """One sentence's (L, H, Tmax, Tmax) -> (L, H, n, n) over the `kept` pieces, each row
    renormalised over the keys kept; the first row zeroed when `first_forced` (it sees only
    itself: left out, see forget_first_queries). numpy in, float64 numpy out; a tensor stays
    a tensor on its device."""
    if isinstance(values, np.ndarray):
        cut = values[:, :, kept[:, None], kept].astype(np.float64)  # (L, H, n, n)
        sums = cut.sum(axis=-1, keepdims=True)  # (L, H, n, 1)
        reduced: Any = np.divide(cut, sums, out=np.zeros_like(cut), where=sums > 0)
    else:
        import torch

        index = torch.from_numpy(kept).to(values.device)
        cut = values.index_select(2, index).index_select(3, index).double()  # (L, H, n, n)
        sums = cut.sum(dim=-1, keepdim=True)  # (L, H, n, 1)
        reduced = torch.where(sums > 0, cut / sums.clamp_min(1e-300), 0.0)
    if first_forced:
        reduced[:, :, 0] = 0
    return reduced


def _sums_numpy(
    values: np.ndarray, lengths: Sequence[int], kinds: Sequence[TokenKinds]
) -> np.ndarray:
    """The (S, L, H) sums of one padded batch (L, B, H, Tmax, Tmax), in float64.

    One sentence of one layer at a time, cut to its real rows and columns (H, n, n):
    a block that has no padding to mask and is small enough to stay in the processor's
    cache through the passes over it. Each block is widened to float64 first, so
    p·log p and every sum are float64 (a float32 log is off by up to an ulp, and those
    errors do not cancel over millions of weights: about 1e-8 on a mean entropy).
    """
    L, _, H, Tmax, _ = values.shape
    sums = np.zeros((len(STATISTICS), L, H), dtype=np.float64)  # (S, L, H)
    tiny = np.finfo(np.float64).tiny  # log(tiny) * 0 = 0: 0·log 0 counts 0
    wide = np.empty(H * Tmax * Tmax, dtype=np.float64)
    logs = np.empty(H * Tmax * Tmax, dtype=np.float64)
    for b, (n, kind) in enumerate(zip(lengths, kinds, strict=True)):
        # The keys of each kind, cls, sep and punct: a few columns each, summed alone rather
        # than a pass over every weight for what each key receives.
        columns = [np.flatnonzero(k) for k in (kind.cls, kind.sep, kind.punct)]
        A = wide[: H * n * n].reshape(H, n, n)  # (H, n, n): real queries and keys only
        log_a = logs[: H * n * n].reshape(H, n, n)  # (H, n, n)
        for layer in range(L):
            np.copyto(A, values[layer, b, :, :n, :n])
            np.log(np.maximum(A, tiny, out=log_a), out=log_a)
            sums[0, layer] -= np.einsum("hqk,hqk->h", A, log_a)  # entropy: -Σ p·log p
            for s, keys in enumerate(columns, start=1):  # cls, sep, punct
                if len(keys):
                    sums[s, layer] += A[:, :, keys].sum(axis=(1, 2))  # (H,) from (H, n, k)
            sums[4, layer] += np.trace(A, axis1=1, axis2=2)  # Σ A[q, q]
            sums[5, layer] += np.trace(A, -1, axis1=1, axis2=2)  # Σ A[q, q-1]
            sums[6, layer] += np.trace(A, 1, axis1=1, axis2=2)  # Σ A[q, q+1]
    return sums


def _sums_torch(values: Any, lengths: Sequence[int], kinds: Sequence[TokenKinds]) -> np.ndarray:
    """`_sums_numpy` in torch, on the tensor's device, vectorised over the batch.

    For attentions on a GPU, where a loop over sentences would launch thousands of
    small kernels and copying the batch to the host would cost more than the sums.
    """
    import torch

    L, B, H, Tmax, _ = values.shape
    device, f64 = values.device, torch.float64
    real = (
        torch.arange(Tmax, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]
    )
    q_real = real[:, None, :, None]  # (B, 1, Tmax, 1): real query rows
    key_kinds = torch.zeros(B, Tmax, 3, dtype=f64)  # (B, Tmax, 3): cls, sep, punct
    for b, (n, kind) in enumerate(zip(lengths, kinds, strict=True)):
        key_kinds[b, :n] = torch.from_numpy(np.stack([kind.cls, kind.sep, kind.punct], axis=-1))
    key_kinds = key_kinds.to(device)
    tiny = torch.finfo(f64).tiny  # as in _sums_numpy
    sums = torch.zeros(len(STATISTICS), L, H, dtype=f64, device=device)  # (S, L, H)
    for layer in range(L):
        # Padding queries dropped, even NaN ones; padding keys weigh 0.
        A = torch.where(q_real, values[layer].to(f64), 0)  # (B, H, Tmax, Tmax)
        sums[0, layer] = -(A * A.clamp_min(tiny).log()).sum(dim=(0, 2, 3))  # entropy
        to_key = A.sum(dim=2)  # (B, H, Tmax): the weight each key receives
        sums[1:4, layer] = torch.einsum("bhk,bkc->ch", to_key, key_kinds)  # cls, sep, punct
        for s, offset in ((4, 0), (5, -1), (6, 1)):  # self, prev, next
            sums[s, layer] = A.diagonal(offset, -2, -1).sum(dim=(0, 2))
    return sums.cpu().numpy()


def decoder_records(records: Sequence[HeadRecord], uniform_entropy: float) -> list[HeadRecord]:
    """An encoder's records as a decoder's: `cls` (the first piece's share) becomes `first`;
    `sep` (no separator) and `next` (always hidden) go; each head is labelled again."""
    out: list[HeadRecord] = []
    for record in records:
        values = {"entropy": record["entropy"], "first": record.get("cls", 0.0)}
        values |= {key: record[key] for key in ("punct", "self", "prev")}
        out.append(head_record(record["layer"], record["head"], values, uniform_entropy))
    return out


def head_record(
    layer: int, head: int, values: dict[str, float], uniform_entropy: float
) -> HeadRecord:
    """One head's record: its statistics `values` (an encoder's or a decoder's, in table
    order) and the label they give it."""
    label = label_for(values, uniform_entropy)
    return cast("HeadRecord", {"layer": layer, "head": head, **values, "label": label})


def statistics_of(records: Sequence[HeadRecord]) -> tuple[str, ...]:
    """The statistics the records hold, in table order: an encoder's or a decoder's."""
    if records and "first" in records[0]:
        return ("entropy", *DECODER_SHARES)
    return STATISTICS


# ---------------------------------------------------------------- labels and sorting


def label_for(values: dict[str, float], uniform_entropy: float) -> str:
    """The head's label from its statistics (see DOMINANT_SHARE and BROAD_FRACTION)."""
    best: tuple[float, str] | None = None
    for key, label in _PATTERNS:
        if key not in values:  # a decoder has no [CLS] or [SEP], an encoder no `first`
            continue
        share = values[key]
        if share > DOMINANT_SHARE and (best is None or share > best[0]):
            best = (share, label)
    if best is not None:
        return best[1]
    if uniform_entropy > 0 and values["entropy"] >= BROAD_FRACTION * uniform_entropy:
        return BROAD
    return MIXED


def check_sort_column(column: str, *, decoder: bool) -> None:
    """Refuse a column the model's statistics do not have, naming the one meant."""
    why = {
        "cls": "a decoder has no [CLS]; its first token is column 'first'",
        "sep": "a decoder has no [SEP]; sort by another column",
        "next": "a decoder's mask hides the next token; sort by another column",
    }
    if decoder and column in why:
        raise BadInput(f"cannot sort by {column!r}: {why[column]}")
    if not decoder and column == "first":
        raise BadInput("cannot sort by 'first': it is a decoder's column; an encoder's is 'cls'")


def sort_records(
    records: Iterable[HeadRecord], column: str, top: int | None = None
) -> list[HeadRecord]:
    """Records ordered by `column`, the first `top` of them (None: all).

    "layer" keeps layer, head order. Shares sort descending (the heads that attend
    most to that kind of token first). Entropy sorts ascending: the most focused
    heads first, the broadest last. Ties keep layer, head order.
    """
    if column not in SORT_COLUMNS:
        raise BadInput(f"cannot sort by {column!r}: use one of {', '.join(SORT_COLUMNS)}")
    if top is not None:
        top = check_range(top, "top", TOP)
    records = list(records)
    if records:  # an encoder's records, or a decoder's
        check_sort_column(column, decoder="first" in records[0])
    ordered = sorted(records, key=lambda r: (r["layer"], r["head"]))
    if column == "entropy":
        ordered.sort(key=lambda r: r["entropy"])
    elif column != "layer":
        ordered.sort(key=lambda r: r[column], reverse=True)  # type: ignore[literal-required]
    return ordered if top is None else ordered[:top]


# ---------------------------------------------------------------- the result


@dataclass(frozen=True, eq=False, repr=False)
class HeadStats:
    """Head statistics over a corpus: one record per head, in layer, head order.

    `attnviz.head_stats` returns it. `rich.print(stats)` prints the table `attnviz
    stats` prints; `figure`/`save` draw a layers × heads panel per statistic.
    """

    records: list[HeadRecord]
    model: str  # the model's name as titles show it
    layers: int
    heads: int
    sentences: int
    queries: int  # query positions pooled, special tokens included
    dropped: int = 0  # pieces cut off by truncation, over all sentences
    first_token: str | None = None  # a decoder's: the piece every sentence starts with (BOS)
    lang: str = "en"  # the language of its table's and figure's labels: "en" or "pt"
    exclude: tuple[str, ...] = ()  # dropped as keys and queries, rows renormalised

    def __repr__(self) -> str:
        heads = f"{self.layers}×{self.heads} heads"
        return f"<HeadStats {self.model}: {heads}, {self.sentences} sentences>"

    @property
    def decoder(self) -> bool:
        """Whether these are a decoder's statistics (`first` instead of `cls`, `sep`, `next`)."""
        return bool(self.records) and "first" in self.records[0]

    @property
    def title(self) -> str:
        key = "stats_title_one" if self.sentences == 1 else "stats_title"
        title = lexicon.label(
            self.lang, key, model=self.model, n=self.sentences, queries=self.queries
        )
        return title + exclusion_note(self.exclude, self.lang)

    def sorted(self, by: str = "layer", top: int | None = None) -> list[HeadRecord]:
        """The records ordered by a column (see `sort_records`), the first `top` of them."""
        return sort_records(self.records, by, top)

    def record(self, layer: int, head: int) -> HeadRecord:
        """The statistics of one head (0-based; negative counts from the end)."""
        layer = resolve_index(layer, self.layers, "layer")
        head = resolve_index(head, self.heads, "head")
        return self.records[layer * self.heads + head]

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", shared_scale: bool = True
    ) -> Figure:
        """One layers × heads heatmap per statistic.

        `shared_scale`: the six share panels use one colour scale (0 .. the largest
        share), so a 0.11 looks weaker than a 0.95; entropy keeps its own. False gives
        each panel its own scale.
        """
        from attnviz.render.stats_image import stats_figure

        return stats_figure(
            self.records,
            self.layers,
            self.heads,
            title=self.title,
            statistics=statistics_of(self.records),
            cmap=cmap,
            theme=theme,
            shared_scale=shared_scale,
            lang=self.lang,
        )

    def save(
        self,
        path: str | Path,
        *,
        dpi: int = 200,
        cmap: str = "viridis",
        theme: str = "light",
        transparent: bool = False,
        shared_scale: bool = True,
    ) -> Path:
        """Write the figure as .png, .svg or .pdf, all or nothing."""

        def write(path: Path, style: ImageStyle) -> None:
            figure = self.figure(cmap=cmap, theme=theme, shared_scale=shared_scale)
            write_figure(figure, path, style)

        return save_image(path, ImageStyle(dpi, cmap, theme, transparent), write)

    def to_list(self) -> list[dict[str, Any]]:
        """The records as plain dicts, as `attnviz stats --json` prints them."""
        return [dict(record) for record in self.records]

    def table(self, records: Sequence[HeadRecord] | None = None) -> StatsTable:
        """`records` (default: all; e.g. `self.sorted("cls", 10)`) as a terminal table, the
        share that named each head in bold."""
        from attnviz.render.stats import StatsTable

        shown = self.records if records is None else list(records)
        return StatsTable(
            shown,
            title=self.title,
            statistics=statistics_of(shown),
            label_shares=LABEL_SHARES,
            first_token=self.first_token,
            lang=self.lang,
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table()

    def _repr_html_(self) -> str:
        """A notebook cell that ends in head statistics shows the table `attnviz stats`
        prints, as HTML (a cell ending in `figure()` shows the panels)."""
        from attnviz.render.notebook import MAX_ROWS, more_rows, rich_html

        left = len(self.records) - MAX_ROWS
        if left <= 0:
            return rich_html(self.table())
        how = "rich.print(stats.table(stats.sorted(by, top)))"
        return rich_html(self.table(self.records[:MAX_ROWS]), more_rows(left, how, self.lang))

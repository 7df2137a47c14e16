"""Views made for length: what is kept of a long input's attention, reduced block by block.

A long input's whole attention (L, H, T, T) is never held (at 8,192 pieces, 30 layers × 9
heads would be 65 GB). The model (attnviz.model.blocked) hands each layer's weights over in
blocks of queries, (H, b, K) for rows start..start+b (keys past K weigh 0: a causal
block stops at its last query), and `LongReducer` keeps only:

- `pooled` (L, H, n, n): blocks of `pool` pieces; for each block of queries × block of
  keys, the share of the queries' attention that falls in the keys (the mean over the
  block's queries of the sum over its keys: a row of blocks sums to 1), or the max weight
  of its cells; the last block may be shorter;
- the distance profile (L, H, bins): the mean weight of the (query, key) pairs at each
  distance i − j (|i − j| for an encoder), on log bins 0, 1, 2, 3–4, 5–8, 9–16, ...;
  a decoder counts the pairs j ≤ i (a key the mask hides after a sliding window is a
  pair of weight 0);
- `sink` (L, H): the share of queries that put over half their weight on position 0 (a
  decoder's first query, which sees only position 0, left out);
- `rows` (L, H, T) of one query, when asked;
- the head statistics' sums (attnviz.measures.stats), when token kinds are given.

Each is the same as computing it from the whole array (tests/test_long_context.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.limits import check_choice, check_range

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.measures.query import QueryRow
    from attnviz.measures.views import AttentionView, HeadsView
    from attnviz.text.pieces import TokenKinds

POOL = (1, 1_000_000)  # --pool: pieces per block
POOL_BY = ("mean", "max")
# Queries per block: 9 heads × 256 queries × 8,192 keys is 75 MB of float32 weights.
BLOCK = 256


def distance_bins(T: int) -> list[tuple[int, int]]:
    """The (first, last) distance of each bin for inputs of T pieces: (0, 0), (1, 1), (2, 2),
    (3, 4), (5, 8), ... up to T − 1."""
    bins = [(0, 0)]
    low = 1
    while low <= max(T - 1, 0):
        high = 1 if low == 1 else 2 * (low - 1)
        bins.append((low, min(high, T - 1)))
        low = high + 1
    return bins


def bin_label(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def pool_edges(T: int, pool: int) -> list[tuple[int, int]]:
    """The (first, last) piece of each block of `pool` pieces."""
    return [(s, min(T, s + pool) - 1) for s in range(0, T, pool)]


def hidden_blocks(T: int, pool: int, causal: bool, window: int | None) -> np.ndarray | None:
    """(n, n) True where no query of a block of `pool` queries may see any key of a block of
    keys: keys all after the queries (`causal`), or all `window` or more pieces behind them
    (a sliding window); None when no block is hidden. web/long.js greys the same blocks."""
    edges = np.array(pool_edges(T, pool))  # (n, 2): first and last piece of each block
    first_query, last_key = edges[:, 0][:, None], edges[:, 1][None, :]  # (n, 1), (1, n)
    n = len(edges)
    hidden = np.zeros((n, n), dtype=bool)  # (n, n)
    if causal:
        hidden |= np.arange(n)[None, :] > np.arange(n)[:, None]  # key blocks after the queries
    if window is not None:
        hidden |= first_query - last_key >= window
    return hidden if hidden.any() else None


def check_pool(pool: object, pool_by: object) -> tuple[int, str]:
    """`pool` and `pool_by` checked, in the caller's words."""
    return check_range(pool, "pool", POOL), check_choice(pool_by, POOL_BY, "pool_by")


class LongReducer:
    """Reduces blocks of one input's weights as the model hands them over (see the module)."""

    def __init__(
        self,
        layers: int,
        heads: int,
        T: int,
        *,
        pool: int | None = None,
        pool_by: str = "mean",
        causal: bool = True,
        query: int | None = None,
        kinds: TokenKinds | None = None,
        keep: np.ndarray | None = None,
        first_forced: bool = False,
        profile: bool = True,
    ) -> None:
        self.L, self.H, self.T, self.causal = layers, heads, T, causal
        self.pool, self.pool_by, self.query = pool, pool_by, query
        self.bins = distance_bins(T)
        nb = len(self.bins)
        self.distance_sums = np.zeros((layers, heads, nb))  # (L, H, bins)
        self.sink_queries = np.zeros((layers, heads))  # (L, H)
        n = 0 if pool is None else -(-T // pool)
        # (L, H, n, n); weights are ≥ 0, so a max starts at 0 as a sum does: blocks of keys
        # a causal block of queries never reaches stay 0
        self.pooled_acc = np.zeros((layers, heads, n, n))
        self.rows = np.zeros((layers, heads, T), dtype=np.float32) if query is not None else None
        self.kinds = kinds
        # The statistics without the pieces `keep` (T,) marks False, rows renormalised, the
        # first query kept left out when `first_forced` (attnviz.measures.stats).
        self.kept = None if keep is None else np.flatnonzero(keep)  # (n,) positions kept
        self.first_forced = first_forced
        self.stats_sums = np.zeros((7, layers, heads)) if kinds is not None else None
        self.distances = profile
        self._key_kinds: Any = None
        self._edges: Any = None
        self._buffer: Any = None

    @property
    def block(self) -> int:
        """Queries per block the model should use: `BLOCK`, whatever the pool (a block of
        queries may start inside a block of the pooled map)."""
        return BLOCK

    def __call__(self, layer: int, start: int, weights: torch.Tensor) -> None:
        """Take rows start.. of `layer`: weights (H, b, K) float32, keys past K weigh 0."""
        import torch

        _H, b, K = weights.shape
        rows = torch.arange(start, start + b)  # (b,) the queries' positions
        # Each row's running sum from its second key on (one pass), C[j] = w[1] + .. + w[j]
        # and C[0] = 0: any span of keys j0..j1 of a row is then C[j1] − C[j0 − 1], plus w[0]
        # when it starts at 0, for the distance bins and the blocks of keys alike. Leaving
        # the first key out keeps the sums exact where a sink holds nearly all of a row.
        running = None
        if self.distances or (self.pool is not None and self.pool_by == "mean"):
            running = self._scratch(weights)  # (H, b, K)
            running[:, :, 0] = 0.0
            torch.cumsum(weights[:, :, 1:], dim=-1, out=running[:, :, 1:])
        if self.distances:
            self._distances(layer, weights, running, rows)  # type: ignore[arg-type]
        parked = weights[:, :, 0] > 0.5  # (H, b): the queries putting over half on position 0
        if self.causal and start == 0:
            parked[:, 0] = False  # a decoder's first query sees only position 0: forced
        self.sink_queries[layer] += parked.sum(dim=1).double().numpy()
        if self.pool is not None:
            self._pool(layer, start, weights, running)
        if self.rows is not None and start <= self.query < start + b:  # type: ignore[operator]
            self.rows[layer, :, :K] = weights[:, self.query - start].numpy()  # type: ignore[operator]
        if self.stats_sums is not None:  # last: it writes over the running sums
            self._stats(layer, start, weights)

    def _scratch(self, like: torch.Tensor) -> torch.Tensor:
        """A float32 tensor shaped as `like` (H, b, K) to write into, the same memory for
        every block: a new one per block would be fresh pages from the system each time."""
        import torch

        size = like.numel()
        if self._buffer is None or self._buffer.numel() < size:
            self._buffer = torch.empty(size)
        return self._buffer[:size].view(like.shape)

    def _distances(
        self, layer: int, w: torch.Tensor, running: torch.Tensor, rows: torch.Tensor
    ) -> None:
        """Per bin, the sum of the weights at those distances, from the rows' running sums
        (H, b, K) (see `__call__`): a bin of distances first..last is the keys
        i − last..i − first before query i (and i + first..i + last after it, in an
        encoder)."""
        import torch

        H, _b, K = running.shape
        first, last = self._bin_edges  # (bins,) each
        i = rows[:, None]  # (b, 1)
        spans = [(i - last, i - first)]  # (b, bins) each: the keys before the query
        if not self.causal:
            spans.append((i + first, i + last))  # and after it
        for n, (low, high) in enumerate(spans):
            low, high = low.clamp(min=0), high.clamp(max=K - 1)  # (b, bins): inside the row
            empty = high < low
            if n:
                empty[:, 0] = True  # distance 0 is counted once
            upto_high = running.gather(2, high.clamp(0, K - 1)[None].expand(H, -1, -1))
            before_low = running.gather(2, (low - 1).clamp(0, K - 1)[None].expand(H, -1, -1))
            # a span from key 0: nothing before it, and the first key's own weight added
            before_low = torch.where((low == 0)[None], -w[:, :, :1], before_low)
            spans_sum = upto_high.double() - before_low.double()  # (H, b, bins)
            spans_sum.masked_fill_(empty[None], 0.0)
            self.distance_sums[layer] += spans_sum.sum(dim=1).numpy()

    @property
    def _bin_edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        if self._edges is None:
            self._edges = (
                torch.tensor([f for f, _ in self.bins]),
                torch.tensor([last for _, last in self.bins]),
            )
        return self._edges

    def _pairs(self) -> np.ndarray:
        """(bins,): the (query, key) pairs at each distance bin: T − d pairs at distance d
        (twice for d ≥ 1 in an encoder, which reads both ways)."""
        counts = np.zeros(len(self.bins))
        for k, (first, last) in enumerate(self.bins):
            d = np.arange(first, last + 1)
            per = self.T - d
            counts[k] = per.sum() if self.causal else (per * np.where(d > 0, 2, 1)).sum()
        return counts

    def _pool(self, layer: int, start: int, w: torch.Tensor, running: torch.Tensor | None) -> None:
        """Blocks of `pool` queries × `pool` keys: their sum (mean, from the rows' running
        sums `running`) or their max."""
        import torch

        H, b, K = w.shape
        p = self.pool or 1
        used = -(-K // p)  # key blocks with a key before K; those after weigh 0
        if self.pool_by == "mean":  # a row's sum over keys k0..k1 is C[k1] − C[k0 − 1]
            assert running is not None
            ends = [running[:, :, p - 1 :: p]]  # (H, b, K // p): at each block's last key
            if K % p:  # the last key block, cut short by K
                ends.append(running[:, :, K - 1 :])  # (H, b, 1)
            upto = torch.cat(ends, dim=2).double().numpy()  # (H, b, used)
            keys = np.diff(upto, axis=2, prepend=0.0)  # (H, b, used): each row's sum per block
            keys[:, :, 0] += w[:, :, 0].double().numpy()  # the running sums start at key 1
        else:
            whole = K // p
            grouped = w[:, :, : whole * p].reshape(H, b, whole, p)  # (H, b, whole, p)
            maxima = [grouped.amax(dim=-1)]  # (H, b, whole): each row's max per key block
            if K % p:  # the last key block, cut short by K
                maxima.append(w[:, :, whole * p :].amax(dim=-1, keepdim=True))  # (H, b, 1)
            keys = torch.cat(maxima, dim=2).double().numpy()  # (H, b, used)
        # the rows of each block of the map together: the first rows may end a block that
        # began in the previous block of queries, the last may begin one the next ends
        rows = np.arange(start, start + b)  # (b,) the queries' positions
        starts = np.flatnonzero((rows % p == 0) | (rows == start))  # (q,) where a block begins
        first = start // p
        target = self.pooled_acc[layer, :, first : first + len(starts), :used]  # (H, q, used)
        if self.pool_by == "max":
            np.maximum(target, np.maximum.reduceat(keys, starts, axis=1), out=target)
        else:
            target += np.add.reduceat(keys, starts, axis=1)

    def _stats(self, layer: int, start: int, w: torch.Tensor) -> None:
        """The head statistics' sums (entropy, cls, sep, punct, self, prev, next) of these rows:
        over the pieces kept, each row renormalised, when some are excluded. Each row's sums
        are float32 (at most T terms), added up over rows and blocks in float64."""
        import torch

        assert self.kinds is not None and self.stats_sums is not None
        _H, b, K = w.shape
        if self._key_kinds is None:
            kinds = self.kinds
            stacked = np.stack([kinds.cls, kinds.sep, kinds.punct], axis=-1).astype(np.float32)
            self._key_kinds = torch.from_numpy(stacked)  # (T, 3)
        A = w  # (H, b, K)
        rows = torch.arange(b) + start  # (b,): each row's query position
        keys = torch.arange(K)  # (K,): each column's key position
        key_kinds = self._key_kinds[:K]  # (K, 3)
        if self.kept is not None:
            kept = torch.from_numpy(self.kept)  # (n,)
            rows = kept[(kept >= start) & (kept < start + b)]  # (b',): queries kept here
            keys = kept[kept < K]  # (K',): a prefix of `kept`
            A = A[:, rows - start][:, :, keys]  # (H, b', K')
            total = A.sum(-1, keepdim=True)  # (H, b', 1)
            A = torch.where(total > 0, A / total, 0.0)
            if self.first_forced and len(rows) and rows[0] == kept[0]:
                A[:, 0] = 0  # sees only itself once the rest is dropped: left out
            key_kinds = key_kinds[keys]  # (K', 3)
            rows = torch.searchsorted(kept, rows)  # (b',): as positions among the kept
            keys = torch.arange(len(keys))  # (K',)
        sums = self.stats_sums[:, layer]  # (7, H)
        # −Σ p·log p; a weight of 0 adds 0 (its log is taken of the smallest float instead)
        logs = torch.clamp(A, min=torch.finfo(torch.float32).tiny, out=self._scratch(A))
        terms = torch.mul(logs.log_(), A, out=logs)  # (H, b', K')
        sums[0] -= terms.sum(dim=-1).double().sum(dim=1).numpy()  # entropy
        to_key = A.sum(dim=1).double()  # (H, K)
        sums[1:4] += (to_key @ key_kinds.double()).T.numpy()  # (3, H): cls, sep, punct
        local = torch.arange(len(rows))
        for s, offset in ((4, 0), (5, -1), (6, 1)):  # self, prev, next: key = query + offset
            at = rows + offset  # (b,): the key's column
            ok = (at >= 0) & (at < len(keys))
            sums[s] += A[:, local[ok], at[ok]].double().sum(dim=1).numpy()

    # ------------------------------------------------------------ results

    def pooled(self) -> np.ndarray:
        """(L, H, n, n): the max of each block of the attention, or the share of a query's
        attention that falls in each block of keys, averaged over the block's queries (the
        mean over its queries of the sum over its keys): each row of blocks sums to 1, as a
        row of weights does, whatever hides a cell (a decoder's mask, a sliding window)."""
        if self.pool_by == "max":
            return self.pooled_acc.astype(np.float32)
        edges = np.array(pool_edges(self.T, self.pool or 1))  # (n, 2)
        queries = (edges[:, 1] - edges[:, 0] + 1).astype(np.float64)  # (n,) per query block
        return (self.pooled_acc / queries[:, None]).astype(np.float32)  # (L, H, n, n)

    def profile(self) -> np.ndarray:
        """(L, H, bins): the mean weight of a (query, key) pair at each distance."""
        pairs = np.maximum(self._pairs(), 1)
        return (self.distance_sums / pairs).astype(np.float32)

    def sink(self) -> np.ndarray:
        """(L, H): the share of queries that put over half their weight on position 0."""
        queries = self.T - 1 if self.causal else self.T  # a decoder's first is left out
        return (self.sink_queries / max(queries, 1)).astype(np.float32)


@dataclass(frozen=True, eq=False, repr=False)
class LongResult:
    """What was kept of a long input's attention (see the module): arrays and their labels."""

    model: str
    T: int
    layers: int
    heads: int
    pool: int | None
    pool_by: str
    pooled: np.ndarray | None  # (L, H, n, n), or None without `pool`
    pool_labels: list[str]  # "0–63", "64–127", ...
    profile: np.ndarray  # (L, H, bins)
    bin_labels: list[str]  # "0", "1", "2", "3–4", ...
    sink: np.ndarray  # (L, H)
    query: int | None = None
    query_label: str = ""
    rows: np.ndarray | None = None  # (L, H, T): the query's weights, every layer and head
    labels: list[str] | None = None  # the pieces, for `rows`
    causal: bool = True  # a decoder's: keys after the query are masked
    windows: tuple[int | None, ...] = ()  # a decoder's sliding window per layer; (): none

    def head_kinds(self, layer: int) -> list[str]:
        """Each head of `layer` in one word, by where most of its weight lies: "sink" (over
        half its queries put over half their weight on position 0), "self" (distance 0),
        "previous" (1), "local" (2–8), else "global"."""
        shares = self.profile[layer] * self.bin_widths  # (H, bins): the weight of a row per bin
        kinds = []
        for h in range(self.heads):
            top = int(np.argmax(shares[h]))
            if self.sink[layer, h] > 0.5:
                kinds.append("sink")
            else:
                kinds.append(
                    ["self", "previous"][top] if top < 2 else "local" if top <= 4 else "global"
                )
        return kinds

    @property
    def bin_widths(self) -> np.ndarray:
        """(bins,): how many distances each bin holds (a query has at most that many keys
        in it): the mean weight times this is the bin's share of a row."""
        widths = []
        for name in self.bin_labels:
            first, _, last = name.partition("–")
            widths.append(int(last or first) - int(first) + 1)
        return np.array(widths, dtype=np.float64)

    # ------------------------------------------------------------ drawing

    def _pooled_or_refuse(self) -> np.ndarray:
        if self.pooled is None:
            raise BadInput("this result has no pooled map: analyse with {pool}=N", param="pool")
        return self.pooled

    @property
    def _axes(self) -> tuple[str, str, str]:
        """A pooled view's axes and colour bar, in the lexicon's words."""
        return ("query_blocks", "key_blocks", "pooled_max" if self.pool_by == "max" else
                "pooled_share")  # fmt: skip

    def _title(self, what: str, lang: str = "en") -> str:
        from attnviz.render.long import pooled_title

        return pooled_title(self.model, self.T, what, self.pool or 1, self.pool_by, lang)

    def view(
        self, layer: int = -1, head: int | None = None, *, lang: str | None = None
    ) -> AttentionView:
        """One layer's head (or head mean when None), pooled, as a view that draws itself;
        its title and labels in `lang` ("en" or "pt")."""
        from attnviz.language import resolve_lang
        from attnviz.lexicon import label
        from attnviz.limits import resolve_index
        from attnviz.measures.views import AttentionView

        lang = resolve_lang(lang)

        pooled = self._pooled_or_refuse()
        layer = resolve_index(layer, self.layers, "layer")
        if head is not None:
            head = resolve_index(head, self.heads, "head")
        matrix = pooled[layer].mean(axis=0) if head is None else pooled[layer, head]
        hidden = self._hidden(layer)
        which = (
            label(lang, "pooled_head_mean") if head is None else label(lang, "head_n", head=head)
        )
        return AttentionView(
            matrix=matrix,
            labels=self.pool_labels,
            tokens=self.pool_labels,
            title=self._title(f"{label(lang, 'layer_n', layer=layer)} · {which}", lang),
            model=self.model,
            layer=layer,
            head=head,
            units="tokens",
            pair_start=None,
            masked=hidden,
            lang=lang,
            axes=self._axes,
            scale="linear" if self.pool_by == "max" else "sqrt",
        )

    def _hidden(self, layer: int) -> np.ndarray | None:
        """(n, n): the blocks of `layer` the model cannot see (see `hidden_blocks`)."""
        window = self.windows[layer] if self.windows else None
        return hidden_blocks(self.T, self.pool or 1, self.causal, window)

    def heads_view(self, layer: int = -1, *, lang: str | None = None) -> HeadsView:
        """Every head of one layer, pooled; its titles and labels in `lang`."""
        from attnviz.language import resolve_lang
        from attnviz.lexicon import label
        from attnviz.limits import resolve_index
        from attnviz.measures.views import HeadsView

        lang = resolve_lang(lang)
        pooled = self._pooled_or_refuse()
        layer = resolve_index(layer, self.layers, "layer")
        return HeadsView(
            matrices=pooled[layer],
            labels=self.pool_labels,
            tokens=self.pool_labels,
            panel_titles=[label(lang, "head_n", head=h) for h in range(self.heads)],
            title=self._title(label(lang, "layer_n", layer=layer), lang),
            model=self.model,
            layer=layer,
            heads=list(range(self.heads)),
            units="tokens",
            pair_start=None,
            masked=self._stacked_hidden([layer]),
            lang=lang,
            axes=self._axes,
            scale="linear" if self.pool_by == "max" else "sqrt",
        )

    def pooled_dict(
        self, layer: int | None = None, head: int | None = None, *, every_head: bool = False
    ) -> dict[str, Any]:
        """What a pooled view shows, as data. Always `model`, `pieces`, `pool`, `pool_by` and
        `blocks` (the first and last piece of each block). For one `layer` (`show`): its
        `head` (None: the mean of its heads) as `"layer", "head", "map", "masked"`; with
        `every_head` (`heads`): `"layer", "masked", "heads": [{"head", "map"}]`; with no
        layer (`model`): `"layers": [{"layer", "masked", "heads": [{"head", "map"}]}]`.
        A map's row is a block of queries: with `pool_by` "mean" the share of their attention
        in each block of keys (a row sums to 1); `masked` (or null) marks the blocks the model
        cannot see."""
        from attnviz.limits import resolve_index

        pooled = self._pooled_or_refuse()
        found: dict[str, Any] = {
            "model": self.model,
            "pieces": self.T,
            "pool": self.pool,
            "pool_by": self.pool_by,
            "blocks": [list(edge) for edge in pool_edges(self.T, self.pool or 1)],
        }

        def as_list(a: np.ndarray) -> list[list[float]]:
            return np.round(a.astype(np.float64), 6).tolist()

        def masked(at: int) -> list[list[bool]] | None:
            hidden = self._hidden(at)
            return None if hidden is None else hidden.tolist()

        def every(at: int) -> list[dict[str, Any]]:
            return [{"head": h, "map": as_list(pooled[at, h])} for h in range(self.heads)]

        if layer is None:
            found["layers"] = [
                {"layer": at, "masked": masked(at), "heads": every(at)} for at in range(self.layers)
            ]
            return found
        layer = resolve_index(layer, self.layers, "layer")
        if every_head:
            return {**found, "layer": layer, "masked": masked(layer), "heads": every(layer)}
        if head is not None:
            head = resolve_index(head, self.heads, "head")
        matrix = pooled[layer].mean(axis=0) if head is None else pooled[layer, head]
        return {**found, "layer": layer, "head": head, "map": as_list(matrix),
                "masked": masked(layer)}  # fmt: skip

    def _stacked_hidden(self, layers: Sequence[int]) -> np.ndarray | None:
        """(len(layers)·H, n, n): each panel's hidden blocks, heads of a layer alike."""
        per_layer = [self._hidden(layer) for layer in layers]
        if all(h is None for h in per_layer):
            return None
        n = len(self.pool_labels)
        none = np.zeros((n, n), dtype=bool)
        return np.stack([none if h is None else h for h in per_layer for _ in range(self.heads)])

    def model_view(self, *, lang: str | None = None) -> HeadsView:
        """Every layer (rows) and head (columns), pooled; its titles and labels in `lang`."""
        from attnviz.language import resolve_lang
        from attnviz.lexicon import label
        from attnviz.measures.views import HeadsView

        lang = resolve_lang(lang)
        pooled = self._pooled_or_refuse()
        L, H, n, _ = pooled.shape
        return HeadsView(
            matrices=pooled.reshape(L * H, n, n),  # (L·H, n, n)
            labels=self.pool_labels,
            tokens=self.pool_labels,
            panel_titles=[f"L{layer} H{head}" for layer in range(L) for head in range(H)],
            title=self._title(label(lang, "pooled_layers_heads", layers=L, heads=H), lang),
            model=self.model,
            layer=None,
            heads=list(range(H)),
            units="tokens",
            pair_start=None,
            columns=H,
            masked=self._stacked_hidden(range(L)),
            lang=lang,
            axes=self._axes,
            scale="linear" if self.pool_by == "max" else "sqrt",
        )

    def row(self, layer: int = -1, head: int | None = None, *, lang: str | None = None) -> QueryRow:
        """The query's row (`query=` when analysed) in one layer's head, or the head mean,
        as a list of pieces, largest weight first (what `show --query` prints); the keys the
        model cannot see are marked masked; its title in `lang`."""
        from attnviz.language import resolve_lang
        from attnviz.lexicon import label
        from attnviz.limits import resolve_index
        from attnviz.measures.query import QueryRow

        lang = resolve_lang(lang)

        if self.rows is None or self.labels is None or self.query is None:
            raise BadInput("this result has no query row: analyse with {query}=WORD", param="query")
        layer = resolve_index(layer, self.layers, "layer")
        if head is not None:
            head = resolve_index(head, self.heads, "head")
        weights = self.rows[layer].mean(axis=0) if head is None else self.rows[layer, head]
        order = np.argsort(-weights, kind="stable")
        hidden = np.zeros(self.T, dtype=bool)  # (T,): the keys the model hides from the query
        if self.causal:
            keys = np.arange(self.T)
            hidden |= keys > self.query
            window = self.windows[layer] if self.windows else None
            if window is not None:
                hidden |= self.query - keys >= window
        which = (
            label(lang, "pooled_head_mean") if head is None else label(lang, "head_n", head=head)
        )
        what = f"{label(lang, 'layer_n', layer=layer)} · {which}"
        query = f"{self.labels[self.query]} #{self.query}"
        return QueryRow(
            query=self.labels[self.query],
            index=self.query,
            keys=[f"{self.labels[j]} #{j}" for j in order],
            indices=[int(j) for j in order],
            weights=weights[order],
            title=label(
                lang,
                "pooled_row_title",
                model=self.model,
                pieces=f"{self.T:,}",
                what=what,
                query=query,
            ),
            model=self.model,
            layer=layer,
            head=head,
            units="tokens",
            masked=hidden[order] if hidden.any() else None,
            lang=lang,
        )

    def profile_table(
        self, layers: Sequence[int] | None = None, *, lang: str | None = None, width: int = 80
    ) -> Any:
        """A rich Table of each head's distance profile (the share of its weight at each
        distance, in %), sink share and kind; `layers` (default: all); `lang` "en" or "pt";
        made to fit `width` columns (the bins' headers shortened when they do not)."""
        from attnviz.language import resolve_lang
        from attnviz.limits import resolve_index
        from attnviz.render.long import long_profile_title, profile_table

        lang = resolve_lang(lang)
        chosen = (
            list(range(self.layers))
            if layers is None
            else [resolve_index(x, self.layers, "layer") for x in layers]
        )
        kinds = [self.head_kinds(x) if x in chosen else [] for x in range(self.layers)]
        title = long_profile_title(self.model, self.T, lang)
        return profile_table(
            title,
            self.profile,
            self.bin_labels,
            self.bin_widths,
            self.sink,
            kinds,
            chosen,
            lang,
            width=width,
        )

    def profile_figure(self, cmap: str = "viridis", *, lang: str | None = None) -> Figure:
        """The distance profiles as one heatmap: heads × distance bins; `lang` "en" or "pt"."""
        from attnviz.language import resolve_lang
        from attnviz.render.long import long_profile_title, profile_figure

        lang = resolve_lang(lang)
        title = long_profile_title(self.model, self.T, lang)
        widths = self.bin_widths
        return profile_figure(title, self.profile, self.bin_labels, widths, cmap=cmap, lang=lang)

    def html(
        self,
        view: str = "matrix",
        *,
        layer: int = -1,
        head: int | None = None,
        theme: str = "auto",
        lang: str | None = None,
    ) -> str:
        """One self-contained offline HTML page of the pooled map: blocks of `pool` pieces are
        its units; hovering a block shows its weight and its block of queries' row, largest
        key blocks first; each layer's distance profile, sink share and head kinds below.
        It opens on `view`: "matrix" (one head, or the head mean when `head` is None), "heads"
        (the heads of `layer`) or "model" (every layer and head). Refused past
        `attnviz.render.long.LONG_PAGE_BLOCKS` blocks, naming the `pool` that fits."""
        from attnviz.language import resolve_lang
        from attnviz.limits import check_choice, resolve_index
        from attnviz.render.long import check_long_page, long_page, long_page_title

        lang = resolve_lang(lang)

        pooled = self._pooled_or_refuse()
        check_choice(view, ("matrix", "heads", "model"), "view")
        check_choice(theme, ("auto", "light", "dark"), "theme")
        layer = resolve_index(layer, self.layers, "layer")
        if head is not None:
            head = resolve_index(head, self.heads, "head")
        check_long_page(self.T, self.layers, self.heads, self.pool or 1)
        return long_page(
            pooled,
            self.pool_labels,
            T=self.T,
            pool=self.pool or 1,
            pool_by=self.pool_by,
            causal=self.causal,
            bin_labels=self.bin_labels,
            profile=self.profile,
            widths=self.bin_widths,
            sink=self.sink,
            kinds=[self.head_kinds(x) for x in range(self.layers)],
            title=long_page_title(
                self.model, self.T, self.layers, self.heads, self.pool or 1, self.pool_by, lang
            ),
            view=view,
            layer=layer,
            head=head,
            theme=theme,
            lang=lang,
            windows=list(self.windows) or None,
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.profile_table(width=options.max_width)

    def __repr__(self) -> str:
        kept = ["profile", "sink"] + ["pooled"] * (self.pooled is not None)
        kept += ["rows"] * (self.rows is not None)
        return (
            f"<LongResult {self.model}: {self.T:,} pieces, {self.layers} layers × "
            f"{self.heads} heads; {', '.join(kept)}>"
        )

    def _repr_html_(self) -> str:
        """A notebook cell that ends in a long result shows the distance profiles' table,
        as HTML."""
        from attnviz.render.notebook import MAX_ROWS, WIDTH, more_rows, rich_html

        shown = min(self.layers, max(1, MAX_ROWS // max(self.heads, 1)))
        table = self.profile_table(range(shown), width=WIDTH)
        if shown == self.layers:
            return rich_html(table)
        left = (self.layers - shown) * self.heads
        return rich_html(table, more_rows(left, "result.profile_table(layers=[...])"))

    def to_dict(self) -> dict[str, Any]:
        """The arrays as lists, for JSON."""
        return {
            "model": self.model,
            "pieces": self.T,
            "distance_bins": self.bin_labels,
            "profile": self.profile.tolist(),
            "sink": self.sink.tolist(),
            "pool": self.pool,
            "pool_by": self.pool_by,
            "pool_labels": self.pool_labels if self.pooled is not None else None,
            "pooled": None if self.pooled is None else self.pooled.tolist(),
            "query": self.query,
            "rows": None if self.rows is None else self.rows.tolist(),
        }

    def check_layer(self, layer: int) -> int:
        from attnviz.limits import resolve_index

        return resolve_index(layer, self.layers, "layer")

"""The views made for length behind `api.analyse_long`, a block of queries at a time."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES
from attnviz.limits import check_choice
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    from attnviz.measures.long import LongResult


def analyse_long(
    text: str,
    *,
    model: str | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
    query: str | int | None = None,
    max_tokens: int | None = None,
    truncate: bool = False,
    bos: bool = True,
    dtype: str = "float32",
    engine: str = "auto",
    page: bool = False,
) -> LongResult:
    """The views made for length, for an input of up to `attnviz.limits.LONG_TOKENS` pieces
    (the model's own limit when lower), computed without holding any layer's whole attention.

    Every layer runs once; its weights are reduced a block of queries at a time into: the
    distance profile of each head (`profile` (L, H, bins), the mean weight of a pair at
    distance 0, 1, 2, 3–4, 5–8, ...: `bin_labels`), the sink share of each head (`sink`
    (L, H): the share of queries putting over half their weight on position 0), with `pool`
    the pooled map (`pooled` (L, H, n, n), blocks of `pool` pieces, `pool_by` "mean" or
    "max", labelled `pool_labels` "0–63", ...), and with `query` (a word of the text, or a
    piece index) that query's row in every layer and head (`rows` (L, H, T)).
    Only attnviz's own engine hands its weights over a block at a time: `engine`
    "transformers", or a model type only transformers computes, is refused.
    `page`: the result is for a page (`LongResult.html`): a pooled map too large for one is
    refused after tokenizing, before the model runs, naming the `pool` that fits.
    """
    from attnviz.measures.long import LongReducer, LongResult, check_pool, pool_edges
    from attnviz.measures.long import bin_label as _bin_label
    from attnviz.pipeline import compute_blocked
    from attnviz.pipeline import prepare as _prepare

    model = check_model(model)
    truncate, bos = check_flag(truncate, "truncate"), check_flag(bos, "bos")
    max_tokens = check_max_tokens(max_tokens)
    check_choice(dtype, DTYPES, "dtype")
    check_text(text, "the text")
    if pool is not None:
        pool, pool_by = check_pool(pool, pool_by)
    else:
        check_choice(pool_by, ("mean", "max"), "pool_by")
    source, config, pieces, _ = _prepare(
        text,
        model=model,
        truncate=truncate,
        max_tokens=max_tokens,
        bos=bos,
        blocked=True,
        engine=engine,
    )
    prepared = Prepared(source, config, pieces, truncate, max_tokens, bos)
    T = len(pieces)
    index = None if query is None else _query_index(query, list(pieces.labels), T)
    shape = prepared.model
    if pool is not None:
        pool = min(pool, max(T, 1))  # one block at most: titles say blocks of T pieces
        _check_pooled_size(T, shape.layers, shape.heads, pool)
    if page:
        from attnviz.render.long import check_long_page

        if pool is None:
            raise BadInput("a page of a long input shows its pooled map: give {pool}", param="pool")
        check_long_page(T, shape.layers, shape.heads, pool)
    reducer = LongReducer(
        shape.layers,
        shape.heads,
        T,
        pool=pool,
        pool_by=pool_by,
        causal=shape.decoder,
        query=index,
    )
    compute_blocked(prepared, reducer, block=reducer.block, dtype=dtype)
    windows = prepared.shape.decoder.sliding_windows if prepared.shape.decoder else ()
    return LongResult(
        model=source.name,
        T=T,
        layers=shape.layers,
        heads=shape.heads,
        pool=pool,
        pool_by=pool_by,
        pooled=reducer.pooled() if pool is not None else None,
        pool_labels=[_bin_label(a, b) for a, b in pool_edges(T, pool or T)],
        profile=reducer.profile(),
        bin_labels=[_bin_label(a, b) for a, b in reducer.bins],
        sink=reducer.sink(),
        query=index,
        query_label="" if index is None else pieces.labels[index],
        rows=reducer.rows,
        labels=list(pieces.labels) if index is not None else None,
        causal=shape.decoder,
        windows=windows,
    )


POOLED_SIDE = 64  # blocks a side of a pooled map kept whatever the attention budget


def _check_pooled_size(T: int, layers: int, heads: int, pool: int) -> None:
    """Refuse, before the model runs, a pooled map (L, H, n, n) larger than the attention
    budget (its float64 sums and float32 means: 12 bytes a block), naming the smallest
    `pool` that fits: blocks of 1 piece at 8,192 pieces on 30 × 9 heads would be 203 GB.
    A map of at most `POOLED_SIDE` blocks a side (what `attnviz model` draws by itself) is
    always kept: 13 MB on 30 × 9 heads."""
    import math

    from attnviz.limits import amount, attention_budget

    n = -(-T // pool)
    need = layers * heads * n * n * 12
    budget = attention_budget()
    if need <= budget or n <= POOLED_SIDE:
        return
    side = max(POOLED_SIDE, math.isqrt(budget // (layers * heads * 12)))  # most blocks a side
    raise BadInput(
        f"{{pool}} {pool}: the pooled map of {layers} layers × {heads} heads at {T:,} pieces "
        f"in blocks of {pool} takes {amount(need)}, more than attnviz keeps for one input "
        f"({amount(budget)}; ATTNVIZ_ATTENTION_MB raises it): use {{pool}} {-(-T // side)} or more",
        param="pool",
    )


def _query_index(query: object, labels: list[str], T: int) -> int:
    """A query named by a word of the text (`ele`, `ele#2`) or a piece index (`#12` or 12)."""
    from attnviz.limits import resolve_index
    from attnviz.text.match import find_label

    mark = ""  # how the index was given: `#N` on the command line (a bare N is a word)
    if isinstance(query, str) and query.startswith("#") and query[1:].lstrip("-").isdigit():
        query, mark = int(query[1:]), "#"
    if isinstance(query, str):
        return find_label(labels, query, "query")
    whole = isinstance(query, numbers.Integral) and not isinstance(query, bool)
    if whole and not -T <= int(query) < T:  # type: ignore[call-overload]
        raise BadInput(
            f"{{query}} {mark}{query} is out of range: the text has {T:,} pieces, use "
            f"{mark}0..{mark}{T - 1} (or {mark}-{T}..{mark}-1 from the end)",
            param="query",
        )
    return resolve_index(query, T, "piece", "query")

"""Head statistics over a corpus: the batches and running sums behind `api.head_stats`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from attnviz import perf
from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES
from attnviz.language import resolve_lang
from attnviz.limits import BATCH_SIZE, THREADS, check_choice, check_range
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    import numpy as np

    from attnviz.measures.stats import HeadStats
    from attnviz.partials import StatsPartial
    from attnviz.pipeline import Corpus
    from attnviz.text.pieces import TokenKinds


def head_stats(
    texts: Iterable[str],
    *,
    model: str | None = None,
    truncate: bool = False,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    dtype: str = "float32",
    progress: Callable[[int], None] | None = None,
    max_tokens: int | None = None,
    bos: bool = True,
    lang: str | None = None,
    engine: str = "auto",
    exclude: str | Sequence[str] | None = None,
) -> HeadStats:
    """Head statistics over a corpus (Clark et al. 2019): what each head attends to.

    The corpus runs in blocks of `sharding.block_size(batch_size)` sentences, in input order,
    each sorted shortest first into batches; `partial_head_stats` runs a slice of them, and a
    merge of every slice gives this result bit for bit.

    `max_tokens` bounds each sentence in pieces and `bos=False` reads a decoder's sentences
    without its start token, as in `prepare`; a sentence whose
    attention over every layer would pass `attnviz.limits.attention_budget()` is refused.

    `texts` is any iterable of sentences (a list, a generator, an open file's lines):
    it is read as the statistics run, a block of 8 batches at a time, so memory
    does not grow with the length of the corpus.

    The sentences run in padded batches of up to `batch_size`, shortest first, on
    `device` ("auto" takes CUDA when there is one) with `threads` CPU threads (None:
    torch's choice). Only running sums are kept, never the attention arrays.
    `progress(n)` is called after each batch with the number of sentences it held.
    `lang` ("en" or "pt"; None: Portuguese when LC_ALL, LC_MESSAGES or LANG starts with pt)
    is the language of the table's and the figure's labels.
    A decoder's statistics have `first` (the first token) instead of `cls`, `sep` and
    `next`, and leave out each sentence's first query, which sees only itself.
    `engine` as in `prepare`: on transformers' engine the batches run through its eager model,
    and a sentence whose whole attention is over the budget is refused.
    `exclude` ("special", "punct", "first" (alias "sink") or a list of them) drops those
    pieces as keys and queries, each row renormalised over the keys left, as the views do:
    with `exclude="first"` a decoder's `first` is 0, and every record has `excluded`.
    """
    return partial_head_stats(
        texts,
        model=model,
        truncate=truncate,
        batch_size=batch_size,
        device=device,
        threads=threads,
        dtype=dtype,
        progress=progress,
        max_tokens=max_tokens,
        bos=bos,
        lang=lang,
        engine=engine,
        exclude=exclude,
    ).result()


def partial_head_stats(
    texts: Iterable[str],
    *,
    shard: tuple[int, int] | str = (1, 1),
    model: str | None = None,
    truncate: bool = False,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    dtype: str = "float32",
    progress: Callable[[int], None] | None = None,
    max_tokens: int | None = None,
    bos: bool = True,
    lang: str | None = None,
    engine: str = "auto",
    exclude: str | Sequence[str] | None = None,
) -> StatsPartial:
    """The exact sums and counts of `head_stats` over slice `shard` (i, n) of `texts`: the
    i-th of n (1-based). Block k of `sharding.block_size(batch_size)` sentences (in input
    order) belongs to slice k mod n + 1. Every sentence is read (the partial records the whole
    input's sha256 and length); only the slice's run. `to_file` writes the partial;
    `attnviz.merge_partials` of every slice returns what `head_stats` returns. The other
    arguments as in `head_stats`.
    """
    from attnviz.measures.select import check_exclude, excluded_pieces
    from attnviz.measures.stats import StatsAccumulator
    from attnviz.partials import Identity, StatsPartial, config_digest
    from attnviz.pipeline import Corpus, compute_batches, corpus_chunks, fits_whole, load_engine
    from attnviz.sharding import ExactSums, InputDigest, block_size, check_shard, exact, shard_texts
    from attnviz.text.pieces import token_kinds

    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise BadInput(
            "texts must be a list (or any iterable) of sentences, not "
            f"{type(texts).__name__}: head_stats([text]) for one sentence"
        )
    model = check_model(model)
    truncate, bos = check_flag(truncate, "truncate"), check_flag(bos, "bos")
    max_tokens = check_max_tokens(max_tokens)
    lang = resolve_lang(lang)
    if progress is not None and not callable(progress):
        raise BadInput(
            f"progress must be a function of the sentences done, or None; got "
            f"{type(progress).__name__}"
        )
    check_range(batch_size, "batch_size", BATCH_SIZE)
    if threads is not None:
        check_range(threads, "threads", THREADS)
    check_choice(device, ("auto", "cpu", "cuda"), "device")
    check_choice(dtype, DTYPES, "dtype")
    excluded = check_exclude(exclude)
    shard = check_shard(shard)
    sentences = (check_text(t, "a sentence") for t in texts)  # read as used: a file streams
    first = list(itertools.islice(sentences, 1))  # refuse an empty corpus before any work
    if not first:
        raise BadInput("no sentences: give at least one")
    sums: StatsAccumulator | None = None
    totals: ExactSums | None = None  # every block's sums, exact: slices add up in any order
    log_t, sentences_done, queries_done = 0, 0, 0
    digest, block = InputDigest(), block_size(batch_size)
    encoder = None
    dropped = 0
    firsts: set[str | None] = set()  # a decoder's first pieces: one special token is its BOS
    texts = shard_texts(itertools.chain(first, sentences), block, shard, digest)
    chunks = corpus_chunks(
        texts,
        chunk=block,  # one block a chunk: the shard's blocks are whole but the input's last
        model=model,
        truncate=truncate,
        max_tokens=max_tokens,
        bos=bos,
        long=True,
        engine=engine,
    )
    for corpus in chunks:
        shape = corpus.shape
        sums = StatsAccumulator(shape.layers, shape.heads)  # this block's
        if encoder is None:
            perf.import_torch()
            encoder = load_engine(corpus.model.folder, corpus.config, corpus.engine, dtype)
            if corpus.engine != "attnviz":
                _engine_note(corpus.model.name, corpus.config)
        decoder = shape.causal
        kinds = [token_kinds(p, first=decoder) for p in corpus.pieces]
        keeps = [~excluded_pieces(p, excluded) for p in corpus.pieces] if excluded else None
        if decoder:
            firsts |= {p.tokens[0] if p.sequence_ids[0] is None else None for p in corpus.pieces}
        dropped += sum(p.dropped for p in corpus.pieces)
        whole = [i for i, p in enumerate(corpus.pieces) if fits_whole(len(p), shape)]
        for i in sorted(set(range(len(corpus.pieces))) - set(whole)):  # too long: layer by layer
            keep = None if keeps is None else keeps[i]
            n = len(corpus.pieces[i]) if keep is None else int(keep.sum())
            if keep is None:
                sums.add_sums(_long_sums(corpus, i, kinds[i], encoder), [n])
                if decoder:
                    sums.drop_first_queries([kinds[i]])
            elif n > decoder:  # something left to measure
                sums.add_sums(_long_sums(corpus, i, kinds[i], encoder, keep), [n])
                if decoder:
                    sums.forget_first_queries([n])  # its first row added zeros
            if progress is not None:
                progress(1)
        if len(whole) < len(corpus.pieces):
            kept = [corpus.pieces[i] for i in whole]
            corpus = Corpus(corpus.model, corpus.config, kept, corpus.engine)
            kinds = [kinds[i] for i in whole]
            keeps = None if keeps is None else [keeps[i] for i in whole]
        for batch in compute_batches(
            corpus,
            batch_size=batch_size,
            device=device,
            threads=threads,
            dtype=dtype,
            encoder=encoder,
            on_device=True,  # summed where they are: no copy of every weight to the host
        ):
            batch_kinds = [kinds[i] for i in batch.indices]
            if keeps is not None:
                batch_keeps = [keeps[i] for i in batch.indices]
                sums.add_excluding(
                    batch.attentions, batch.lengths, batch_kinds, batch_keeps, first_forced=decoder
                )
            else:
                sums.add_batch(batch.attentions, batch.lengths, batch_kinds)
                if decoder:
                    sums.drop_first_queries(batch_kinds)
            if progress is not None:
                progress(len(batch.indices))
        block_sums, block_log_t = sums.totals()
        if totals is None:
            totals = ExactSums(block_sums.size)
        totals.add(block_sums.reshape(-1).tolist())
        log_t += exact([block_log_t])[0]
        sentences_done += sums.sentences
        queries_done += sums.queries
    assert sums is not None and totals is not None  # corpus_chunks yields at least one chunk
    name = corpus.model.name + (f" (in {dtype})" if dtype != "float32" else "")
    if corpus.engine != "attnviz":
        name += f" · {corpus.engine} engine"
    options = {"truncate": truncate, "max_tokens": max_tokens, "bos": bos,
               "engine": corpus.engine, "dtype": dtype, "exclude": list(excluded),
               "batch_size": batch_size}  # fmt: skip
    identity = Identity("stats", corpus.model.name, config_digest(corpus.config), options,
                        digest.sha256, digest.count)  # fmt: skip
    return StatsPartial(
        identity=identity,
        shards=(shard[0],),
        of=shard[1],
        layers=shape.layers,
        heads=shape.heads,
        decoder=shape.causal,
        title=name,
        lang=lang,
        exclude=excluded,
        sums=tuple(totals.values),
        log_t_sum=log_t,
        sentences=sentences_done,
        queries=queries_done,
        dropped=dropped,
        firsts=tuple(sorted(firsts, key=lambda f: (f is not None, f or ""))),
    )


def _engine_note(name: str, config: dict[str, Any]) -> None:
    """The transformers engine's one line on stderr (see `Prepared.note_engine`)."""
    from attnviz.cache import notices
    from attnviz.model.foreign import engine_note

    notices.note(engine_note(name, config))


def _long_sums(
    corpus: Corpus, i: int, kinds: TokenKinds, encoder: Any, keep: np.ndarray | None = None
) -> np.ndarray:
    """The statistics' sums (S, L, H) of sentence `i` of `corpus`, a block of queries at a
    time: its whole attention is over the budget. `keep` (T,): the pieces kept, when some
    are excluded; a decoder's first query (the first kept) then adds zeros."""
    from attnviz.measures.long import LongReducer
    from attnviz.pipeline import compute_blocked

    shape, pieces = corpus.shape, corpus.pieces[i]
    prepared = Prepared(corpus.model, corpus.config, pieces, False, None, True)
    reducer = LongReducer(
        shape.layers,
        shape.heads,
        len(pieces),
        causal=shape.causal,
        kinds=kinds,
        keep=keep,
        first_forced=shape.causal,
        profile=False,
    )
    compute_blocked(prepared, reducer, block=reducer.block, encoder=encoder)
    assert reducer.stats_sums is not None
    return reducer.stats_sums

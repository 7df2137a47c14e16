"""The functions a notebook or a script starts from: `analyse`, `prepare`, `head_stats`.

Each returns plain objects (numpy arrays, lists, dataclasses) that also draw
themselves; the command line is built on the same calls. Errors are raised as
`attnviz.AttnvizError` (a failure while running) or its subclass `attnviz.BadInput`
(a bad argument), each with a one-line message that says how to fix it.
"""

from __future__ import annotations

import itertools
import numbers
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnviz import perf
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES, MASKS
from attnviz.lexicon import resolve_lang
from attnviz.limits import BATCH_SIZE, THREADS, check_choice, check_range
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.generation import Generation
    from attnviz.inputs import ModelInfo
    from attnviz.measures.long import LongResult
    from attnviz.measures.stats import HeadStats
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.model.seq2seq_config import Seq2seqShape
    from attnviz.pipeline import Corpus
    from attnviz.text.pieces import TokenKinds

__all__ = [
    "ModelDetails",
    "analyse",
    "generate",
    "head_stats",
    "is_encoder_decoder",
    "model_info",
    "prepare",
    "prepare_encdec",
    "sample_sentences",
]


def prepare(
    text: str,
    *,
    pair: str | None = None,
    model: str | None = None,
    truncate: bool = False,
    cache: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
) -> Prepared:
    """Find the model and tokenize `text` for it, without loading weights or importing torch.

    `model` is a local folder or a Hugging Face Hub id (None: `$ATTNVIZ_MODEL`, else the
    embedded all-MiniLM-L6-v2). `pair` is a second sentence, read as BERT reads pairs
    (encoders only). A text longer than `max_tokens` pieces (default: the model's limit;
    for a decoder at most 2,048) is refused, unless `truncate` keeps its start.
    `cache=False` keeps nothing on disk (a tokenizer converted from vocab.txt included).
    A decoder whose tokenizer adds no start token gets the model's own start token (BOS)
    in front, as interpretability tools read decoders; `bos=False` reads the text exactly
    as typed, without even the start token a tokenizer adds itself (then the first word
    takes the start token's role: the attention sink).
    `engine` computes the weights: "attnviz" (its own from-scratch modules), "transformers"
    (transformers' eager model, for model types attnviz does not compute: DeBERTa-v2, MPNet,
    ModernBERT, OLMo, Falcon, ...) or "auto" (attnviz's where it computes the type). One
    note on stderr says when transformers computed them.
    """
    from attnviz.pipeline import prepare as _prepare

    model = _model(model)
    truncate, cache, bos = _flag(truncate, "truncate"), _flag(cache, "cache"), _flag(bos, "bos")
    max_tokens = _max_tokens(max_tokens)
    _text(text, "the text")
    if pair is not None:
        _text(pair, "the pair")
    source, config, pieces, engine = _prepare(
        text,
        model=model,
        pair=pair,
        truncate=truncate,
        use_cache=cache,
        max_tokens=max_tokens,
        bos=bos,
        engine=engine,
    )
    return Prepared(source, config, pieces, truncate, max_tokens, bos, engine)


def analyse(
    text: str,
    *,
    pair: str | None = None,
    model: str | None = None,
    mask: str = "none",
    dtype: str = "float32",
    truncate: bool = False,
    cache: bool = True,
    layers: Sequence[int] | None = None,
    max_tokens: int | None = None,
    bos: bool = True,
    target: str | None = None,
    generate: int | None = None,
    stack: str | None = None,
    engine: str = "auto",
) -> Analysis:
    """Every attention weight of `text`: an `Analysis` with `attentions` [layers, heads, T, T].

    `mask="causal"` runs an encoder with a causal mask (a what-if; titles say so; a
    decoder is causal already and refuses it). `dtype` is what the model computes in:
    "float32", "float16" or "bfloat16". `cache` reads and writes the attention cache, so a
    text seen before is not computed again (off when ATTNVIZ_NO_CACHE is set).
    `layers` keeps only those layers (`attentions[i]` is layer `analysis.layers[i]`): a
    long input whose whole attention is over `attnviz.limits.attention_budget()` needs it.
    `max_tokens` bounds the input and `bos=False` reads a decoder's text without its
    start token (see `prepare`), and `engine` picks what computes the weights (see `prepare`).

    An encoder-decoder (T5, mT5, BART, Marian, Pegasus; computed by transformers' eager model) reads
    `text` as the source and needs `target` (the text its decoder reads, e.g. the
    translation) or `generate=N` (its own greedy output, at most N new tokens, 1..256);
    `stack` picks the attention: "cross" (the default: each target piece over the source,
    [layers, heads, T_target, T_source]), "decoder" (causal, over the target) or "encoder"
    (over the source). See `prepare_encdec`. Other models refuse all three.
    """
    given = target is not None or generate is not None or stack is not None
    if given or is_encoder_decoder(model, cache=cache):
        encdec = prepare_encdec(
            text,
            model=model,
            target=target,
            generate=generate,
            stack=stack,
            truncate=truncate,
            cache=cache,
            max_tokens=max_tokens,
            engine=engine,
        )
        if pair is not None or layers is not None:
            named = "{pair}" if pair is not None else "{layers}"
            raise BadInput(
                f"{named} does not apply to an encoder-decoder, which reads a source and a "
                "{target_text} and returns every layer of the stack: leave it out",
                param=("pair" if pair is not None else "layers", "target_text"),
            )
        encdec.check(mask=mask)
        return encdec.analyse(dtype=check_choice(dtype, DTYPES, "dtype"))
    if layers is None:  # a text seen before: no tokenizer, no torch
        hit = from_cache(text, pair=pair, model=model, truncate=truncate, mask=mask, dtype=dtype,
                         cache=cache, max_tokens=max_tokens, bos=bos, engine=engine)  # fmt: skip
        if hit is not None:
            hit.prepared.note_engine()
            return hit
    prepared = prepare(
        text,
        pair=pair,
        model=model,
        truncate=truncate,
        cache=cache,
        max_tokens=max_tokens,
        bos=bos,
        engine=engine,
    )
    return prepared.analyse(mask=mask, dtype=dtype, cache=cache, layers=layers)


def prepare_encdec(
    text: str,
    *,
    model: str | None = None,
    target: str | None = None,
    generate: int | None = None,
    stack: str | None = None,
    truncate: bool = False,
    cache: bool = True,
    max_tokens: int | None = None,
    engine: str = "auto",
) -> EncdecInput:
    """Tokenize a source (`text`) and a target for an encoder-decoder, without torch.

    The decoder reads `decoder_start_token_id` and then the target tokenized with its
    special tokens, less the last one: the labels shifted right, exactly as transformers'
    forward shifts `labels` (T5 and Marian: `<pad>` then the target; BART: `</s> <s>` then
    the target). `generate=N` lets the model write the target instead (greedy, at most N
    new tokens, 1..256, stopping at its end token; marked `generated` in titles and files).
    `stack` is "cross" (None), "decoder" or "encoder". `.check(...)` refuses bad layers,
    heads and words before the model runs; `.analyse()` runs it (transformers' eager
    attention, `output_attentions=True`; `engine` "auto" or "transformers", since attnviz's
    own engine does not compute these). A model that is not an encoder-decoder refuses
    `target`, `generate` and `stack` in one line.
    """
    from attnviz.encdec import check_not_encdec, read_encdec
    from attnviz.encdec import prepare_encdec as _prepare_encdec

    model = _model(model)
    truncate, cache = _flag(truncate, "truncate"), _flag(cache, "cache")
    max_tokens = _max_tokens(max_tokens)
    _text(text, "the text")
    if target is not None:
        _text(target, "the target")
    if stack is not None and not isinstance(stack, str):
        raise BadInput(f"{{stack}} must be a str, got {type(stack).__name__}", param="stack")
    found = read_encdec(model, use_cache=cache)
    if found is None:
        from attnviz.model.locate import locate

        name = locate(model, use_cache=cache).name
        check_not_encdec(name, stack=stack, target=target, generate=generate)
        raise BadInput(f"{name} is not an encoder-decoder model: call analyse(text) instead")
    return _prepare_encdec(
        text,
        found,
        target=target,
        generate=generate,
        stack=stack,
        truncate=truncate,
        use_cache=cache,
        max_tokens=max_tokens,
        engine=engine,
    )


def is_encoder_decoder(model: str | None = None, *, cache: bool = True) -> bool:
    """Whether `model` is an encoder-decoder attnviz reads (T5, mT5, BART, Marian, Pegasus),
    from its config.json alone (no tokenizer, no torch): then `analyse` needs a `target`
    or `generate`. A config of one of these that is corrupt raises in one line."""
    from attnviz.encdec import read_encdec

    return read_encdec(_model(model), use_cache=_flag(cache, "cache")) is not None


def generate(
    prompt: str,
    *,
    model: str | None = None,
    max_new: int = 20,
    sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    dtype: str = "float32",
    max_tokens: int | None = None,
    bos: bool = True,
    on_text: Callable[[str], None] | None = None,
    engine: str = "auto",
) -> Generation:
    """A decoder writes after `prompt`, and keeps what it attended to at each step.

    Greedy (the most likely token each step) unless `sample`: then each token is drawn
    from the softmax of the logits / `temperature`, among the `top_k` likeliest (None:
    all), with `seed` for a repeatable draw. Stops after an end token or `max_new` tokens
    (1 to 512; each step keeps a row per layer and head over everything before it, so
    512 steps after 100 pieces on a 30-layer, 9-head model keep about 210 MB; more than
    `attnviz.limits.attention_budget()` is refused before any work). `model` must be a
    decoder (GPT-2, Llama, Mistral, Qwen2) with its LM head. `on_text(s)` receives the
    continuation as it is written. The prompt is bounded, and `bos` puts the model's start
    token in front where the tokenizer adds none, as in `prepare`. Only attnviz's own engine
    writes (`engine` "transformers", or a model type only transformers computes, is refused).
    """
    from attnviz.generation import MAX_NEW, check_generation, run

    _text(prompt, "the prompt")
    model = _model(model)
    max_new = check_range(max_new, "max_new", (1, MAX_NEW))
    sample = _flag(sample, "sample")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise BadInput(f"{{temperature}} must be a number, got {type(temperature).__name__}",
                       param="temperature")  # fmt: skip
    if not 0.01 <= float(temperature) <= 100:
        raise BadInput(f"{{temperature}} {temperature} is out of range: use 0.01..100",
                       param="temperature")  # fmt: skip
    if top_k is not None:
        top_k = check_range(top_k, "top_k", (1, 10_000_000))
    if seed is not None:
        seed = check_range(seed, "seed", (0, 2**63 - 1))
    if (top_k is not None or seed is not None or temperature != 1.0) and not sample:
        raise BadInput(
            "{temperature}, {top_k} and {seed} shape a draw: pass {sample} too (greedy takes "
            "the likeliest token and draws nothing)",
            param=("temperature", "top_k", "seed", "sample"),
        )
    check_choice(dtype, DTYPES, "dtype")
    if on_text is not None and not callable(on_text):
        raise BadInput(f"on_text must be a function of a str, got {type(on_text).__name__}")
    prepared = prepare(
        prompt, model=model, max_tokens=_max_tokens(max_tokens), bos=bos, engine=engine
    )
    prepared.refuse_internals("generate (a decoder writing with attnviz's key/value cache)")
    check_generation(prepared, max_new, dtype=dtype)
    return run(
        prepared,
        max_new=max_new,
        sample=sample,
        temperature=float(temperature),
        top_k=top_k,
        seed=seed,
        dtype=dtype,
        on_text=on_text,
    )


def from_cache(
    text: str,
    *,
    pair: str | None = None,
    model: str | None = None,
    mask: str = "none",
    dtype: str = "float32",
    truncate: bool = False,
    cache: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
) -> Analysis | None:
    """`analyse` answered from the cache alone, without a tokenizer or torch; None on a miss.

    The arguments are checked as `analyse` checks them (a bad one raises BadInput).
    """
    from attnviz.cache.settings import cache_enabled
    from attnviz.pipeline import cached

    model = _model(model)
    truncate, cache, bos = _flag(truncate, "truncate"), _flag(cache, "cache"), _flag(bos, "bos")
    max_tokens = _max_tokens(max_tokens)
    _text(text, "the text")
    if pair is not None:
        _text(pair, "the pair")
    causal = check_choice(mask, MASKS, "mask") == "causal"
    check_choice(dtype, DTYPES, "dtype")
    if not cache_enabled(not cache):
        return None
    hit = cached(
        text,
        model=model,
        pair=pair,
        truncate=truncate,
        causal=causal,
        dtype=dtype,
        max_tokens=max_tokens,
        bos=bos,
        engine=engine,
    )
    if hit is None:
        return None
    from attnviz.analysis import Analysis

    (source, config, pieces, engine), attentions = hit
    prepared = Prepared(source, config, pieces, truncate, max_tokens, bos, engine)
    if causal:
        prepared.refuse_internals("the causal what-if ({mask} causal)", param="mask")
    return Analysis(prepared, attentions, causal, dtype)


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

    `max_tokens` bounds each sentence in pieces and `bos=False` reads a decoder's sentences
    without its start token, as in `prepare`; a sentence whose
    attention over every layer would pass `attnviz.limits.attention_budget()` is refused.

    `texts` is any iterable of sentences (a list, a generator, an open file's lines):
    it is read as the statistics run, a few thousand sentences at a time, so memory
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
    from attnviz.measures.select import check_exclude, excluded_pieces
    from attnviz.measures.stats import HeadStats, StatsAccumulator, decoder_records
    from attnviz.pipeline import Corpus, compute_batches, corpus_chunks, fits_whole, load_engine
    from attnviz.text.pieces import token_kinds

    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise BadInput(
            "texts must be a list (or any iterable) of sentences, not "
            f"{type(texts).__name__}: head_stats([text]) for one sentence"
        )
    model = _model(model)
    truncate, bos = _flag(truncate, "truncate"), _flag(bos, "bos")
    max_tokens = _max_tokens(max_tokens)
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
    sentences = (_text(t, "a sentence") for t in texts)  # read as used: a file streams
    first = list(itertools.islice(sentences, 1))  # refuse an empty corpus before any work
    if not first:
        raise BadInput("no sentences: give at least one")
    sums: StatsAccumulator | None = None
    encoder = None
    dropped = 0
    firsts: set[str | None] = set()  # a decoder's first pieces: one special token is its BOS
    texts = itertools.chain(first, sentences)
    chunks = corpus_chunks(
        texts,
        model=model,
        truncate=truncate,
        max_tokens=max_tokens,
        bos=bos,
        long=True,
        engine=engine,
    )
    for corpus in chunks:
        shape = corpus.shape
        if sums is None:
            sums = StatsAccumulator(shape.layers, shape.heads)
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
    assert sums is not None  # corpus_chunks yields at least one chunk
    name = corpus.model.name + (f" (in {dtype})" if dtype != "float32" else "")
    if corpus.engine != "attnviz":
        name += f" · {corpus.engine} engine"
    if excluded and not sums.queries:
        raise BadInput(
            f"{{exclude}} {','.join(excluded)} leaves nothing to measure in these sentences: "
            "exclude less, or give longer sentences",
            param="exclude",
        )
    if decoder and not sums.queries:
        raise BadInput(
            f"every sentence is one piece long, and {corpus.model.name} is a decoder: a first "
            "token sees only itself, so there is nothing to measure; give longer sentences"
        )
    records = sums.result()
    if decoder:
        records = decoder_records(records, sums.uniform_entropy)
    for record in records if excluded else ():
        record["excluded"] = list(excluded)
    return HeadStats(
        records=records,
        model=name,
        layers=shape.layers,
        heads=shape.heads,
        sentences=sums.sentences,
        queries=sums.queries,
        dropped=dropped,
        first_token=next(iter(firsts)) if len(firsts) == 1 else None,
        lang=lang,
        exclude=excluded,
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

    model = _model(model)
    truncate, bos = _flag(truncate, "truncate"), _flag(bos, "bos")
    max_tokens = _max_tokens(max_tokens)
    check_choice(dtype, DTYPES, "dtype")
    _text(text, "the text")
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
        pooled=reducer.pooled(windows) if pool is not None else None,
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


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise BadInput(f"{what} is empty: pass a sentence")
    return value


def _flag(value: object, param: str) -> bool:
    """`value` as a bool: True, False (numpy's too, and 0 or 1); BadInput for anything else."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    # Named as is, not as the command line's flag: a flag cannot be given a non-bool.
    raise BadInput(f"{param} must be True or False, got {type(value).__name__}")


def _max_tokens(value: object) -> int | None:
    """`max_tokens` as an int (numpy's too) or None; BadInput for anything else (its range is
    the model's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BadInput(
            f"{{max_tokens}} must be a whole number of pieces, or None; got {type(value).__name__}",
            param="max_tokens",
        )
    return int(value)


def _model(model: object) -> str | None:
    """A model given as a str or a path (a folder), as `locate` takes it."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if model is None:
        return model
    if isinstance(model, str):
        _path_like(model)
        return model
    raise BadInput(
        f"model must be a folder or a Hugging Face Hub id (a str or a path), got "
        f"{type(model).__name__}"
    )


def _path_like(name: str) -> None:
    """Refuse a model name no folder or Hub id can have: a NUL, a part longer than a file
    name may be (255 bytes), or longer than a path (4,096 bytes); the file system would
    answer with an OSError or a ValueError."""
    try:
        encoded = os.fsencode(name)
    except UnicodeError:
        encoded = b"\0"  # a lone surrogate: no file name either
    if b"\0" in encoded or len(encoded) > 4096 or any(len(p) > 255 for p in encoded.split(b"/")):
        raise BadInput(
            f"model {name[:40]!r}{'…' if len(name) > 40 else ''} is neither a folder nor a "
            "Hugging Face Hub id: no file name holds a NUL or passes 255 bytes",
            param="model",
        )


@dataclass(frozen=True)
class ModelDetails:
    """A model as `attnviz info` describes it, read from its files without loading weights."""

    model: ModelInfo  # name, family, layers, heads, folder, origin, tokenizer, languages
    shape: ModelShape  # every size its config gives, a decoder's positions and window
    parameters: int  # the encoder's (a decoder's LM head not counted)
    weights: tuple[str, ...]  # the weight files' names, shards in order; () when there are none
    # A decoder's start token (BOS) and who puts it in front: "tokenizer", "attnviz" (the
    # tokenizer adds none; `bos=False` reads the text as typed) or None (no start token).
    start_token: str | None = None
    start_by: str | None = None
    quantization: str | None = None  # a GGUF file's types (`Q4_K_M (file type 15): …`)
    computes_in: str | None = None  # a GGUF file: "float32, from dequantized weights"
    # What computes the weights: "attnviz's own engine (...)" or "transformers' eager
    # DebertaV2Model"; `engine` says which, as `Analysis.engine`.
    computes_with: str = "attnviz's own engine (from-scratch modules)"
    engine: str = "attnviz"
    # An encoder-decoder's sizes (each stack's layers and heads, its start token); `shape`
    # is then its cross stack's. None for other models.
    encdec: Seq2seqShape | None = None

    def __repr__(self) -> str:
        about = self.model
        return (
            f"<ModelDetails {about.name}: {about.family} {about.kind}, {about.layers} layers × "
            f"{about.heads} heads, {self.parameters:,} parameters>"
        )

    def rows(self) -> list[tuple[str, str]]:
        """What `attnviz info` says, as (name, value) rows in the order it prints them."""
        import re

        about, shape, files = self.model, self.shape, self.weights
        limit, why = shape.token_limit()
        why = re.sub(r"\{([a-z_]+)\}", r"\1", why)  # an argument named as Python names it
        languages = f"{about.language_list} (model card)" if about.languages else "not stated"
        rows = [("model", about.name), ("language", languages)]
        if about.tokenizer is not None:
            size = f", {about.tokenizer.size:,} pieces" if about.tokenizer.size else ""
            rows += [("text", about.tokenizer.normalisation)]
            rows += [("tokenizer", about.tokenizer.kind + size)]
        kind = (
            "decoder, causal: each token sees only itself and the tokens before it"
            if shape.causal
            else "encoder: each token sees every token"
        )
        rows += [("family", shape.family), ("kind", kind)]
        if self.start_token is not None:
            by = "the tokenizer" if self.start_by == "tokenizer" else "attnviz"
            rows += [("start token", f"{self.start_token} ({by} puts it in front; bos=False)")]
        if shape.shared_layers:
            rows += [("layer weights", "one set, shared by every layer")]
        if shape.embedding_size != shape.hidden:
            rows += [("embedding size", f"{shape.embedding_size}")]
        rows += [("layers", f"{shape.layers}"), ("heads per layer", f"{shape.heads}")]
        if shape.decoder is not None:
            rows += self.decoder_rows()
        counted = "decoder, LM head not counted" if shape.causal else "encoder"
        shards = f"{len(files)} shards ({files[0]}, …)" if len(files) > 1 else "".join(files)
        rows += [
            ("hidden size", f"{shape.hidden}"),
            ("head size", f"{shape.head_size}"),
            ("feed-forward size", f"{shape.intermediate}"),
            ("vocabulary", f"{shape.vocab}"),
            ("max tokens", f"{limit:,}{why}"),
            ("activation", shape.activation),
            ("parameters", f"{self.parameters:,} ({counted})"),
            ("weights", shards or "none"),
        ]
        if self.quantization is not None:
            rows += [("quantization", self.quantization), ("computes in", f"{self.computes_in}")]
        rows += [("computes with", self.computes_with)]
        return [*rows, ("loaded from", about.origin), ("folder", str(about.folder))]

    def decoder_rows(self) -> list[tuple[str, str]]:
        """What `attnviz info` adds for a decoder (part of `rows()`): key/value heads,
        positions, window, scale."""
        cfg = self.shape.decoder
        assert cfg is not None
        rows = []
        if cfg.num_kv_heads < cfg.num_heads:
            share = cfg.num_heads // cfg.num_kv_heads
            grouped = f"each read by {share} query heads (grouped-query attention)"
            rows.append(("key/value heads", f"{cfg.num_kv_heads}, {grouped}"))
        if cfg.kind == "gpt2":
            rows.append(("positions", "a learned vector per position, added to the tokens"))
        else:
            rotary = f"rotary (RoPE): q and k turned by position, θ = {cfg.rope_theta:g}"
            scaling = dict(cfg.rope_scaling)
            if cfg.rope_type == "longrope":
                trained = scaling["original_max_position_embeddings"]
                rotary += (
                    f", longrope scaling (trained on {trained:,}"
                    f" tokens, cos and sin ×{scaling['attention_factor']:.4g})"
                )
            elif cfg.rope_type != "default":
                rotary += f", {cfg.rope_type} scaling ×{scaling['factor']:g}"
            if cfg.local_rope_theta is not None:
                rotary += f" (full layers); θ = {cfg.local_rope_theta:g} in the sliding layers"
            if cfg.rotary_dims is not None:
                rotary += f"; the first {cfg.rotary_dims} of each head's {cfg.head_size} numbers"
            rows.append(("positions", rotary))
        if cfg.qk_norm:
            rows.append(("QK-norm", "each head's q and k RMS-normalised before the rotation"))
        windows = cfg.sliding_windows
        if any(w is not None for w in windows):
            sizes = {w for w in windows if w is not None}
            where = (
                "every layer"
                if None not in windows
                else "layers " + ", ".join(str(i) for i, w in enumerate(windows) if w is not None)
            )
            size = " / ".join(f"{w:,}" for w in sorted(sizes))
            sees = f"a token sees the last {size} tokens (itself included), in {where}"
            rows.append(("sliding window", sees))
        if cfg.query_pre_attn_scalar is not None:
            scale = f"1/√{cfg.query_pre_attn_scalar:g} (query_pre_attn_scalar) = {cfg.scale(0):.4g}"
            rows.append(("score scale", scale))
        if cfg.softcap is not None:
            cap = f"{cfg.softcap:g}"
            rows.append(("soft-capping", f"scores become tanh(s / {cap}) × {cap}"))
        if not cfg.scale_attn_weights or cfg.scale_by_inverse_layer:
            scale = "1/√d_k" if cfg.scale_attn_weights else "none"
            if cfg.scale_by_inverse_layer:
                scale = ("1/√d_k × " if cfg.scale_attn_weights else "") + "1/(layer + 1)"
            rows.append(("score scale", scale))
        return rows

    def _repr_html_(self) -> str:
        """A notebook cell that ends in a model's details shows `rows()` as a table."""
        from attnviz.render.notebook import details_table, rich_html

        return rich_html(details_table(self.rows()))


def _encdec_found(model: object) -> tuple[ModelSource, dict[str, Any], Seq2seqShape] | None:
    from attnviz.encdec import read_encdec

    return read_encdec(_model(model))


def _encdec_details(source: ModelSource, config: dict[str, Any], seq: Seq2seqShape) -> ModelDetails:
    """`model_info` of an encoder-decoder: its cross stack's shape, its own sizes beside."""
    from attnviz.encdec import stack_shape
    from attnviz.errors import AttnvizError
    from attnviz.inputs import ModelInfo
    from attnviz.model.foreign import TRANSFORMERS
    from attnviz.model.hf_engine import count_parameters
    from attnviz.model.weights import weight_files

    shape = stack_shape(seq, "cross")
    try:
        weights = tuple(path.name for path in weight_files(source.folder))
    except AttnvizError:
        weights = ()
    from attnviz.model.seq2seq_config import SEQ2SEQ_CLASSES

    # the class AutoModelForSeq2SeqLM loads, not the one config.json's architectures claims
    computes = f"transformers' eager {SEQ2SEQ_CLASSES[seq.model_type]}"
    return ModelDetails(
        ModelInfo.read(source, shape),
        shape,
        count_parameters(source.folder),
        weights,
        computes_with=computes[:200],
        engine=TRANSFORMERS,
        encdec=seq,
    )


def model_info(
    model: str | os.PathLike[str] | None = None, *, engine: str = "auto"
) -> ModelDetails:
    """The model `model` names (see `prepare`): its shape, tokenizer, model card's languages,
    parameter count and weight files, and which engine computes it (`engine` as in
    `prepare`); no weights loaded, no torch imported."""
    from attnviz.errors import AttnvizError
    from attnviz.inputs import ModelInfo
    from attnviz.model.foreign import computes_with, shape_of
    from attnviz.model.weights import count_parameters, weight_files
    from attnviz.pipeline import read_model

    found = None if engine == "attnviz" else _encdec_found(model)
    if found is not None:
        return _encdec_details(*found)
    source, config, engine = read_model(_model(model), engine)
    shape = shape_of(config, engine)
    try:
        weights = tuple(path.name for path in weight_files(source.folder))
    except AttnvizError:
        weights = ()
    info = ModelInfo.read(source, shape)
    start, by = _start(source.folder, config) if shape.causal else (None, None)
    if engine != "attnviz":
        from attnviz.model.hf_engine import count_parameters as count_foreign

        return ModelDetails(
            info,
            shape,
            count_foreign(source.folder),
            weights,
            start,
            by,
            computes_with=computes_with(config, engine),
            engine=engine,
        )
    parameters = count_parameters(source.folder)
    if source.gguf is not None:
        from attnviz.model.gguf_convert import quantization
        from attnviz.model.gguf_convert import source as gguf_source

        about = gguf_source(source.folder) or {}
        computes = "float32, from dequantized weights"
        return ModelDetails(
            info, shape, parameters, (source.gguf.name,), start, by, quantization(about), computes
        )
    return ModelDetails(info, shape, parameters, weights, start, by)


def _start(folder: Path, config: dict[str, Any]) -> tuple[str | None, str | None]:
    """A decoder's start token and who adds it: ("<s>", "tokenizer"), ("<|endoftext|>",
    "attnviz") or (None, None) when the model defines none."""
    from attnviz.text.tokenize import load_tokenizer, start_token

    tokenizer = load_tokenizer(folder)
    added = start_token(tokenizer, folder, config)
    if added is not None:
        return added[0], "attnviz"
    first = tokenizer.encode("").ids[:1]  # a tokenizer that adds a start token adds it here too
    return (tokenizer.id_to_token(first[0]), "tokenizer") if first else (None, None)


def check_head_stats(
    *,
    by: str = "layer",
    top: int | None = None,
    model: str | os.PathLike[str] | None = None,
    engine: str = "auto",
) -> None:
    """Refuse, before any work, the `by` and `top` that `head_stats(...).sorted` would refuse
    for `model`: an unknown column, an encoder's column (cls, sep, next) for a decoder, or a
    decoder's (first) for an encoder. Reads the model's config.json only."""
    from attnviz.measures.stats import check_sort_column, sort_records

    sort_records([], by, top)
    if by in ("cls", "sep", "next", "first"):  # an encoder's columns, or a decoder's
        from attnviz.model.foreign import shape_of
        from attnviz.pipeline import read_model

        _, config, engine = read_model(_model(model), engine)
        decoder = shape_of(config, engine).causal
        check_sort_column(by, decoder=decoder)


def sample_sentences() -> list[str]:
    """The sample sentences attnviz ships, English first; the command line reads the first
    when it is given no text."""
    from attnviz.text.samples import sample_sentences as samples

    return samples()

"""The functions a notebook or a script starts from: `analyse`, `prepare`, `head_stats`.

Each returns plain objects (numpy arrays, lists, dataclasses) that also draw
themselves; the command line is built on the same calls. Errors are raised as
`attnviz.AttnvizError` (a failure while running) or its subclass `attnviz.BadInput`
(a bad argument), each with a one-line message that says how to fix it.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from attnviz.ablation import ablate
from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES, MASKS
from attnviz.limits import check_choice, check_range
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.details import ModelDetails
    from attnviz.encdec import EncdecInput
    from attnviz.generation import Generation
    from attnviz.measures.long import LongResult
    from attnviz.measures.stats import HeadStats

__all__ = [
    "ablate",
    "analyse",
    "analyse_long",
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
    from attnviz.prepared import prepare_input

    return prepare_input(text, None, pair=pair, model=model, truncate=truncate, cache=cache,
                     max_tokens=max_tokens, bos=bos, engine=engine)  # fmt: skip


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
    from attnviz.encdec import encdec_input, found_in, open_encdec
    from attnviz.prepared import prepare_input

    given = target is not None or generate is not None or stack is not None
    opened = open_encdec(check_model(model), use_cache=check_flag(cache, "cache"))
    if given or found_in(opened) is not None:  # one door: the model is opened once
        encdec = encdec_input(
            text,
            opened,
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
    prepared = prepare_input(
        text, opened, pair=pair, model=model, truncate=truncate, cache=cache,
        max_tokens=max_tokens, bos=bos, engine=engine,
    )  # fmt: skip
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
    from attnviz.encdec import encdec_input

    return encdec_input(
        text, None, model=model, target=target, generate=generate, stack=stack,
        truncate=truncate, cache=cache, max_tokens=max_tokens, engine=engine,
    )  # fmt: skip


def is_encoder_decoder(model: str | None = None, *, cache: bool = True) -> bool:
    """Whether `model` is an encoder-decoder attnviz reads (T5, mT5, BART, Marian, Pegasus),
    from its config.json alone (no tokenizer, no torch): then `analyse` needs a `target`
    or `generate`. A config of one of these that is corrupt raises in one line."""
    from attnviz.encdec import read_encdec

    return read_encdec(check_model(model), use_cache=check_flag(cache, "cache")) is not None


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

    check_text(prompt, "the prompt")
    model = check_model(model)
    max_new = check_range(max_new, "max_new", (1, MAX_NEW))
    sample = check_flag(sample, "sample")
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
        prompt, model=model, max_tokens=check_max_tokens(max_tokens), bos=bos, engine=engine
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

    model = check_model(model)
    truncate, cache, bos = (
        check_flag(truncate, "truncate"),
        check_flag(cache, "cache"),
        check_flag(bos, "bos"),
    )
    max_tokens = check_max_tokens(max_tokens)
    check_text(text, "the text")
    if pair is not None:
        check_text(pair, "the pair")
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
    from attnviz.corpus import head_stats as run

    return run(
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
    )


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
    from attnviz.long_input import analyse_long as run

    return run(
        text,
        model=model,
        pool=pool,
        pool_by=pool_by,
        query=query,
        max_tokens=max_tokens,
        truncate=truncate,
        bos=bos,
        dtype=dtype,
        engine=engine,
        page=page,
    )


def model_info(
    model: str | os.PathLike[str] | None = None, *, engine: str = "auto"
) -> ModelDetails:
    """The model `model` names (see `prepare`): its shape, tokenizer, model card's languages,
    parameter count and weight files, and which engine computes it (`engine` as in
    `prepare`); no weights loaded, no torch imported."""
    from attnviz.details import model_info as run

    return run(model, engine=engine)


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

        _, config, engine = read_model(check_model(model), engine)
        decoder = shape_of(config, engine).causal
        check_sort_column(by, decoder=decoder)


def sample_sentences() -> list[str]:
    """The sample sentences attnviz ships, English first; the command line reads the first
    when it is given no text."""
    from attnviz.text.samples import sample_sentences as samples

    return samples()

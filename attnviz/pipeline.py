"""From text to attention weights: locate the model, tokenize, run the encoder.

`prepare` does the cheap part (find the model, read its config, tokenize) so that
bad input is refused before torch is imported; `compute` runs the encoder, or reads
the cache. `prepare_corpus` and `compute_batches` do the same for many sentences,
in padded batches.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from attnviz import perf
from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import CORPUS_CHUNK
from attnviz.model.families import ModelShape
from attnviz.model.foreign import TRANSFORMERS, check_start, shape_of
from attnviz.model.locate import ModelSource
from attnviz.model.open import OpenModel, open_model
from attnviz.text.pieces import Pieces
from attnviz.text.tokenize import load_tokenizer, own_start, start_token, tokenize

if TYPE_CHECKING:
    import numpy as np
    import torch

    from attnviz.model.decoder import Decoder
    from attnviz.model.encoder import Encoder


class Tokenized(NamedTuple):
    """A text tokenized for a model: where the model is, its config.json, the pieces."""

    source: ModelSource
    config: dict[str, Any]
    pieces: Pieces
    engine: str = "attnviz"  # what computes the weights: "attnviz" or "transformers"


class Computable(Protocol):
    """What `compute` runs: a tokenized input and how it was bounded (`Prepared` is one)."""

    @property
    def source(self) -> ModelSource: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def pieces(self) -> Pieces: ...
    @property
    def truncate(self) -> bool: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def bos(self) -> bool: ...
    @property
    def engine(self) -> str: ...


def read_model(
    model: str | None, engine: str = "auto", *, use_cache: bool = True
) -> tuple[ModelSource, dict[str, Any], str]:
    """The model's folder, its config.json and the engine that computes it (`auto`: attnviz's
    own where it computes the model type, else transformers' eager model); no torch."""
    opened = open_model(model, use_cache=use_cache)
    return opened.source, opened.config, opened.engine(engine)


def refuse_on_transformers(engine: str, what: str, *, param: str | None = None) -> None:
    """Refuse, in one line naming the engine, what needs the model's internals (`what`, which
    may name the argument `param` as `{param}`) on transformers' engine."""
    if engine == TRANSFORMERS:
        raise BadInput(
            f"{what} is not computed on transformers' engine ({{engine}} transformers): it needs "
            "the model's internals, which only attnviz's own engine opens; pass {engine} attnviz "
            "with a model type attnviz computes",
            param=("engine", param) if param else "engine",
        )


def prepare(
    text: str,
    *,
    model: str | None = None,
    pair: str | None = None,
    truncate: bool = False,
    use_cache: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    blocked: bool = False,
    engine: str = "auto",
    opened: OpenModel | None = None,
) -> Tokenized:
    """Find the model and tokenize `text` (and `pair`) for it, without importing torch.

    `use_cache` lets a tokenizer that transformers had to convert be kept in the cache.
    `max_tokens` bounds the input in pieces (default: the model's limit, and for a
    decoder at most `limits.DECODER_TOKENS`). `bos`: a decoder whose tokenizer adds no
    start token gets the model's own in front (`text.tokenize.start_token`); False reads
    the text exactly as typed. `blocked`: for the views made for length (`compute_blocked`),
    which read up to `limits.LONG_TOKENS` pieces. `engine`: see `read_model`. `opened`: the
    model as `model.open.open_model` opened it already (then `model` is not located again).
    """
    if opened is None:
        opened = open_model(model, use_cache=use_cache)
    source, config, engine = opened.source, opened.config, opened.engine(engine)
    if blocked:
        refuse_on_transformers(engine, "a view made for length (pooled maps, distances)")
    shape = shape_of(config, engine)
    if pair is not None and shape.causal:
        raise BadInput(
            f"{{pair}} is for encoders: {source.name} is a decoder ({shape.family}), which "
            "reads one running text; put both sentences in the text instead",
            param="pair",
        )
    tokenizer = load_tokenizer(source.folder, use_cache=use_cache)
    start, limit, why = _bounds(tokenizer, source, config, shape, max_tokens, bos, blocked)
    pieces = tokenize(
        tokenizer, text, pair=pair, max_positions=limit, truncate=truncate, why=why, **start
    )
    _check_vocabulary(pieces, shape, source)
    return Tokenized(source, config, pieces, engine)


def _bounds(
    tokenizer: Any,
    source: ModelSource,
    config: dict[str, Any],
    shape: ModelShape,
    max_tokens: int | None,
    bos: bool,
    blocked: bool = False,
) -> tuple[dict[str, Any], int, str]:
    """(how `tokenize` treats the start token, the most pieces the input may have, why that
    bound). A decoder read with `bos` gets the model's start token in front when its
    tokenizer adds none (it takes one of the positions); read as typed (`bos=False`), a
    start token its tokenizer adds is taken off. `blocked`: the bound of the long views."""
    check_start(shape, bos)
    limit, why = shape.token_limit(max_tokens, blocked)
    if not shape.causal:
        return {}, limit, why
    if bos:
        return {"start": start_token(tokenizer, source.folder, config)}, limit, why
    return {"unstart": own_start(tokenizer)}, limit, why


def _check_vocabulary(pieces: Pieces, shape: ModelShape, source: ModelSource) -> None:
    """Refuse ids the embedding table does not have: tokenizer and weights don't match."""
    if max(pieces.ids) >= shape.vocab:
        raise AttnvizError(
            f"the tokenizer in {source.folder} gives id {max(pieces.ids)} but the model's "
            f"vocabulary has {shape.vocab} entries: the tokenizer files and the weights do not "
            "belong together"
        )


def compute(
    prepared: Computable,
    *,
    causal: bool = False,
    use_cache: bool = False,
    dtype: str = "float32",
    layers: tuple[int, ...] | None = None,
) -> np.ndarray:
    """The attentions (L, H, T, T) of the prepared input, from the from-scratch encoder or
    decoder (with a causal mask if asked).

    With `use_cache`, attentions computed before for the same model files, text,
    pair, mask and options come from the cache, and torch is never imported.
    `dtype` is what the encoder computes in ("float32", "float16", "bfloat16").
    `layers` (sorted; None: all) are the only layers computed and kept (then the first
    axis is len(layers)); such a partial result, for an input too long to keep whole, is
    not cached.
    """
    if layers is not None:
        return _encode(prepared, causal, dtype, layers)
    key = _cache_key(prepared, causal, dtype) if use_cache else None
    if key is not None:
        from attnviz.cache import entries

        shape = shape_of(prepared.config, prepared.engine)
        hit = entries.load(
            key, expect_ids=prepared.pieces.ids, expect_shape=(shape.layers, shape.heads)
        )
        if hit is not None:
            return hit
    attentions = _encode(prepared, causal, dtype)
    if key is not None:
        entries.store(key, attentions, prepared.pieces.ids, prepared.pieces)
    return attentions


def cached(
    text: str,
    *,
    model: str | None = None,
    pair: str | None = None,
    truncate: bool = False,
    causal: bool = False,
    dtype: str = "float32",
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
    opened: OpenModel | None = None,
) -> tuple[Tokenized, np.ndarray] | None:
    """The tokenized input and attentions of a text seen before, from the cache alone: no
    tokenizer, no torch.

    The key is made from the text as given (as `compute` makes it from the text it
    tokenized, the same unless a huge text was cut), and the entry brings the pieces.
    None on a miss: then `prepare` and `compute` as usual. `opened`: as in `prepare`.
    """
    from attnviz.cache import entries, keys

    if opened is None:
        opened = open_model(model)
    source, config, engine = opened.source, opened.config, opened.engine(engine)
    shape = shape_of(config, engine)
    check_start(shape, bos)
    try:
        key = keys.cache_key(
            source.folder,
            text=text,
            pair=pair,
            causal=causal,
            dtype=dtype,
            truncate=truncate,
            max_tokens=max_tokens,
            bos=bos and shape.causal,
            engine=engine,
        )
    except OSError:
        return None  # compute's own lookup says why
    hit = entries.load_analysed(key, text=text, pair=pair, shape=(shape.layers, shape.heads))
    if hit is None:
        return None
    attentions, fields = hit
    pieces = Pieces(**fields)
    problem = _unfit(attentions, pieces, shape, max_tokens, truncate)
    if problem:
        entries.discard(key, f"they {problem} for {source.name}")
        return None
    return Tokenized(source, config, pieces, engine), attentions


def _unfit(
    attentions: np.ndarray,
    pieces: Pieces,
    shape: ModelShape,
    max_tokens: int | None,
    truncate: bool,
) -> str | None:
    """Why a cache entry's attentions and pieces cannot be this model's, or None."""
    limit = shape.own_max_tokens if max_tokens is None else max_tokens
    if not pieces.ids or len(pieces) > limit:
        return f"hold {len(pieces)} pieces, not 1 to {limit}"
    if not 0 <= min(pieces.ids) <= max(pieces.ids) < shape.vocab:
        return "hold ids outside the vocabulary"
    if pieces.dropped and not truncate:
        return "say pieces were truncated, but --truncate was not asked for"
    import numpy as np  # the cache hit has imported it already

    if shape.causal and np.triu(attentions, 1).any():
        return "see later tokens, which a decoder never does"
    return None


def _cache_key(prepared: Computable, causal: bool, dtype: str) -> str | None:
    from attnviz.cache import keys, notices

    try:
        return keys.cache_key(
            prepared.source.folder,
            text=prepared.pieces.text,
            pair=prepared.pieces.pair,
            causal=causal,
            dtype=dtype,
            truncate=prepared.truncate,
            max_tokens=prepared.max_tokens,
            bos=prepared.bos and shape_of(prepared.config, prepared.engine).causal,
            engine=prepared.engine,
        )
    except OSError as exc:
        notices.warn(f"cannot read {prepared.source.folder} for the cache key ({exc}); not caching")
        return None


def _encode(
    prepared: Computable, causal: bool, dtype: str, layers: tuple[int, ...] | None = None
) -> np.ndarray:
    if prepared.engine == TRANSFORMERS:
        return _encode_foreign(prepared, dtype, layers)
    perf.import_torch()
    import torch

    from attnviz.model.weights import load_encoder

    input_ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    type_ids = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    with perf.threads_for(len(prepared.pieces)):
        encoder = load_encoder(prepared.source.folder, prepared.config, dtype)
        with torch.inference_mode():
            out = encoder(input_ids, type_ids, causal=causal, layers=layers)
        del encoder  # its weights go before the attention is converted
    attentions = out.attentions[:, 0].float().numpy()  # (L or len(layers), H, T, T)
    check_finite(attentions, prepared.source)
    return attentions


def _encode_foreign(prepared: Computable, dtype: str, layers: tuple[int, ...] | None) -> np.ndarray:
    """The attentions (L, H, T, T) from transformers' eager model (`model.hf_engine`); with
    `layers`, only those are kept (transformers computes them all)."""
    perf.import_torch()
    import torch

    from attnviz.model.hf_engine import attentions as foreign_attentions
    from attnviz.model.hf_engine import load_model

    input_ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    type_ids = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    with perf.threads_for(len(prepared.pieces)):
        model = load_model(prepared.source.folder, prepared.config, dtype)
        shape = shape_of(prepared.config, prepared.engine)
        expect = (shape.layers, shape.heads)
        out = foreign_attentions(model, input_ids, type_ids, expect=expect)  # (L, 1, H, T, T)
        del model
    if layers is not None:
        out = out[list(layers)]  # (len(layers), 1, H, T, T)
    attentions = out[:, 0].float().numpy()  # (L, H, T, T)
    check_finite(attentions, prepared.source)
    return attentions


def compute_blocked(
    prepared: Computable,
    reduce: Callable[[int, int, Any], None],
    *,
    block: int,
    causal: bool = False,
    dtype: str = "float32",
    encoder: Encoder | Decoder | None = None,
) -> None:
    """Run the model on the prepared input, handing every layer's weights to
    `reduce(layer, first query, weights (H, b, K))` `block` queries at a time, and keeping
    none (attnviz.model.blocked). For the views made for length; nothing is cached.
    `encoder` saves loading the weights again."""
    refuse_on_transformers(prepared.engine, "a view made for length (pooled maps, distances)")
    perf.import_torch()
    import torch

    from attnviz.model.blocked import run_blocked
    from attnviz.model.weights import load_encoder

    input_ids = torch.tensor([prepared.pieces.ids])  # (1, T)
    type_ids = torch.tensor([prepared.pieces.type_ids])  # (1, T)
    shape = shape_of(prepared.config, prepared.engine)
    with perf.threads_for(len(prepared.pieces)):
        if encoder is None:
            encoder = load_encoder(prepared.source.folder, prepared.config, dtype)
        run_blocked(
            encoder,
            input_ids,
            type_ids,
            reduce,
            num_layers=shape.layers,
            causal=causal or shape.causal,
            block=block,
        )


@dataclass(frozen=True)
class Corpus:
    """Many tokenized sentences for one model; no weights loaded yet."""

    model: ModelSource
    config: dict[str, Any]
    pieces: list[Pieces]
    engine: str = "attnviz"  # what computes the weights: "attnviz" or "transformers"

    @property
    def shape(self) -> ModelShape:
        return shape_of(self.config, self.engine)


@dataclass(frozen=True)
class Batch:
    """The attentions of a padded batch, for the sentences `indices` of a corpus."""

    indices: list[int]  # positions in the corpus, in batch order
    lengths: list[int]  # real pieces of each sentence; the rest is padding
    attentions: Any  # (L, B, H, Tmax, Tmax) float32 numpy, or a tensor; padded keys weigh 0


def prepare_corpus(
    texts: list[str],
    *,
    model: str | None = None,
    truncate: bool = False,
    bos: bool = True,
    engine: str = "auto",
) -> Corpus:
    """Tokenize every sentence for `model` with one tokenizer, without importing torch."""
    chunk = max(1, len(texts))
    return next(
        corpus_chunks(texts, model=model, truncate=truncate, chunk=chunk, bos=bos, engine=engine)
    )


CHUNK_SENTENCES = CORPUS_CHUNK  # sentences `corpus_chunks` tokenizes at a time (see limits)


def corpus_chunks(
    texts: Iterable[str],
    *,
    model: str | None = None,
    truncate: bool | None = False,
    chunk: int = CHUNK_SENTENCES,
    max_tokens: int | None = None,
    bos: bool = True,
    long: bool = False,
    engine: str = "auto",
    named: Callable[[int], str] | None = None,
) -> Iterator[Corpus]:
    """The sentences tokenized `chunk` at a time, as they are read from `texts`.

    One model lookup and one tokenizer serve every chunk; a sentence's number in an
    error counts from the first sentence of `texts` ("sentence N"; `named(N)` names it
    otherwise, e.g. by its line in a file). `truncate` None: see `tokenize`. At least one
    chunk is yielded (empty when `texts` is). `bos` as in `prepare`. `long`: a sentence
    whose whole attention is over the budget is kept (up to `limits.LONG_TOKENS` pieces),
    for a caller that runs it a block at a time (`compute_blocked`), instead of refused (not
    on transformers' engine, which computes every layer whole). `engine`: see `read_model`.
    """
    source, config, engine = read_model(model, engine)
    long = long and engine != TRANSFORMERS
    tokenizer = load_tokenizer(source.folder)
    shape = shape_of(config, engine)
    start, limit, why = _bounds(tokenizer, source, config, shape, max_tokens, bos, long)
    texts = iter(texts)
    number = 0
    while True:
        pieces = []
        for text in itertools.islice(texts, chunk):
            number += 1
            try:
                pieces.append(
                    tokenize(
                        tokenizer,
                        text,
                        max_positions=limit,
                        truncate=truncate,
                        why=why,
                        **start,
                    )
                )
                _check_vocabulary(pieces[-1], shape, source)
                if not long:
                    _check_attention_size(len(pieces[-1]), shape)
            except AttnvizError as exc:
                quoted = text if len(text) <= 40 else text[:39] + "…"
                where = named(number) if named is not None else f"sentence {number}"
                raise exc.prefixed(f"{where} ({quoted!r}): ") from None
        if pieces or number == 0:
            yield Corpus(source, config, pieces, engine)
        if len(pieces) < chunk:
            return


def fits_whole(T: int, shape: ModelShape) -> bool:
    """Whether a sentence's attention over every layer fits the budget (else: blocks)."""
    from attnviz.limits import attention_budget

    return shape.layers * shape.heads * T * T * 4 <= attention_budget()


def _check_attention_size(T: int, shape: ModelShape) -> None:
    """Refuse a sentence whose attention over every layer, which a batch holds, is too large."""
    from attnviz.limits import amount, attention_budget

    ATTENTION_BYTES = attention_budget()

    size = shape.layers * shape.heads * T * T * 4
    if size > ATTENTION_BYTES:
        longest = math.isqrt(ATTENTION_BYTES // (shape.layers * shape.heads * 4))
        raise BadInput(
            f"it is {T:,} pieces, and its attention over all {shape.layers} layers is "
            f"{amount(size)}, more than attnviz holds at once ({amount(ATTENTION_BYTES)}): pass "
            f"{{max_tokens}} {longest} {{truncate}} to read the first {longest:,} pieces",
            param=("max_tokens", "truncate"),
        )


def pick_device(device: str, *, batched: bool) -> str:
    """`auto` is CUDA when present for batched work; a single sentence stays on the CPU."""
    import torch

    if device == "auto":
        return "cuda" if batched and torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise AttnvizError(
            "{device} cuda: no CUDA device is available here; use {device} cpu", param="device"
        )
    return device


def compute_batches(
    corpus: Corpus,
    *,
    batch_size: int = 32,
    causal: bool = False,
    device: str = "auto",
    threads: int | None = None,
    encoder: Encoder | Decoder | None = None,
    dtype: str = "float32",
    on_device: bool = False,
) -> Iterator[Batch]:
    """Run the corpus through the encoder in padded batches, shortest sentences first.

    Sorting by length keeps the padding small. Each batch's attentions are handed
    over and dropped before the next batch runs, so memory stays bounded by one
    batch however long the corpus is. `encoder` saves loading the weights again.
    `on_device` hands the attentions over as the torch tensor the encoder wrote, on
    its device and in its dtype, for a consumer (the statistics) that reads them there.
    On transformers' engine, `encoder` is its model (`load_engine`); `causal` is refused.
    """
    perf.import_torch()
    import torch

    from attnviz.model.encoder import Encoder
    from attnviz.model.hf_engine import attentions as foreign_attentions

    foreign = corpus.engine == TRANSFORMERS
    if foreign and causal:
        refuse_on_transformers(corpus.engine, "the causal what-if ({mask} causal)", param="mask")
    where = pick_device(device, batched=True)
    if encoder is None:
        encoder = load_engine(corpus.model.folder, corpus.config, corpus.engine, dtype)
    encoder = encoder.to(where)
    shape = corpus.shape
    pad_id = corpus.config.get("pad_token_id")
    pad_id = pad_id if isinstance(pad_id, int) and 0 <= pad_id < shape.vocab else 0
    for indices in _batches(corpus.pieces, batch_size, shape.layers * shape.heads):
        batch = [corpus.pieces[i] for i in indices]
        ids, types, real = padded(batch, pad_id)  # (B, T) each
        attentions: Any
        with torch.inference_mode(), perf.threads(threads):
            if foreign:
                ids, types, real = ids.to(where), types.to(where), real.to(where)
                expect = (shape.layers, shape.heads)
                attentions = foreign_attentions(encoder, ids, types, real, expect=expect)
            else:
                only = {"weights_only": True} if isinstance(encoder, Encoder) else {}
                out = encoder(ids.to(where), types.to(where), real.to(where), causal=causal, **only)
                attentions = out.attentions  # (L, B, H, T, T)
        if not on_device:
            attentions = attentions.float().cpu().numpy()
        check_finite(attentions, corpus.model)
        yield Batch(indices, [len(p) for p in batch], attentions)


def load_engine(folder: Path, config: dict[str, Any], engine: str, dtype: str = "float32") -> Any:
    """The model that computes the attention: attnviz's own encoder or decoder, or
    transformers' eager model (`engine` "transformers")."""
    if engine == TRANSFORMERS:
        from attnviz.model.hf_engine import load_model

        return load_model(folder, config, dtype)
    from attnviz.model.weights import load_encoder

    return load_encoder(folder, config, dtype)


def check_finite(attentions: Any, model: ModelSource) -> None:
    """Refuse attentions (a numpy array or a tensor) with NaN or infinity in one line.

    A NaN would otherwise pass on as a heatmap of blanks, `NaN` in JSON (which is
    not JSON) or a head labelled "mixed" with entropy 0. One sum over the array
    finds it (NaN and infinity survive a sum), so the check costs no copy; in the
    array's own dtype, since weights of at most 1 cannot overflow it.
    """
    import numpy as np

    wide = attentions if isinstance(attentions, np.ndarray) else attentions.float()  # no fp16 sum
    if math.isfinite(float(wide.sum())):
        return
    if not isinstance(attentions, np.ndarray):
        attentions = attentions.float().cpu().numpy()
    layers = np.flatnonzero(~np.isfinite(attentions.reshape(attentions.shape[0], -1)).all(axis=1))
    first = int(layers[0]) if len(layers) else 0
    raise AttnvizError(
        f"the attention of {model.name} is not finite (NaN or infinity) from layer {first} on: "
        "its weights hold NaN or infinite values, or overflow in this dtype; use a sound "
        "checkpoint, or {dtype} float32",
        param="dtype",
    )


def padded(batch: list[Pieces], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input ids, token types and the attention mask (1 real, 0 padding) of a padded batch."""
    import torch

    T = max(len(p) for p in batch)
    ids = torch.full((len(batch), T), pad_id, dtype=torch.long)  # (B, T)
    types = torch.zeros((len(batch), T), dtype=torch.long)  # (B, T)
    real = torch.zeros((len(batch), T), dtype=torch.long)  # (B, T)
    for b, p in enumerate(batch):
        ids[b, : len(p)] = torch.tensor(p.ids)
        types[b, : len(p)] = torch.tensor(p.type_ids)
        real[b, : len(p)] = 1
    return ids, types, real


# A batch's attention array, L·B·H·T·T float32 numbers, stays under this many bytes: long
# sentences run in smaller batches, so 512-piece inputs cannot take gigabytes at once.
BATCH_ATTENTION_BYTES = 256 * 2**20


def _batches(pieces: list[Pieces], batch_size: int, maps: int) -> Iterator[list[int]]:
    """Sentence indices in batches, shortest first; `maps` is L·H, attention maps per sentence."""
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    batch: list[int] = []
    for i in order:
        T = len(pieces[i])  # the longest so far, since the order is by length
        fits = (len(batch) + 1) * maps * T * T * 4 <= BATCH_ATTENTION_BYTES
        if batch and (len(batch) == batch_size or not fits):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch

"""A prepared input: the text tokenized for a model, no weights loaded, no torch imported.

`attnviz.prepare` returns a `Prepared`; its `analyse()` runs the encoder (or reads the
cache) and gives an `attnviz.Analysis`. `ModelInfo` (in `attnviz.inputs`) says which
model it is for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from math import isqrt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.errors import BadInput, exhausted
from attnviz.inputs import DTYPES, MASKS, Input, ModelInfo, TokenizedInput, check_model_asked, short
from attnviz.limits import check_choice, number_list, resolve_index

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.inputs import Asked
    from attnviz.measures.explain import Explanation
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.model.open import OpenModel
    from attnviz.text.pieces import Pieces

__all__ = ["Prepared", "checked_text", "from_cache", "prepare_input", "read_input"]


@dataclass(frozen=True)
class Prepared(TokenizedInput, Input["Analysis"]):
    """A tokenized input and the model it is for; no weights loaded, no torch imported."""

    source: ModelSource
    config: dict[str, Any] = field(repr=False)
    pieces: Pieces
    truncate: bool = False
    max_tokens: int | None = None  # the bound asked for (None: the model's own)
    bos: bool = True  # a decoder's start token put in front when its tokenizer adds none
    engine: str = "attnviz"  # what computes the weights: "attnviz" or "transformers"
    # The analysis the cache held for this text, found before any tokenizer ran (`from_cache`):
    # `analyse` asked its mask and dtype hands it back, computing nothing.
    found: Analysis | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (
            f"<Prepared {self.source.name}: {len(self.pieces)} pieces, text={short(self.text)!r}>"
        )

    @cached_property
    def shape(self) -> ModelShape:
        from attnviz.model.foreign import shape_of

        return shape_of(self.config, self.engine)

    def note_engine(self) -> None:
        """One line on stderr (`cache.notices.note`: `--quiet` hides it) when transformers'
        engine computed the weights; nothing for attnviz's own."""
        from attnviz.cache import notices
        from attnviz.model.foreign import TRANSFORMERS, engine_note

        if self.engine == TRANSFORMERS:
            notices.note(engine_note(self.source.name, self.config))

    def refuse_internals(self, what: str, *, param: str | None = None) -> None:
        """Refuse `what`, which needs the model's internals, when transformers' engine
        computes this model: one line naming the engine (and `param`, as `{param}` in
        `what`)."""
        from attnviz.pipeline import refuse_on_transformers

        refuse_on_transformers(self.engine, what, param=param)

    @property
    def num_layers(self) -> int:
        return self.shape.layers

    @property
    def num_heads(self) -> int:
        return self.shape.heads

    @cached_property
    def model(self) -> ModelInfo:
        """The model: name, family, shape, and what its tokenizer and model card say."""
        return ModelInfo.read(self.source, self.shape)

    def attention_bytes(self, layers: int | None = None) -> int:
        """The float32 attention of `layers` layers (default: all) of this input, in bytes."""
        T = len(self.pieces)
        count = self.num_layers if layers is None else layers
        return count * self.num_heads * T * T * 4

    def kept_layers(self, layers: Sequence[int] | None) -> tuple[int, ...] | None:
        """The layers to compute and keep, sorted (None: all), refused past the budget.

        The whole attention is kept while it fits `limits.attention_budget()`; past it,
        the layers must be named, and they must fit too.
        """
        from attnviz.limits import amount, attention_budget

        ATTENTION_BYTES = attention_budget()

        if layers is None:
            whole = self.attention_bytes()
            if whole > ATTENTION_BYTES:
                fits = isqrt(ATTENTION_BYTES // (self.num_layers * self.num_heads * 4))
                raise BadInput(
                    f"the attention of all {self.num_layers} layers of {self.source.name} at "
                    f"{len(self.pieces):,} pieces is {amount(whole)}, more than attnviz keeps for "
                    f"one input ({amount(ATTENTION_BYTES)}): look at one layer (show or heads "
                    f"--layer L; in Python layers=[L]), or read at most {fits:,} pieces "
                    f"({{max_tokens}} {fits} with {{truncate}})",
                    param=("max_tokens", "truncate"),
                )
            return None
        listed = number_list(layers, "layers", "layer", "[3]")
        kept = tuple(sorted({resolve_index(n, self.num_layers, "layer") for n in listed}))
        if not kept:
            raise BadInput("the list of layers is empty: name at least one layer, e.g. [3]")
        size = self.attention_bytes(len(kept))
        if size > ATTENTION_BYTES:
            raise BadInput(
                f"the attention of {len(kept)} layer(s) of {self.source.name} at "
                f"{len(self.pieces):,} pieces is {amount(size)}, more than attnviz keeps for one "
                f"input ({amount(ATTENTION_BYTES)}): name fewer layers, or shorten the text"
            )
        return None if kept == tuple(range(self.num_layers)) else kept

    def memory_note(self, layers: Sequence[int] | None) -> str | None:
        """One line when only some layers will be kept: what the whole would have taken."""
        from attnviz.limits import amount, attention_budget

        whole = self.attention_bytes()
        if layers is None or whole <= attention_budget():
            return None
        kept = self.kept_layers(layers)
        count = self.num_layers if kept is None else len(kept)
        which = "every layer" if kept is None else f"layer {', '.join(map(str, kept))} only"
        return (
            f"{len(self.pieces):,} pieces: keeping {which} ({amount(self.attention_bytes(count))} "
            f"of attention; all {self.num_layers} layers would take {amount(whole)})"
        )

    def what_if_mask(self, mask: str) -> bool:
        """Whether `mask` asks for the causal what-if; refused on a decoder, already causal."""
        causal = check_choice(mask, MASKS, "mask") == "causal"
        if causal:
            self.refuse_internals("the causal what-if ({mask} causal)", param="mask")
        if causal and self.shape.causal:
            raise BadInput(
                f"{{mask}} causal changes nothing on {self.source.name}: it is a decoder, and its "
                "own mask is already causal; leave {mask} out",
                param="mask",
            )
        return causal

    def fit_note(self) -> str | None:
        """One line when the text fits the model's vocabulary badly (see `vocabulary.py`).

        Reads the model card's languages only (not `self.model`, whose tokenizer summary
        parses the whole tokenizer.json), and only when the fit is poor."""
        from attnviz.text.vocabulary import model_languages

        fit = self.fit
        if not fit.poor:
            return None
        languages = model_languages(self.source.folder)
        return fit.note(self.source.name, languages, decoder=self.shape.causal)

    def check_asked(self, asked: Asked) -> None:
        """`check`'s work (see `attnviz.inputs.Input.check`)."""
        from attnviz.measures.contributions import (
            MEASURES,
            check_decoder_comparison,
            check_measure_cost,
            check_model,
        )

        check_model_asked(self, asked)
        check_model(self, asked.measure)
        if asked.compared:
            check_decoder_comparison(self)
        check_measure_cost(self, list(MEASURES) if asked.compared else [asked.measure])
        if asked.words is not None:
            causal = self.shape.causal or asked.mask == "causal"
            self.check_words(asked.words, units=asked.units, causal=causal)
        if asked.out is not None:
            self.check_file(asked.out, measure=asked.measure)

    def analyse(
        self,
        *,
        mask: str = "none",
        dtype: str = "float32",
        cache: bool = True,
        layers: Sequence[int] | None = None,
    ) -> Analysis:
        """Every attention weight of this input: from the cache, or by running the encoder.

        `mask="causal"` is a what-if: the encoder run with a causal mask. `dtype` is what
        the encoder computes in. `cache` reads and writes the attention cache (unless
        ATTNVIZ_NO_CACHE is set). `layers` keeps only those layers (and runs none after
        the last): for long inputs, whose whole attention is refused past
        `attnviz.limits.attention_budget()` (512 MB, or ATTNVIZ_ATTENTION_MB).
        """
        from attnviz.analysis import Analysis
        from attnviz.cache.settings import cache_enabled
        from attnviz.pipeline import compute

        causal = self.what_if_mask(mask)
        check_choice(dtype, DTYPES, "dtype")
        if not isinstance(cache, bool | int):
            raise BadInput(f"{{cache}} must be True or False, got {type(cache).__name__}",
                           param="cache")  # fmt: skip
        found = self.found
        if found is not None and (found.causal, found.dtype) == (causal, dtype):
            kept = None if layers is None else self.kept_layers(layers)
            self.note_engine()
            if kept is None:
                return found
            return Analysis(found.prepared, found.attentions[list(kept)], causal, dtype, kept)
        kept = self.kept_layers(layers)
        try:
            attentions = compute(
                self, causal=causal, use_cache=cache_enabled(not cache), dtype=dtype, layers=kept
            )
        except (MemoryError, RuntimeError) as exc:  # ATTNVIZ_ATTENTION_MB past the memory there is
            error = exhausted(exc)
            if error is None:
                raise
            raise error from None
        self.note_engine()  # once the weights are there: an error is one line alone
        return Analysis(self, attentions, causal, dtype, kept)

    def explain(
        self,
        *,
        token: str | None = None,
        index: int | None = None,
        layer: int = -1,
        head: int = 0,
        lang: str = "en",
        mask: str = "none",
    ) -> Explanation:
        """One query's attention in one head, step by step (see `Analysis.explain`)."""

        from attnviz.language import resolve_lang
        from attnviz.measures.explain import explain, find_query

        if not isinstance(lang, str):
            raise BadInput(f"{{lang}} must be a str such as 'en', got {type(lang).__name__}",
                           param="lang")  # fmt: skip
        lang = resolve_lang(lang)
        self.refuse_internals("explain (each step of one head)")
        causal = self.what_if_mask(mask)
        query = find_query(self.pieces, token=token, index=index, lang=lang)
        self.check(layer=layer, head=head)
        explanation = explain(self, layer=layer, head=head, query=query.index, causal=causal)
        return dataclasses.replace(explanation, lang=lang)

    def check_words(
        self, words: Mapping[str, str], *, units: str = "words", causal: bool = False
    ) -> dict[str, int]:
        """Where each word of `words` (an argument's name -> the word it names) is, in `units`;
        refused when the text lacks it, or when `source` comes before `target` and the
        attention looks only back (`causal`)."""
        from attnviz.measures.find import check_direction
        from attnviz.text.match import find_label

        if not isinstance(words, Mapping):
            raise BadInput(
                f"words must map an argument's name to a word, e.g. {{'query': 'he'}}; got "
                f"{type(words).__name__}"
            )
        for param, word in words.items():
            if not isinstance(param, str) or not isinstance(word, str):
                raise BadInput(
                    f"words must map an argument's name (a str) to a word (a str); got "
                    f"{type(param).__name__} -> {type(word).__name__}"
                )
        by_word = check_choice(units, ("words", "tokens"), "units") == "words"
        labels = [w.label for w in self.words] if by_word else self.labels
        found = {}
        for param, word in words.items():
            found[param] = find_label(labels, word, param)  # `source` (--from) if not found
        if "source" in found and "target" in found:
            check_direction(labels, found["source"], found["target"], causal)
        return found

    def check_file(self, out: str | Path, *, measure: str = "weight") -> None:
        """Refuse `out` when what it would hold is refused: a page (.html) of a measure other
        than the weight, or a .json or .html file of more weights than attnviz writes."""
        from attnviz.limits import check_export
        from attnviz.output import as_path, check_page_measure

        out = as_path(out, "out")
        check_page_measure(out, measure)
        check_export(out.suffix, self.attention_bytes() // 4, self.num_layers * self.num_heads)


def read_input(
    text: str,
    *,
    pair: str | None,
    model: str | None,
    target: str | None,
    generate: int | None,
    stack: str | None,
    truncate: bool,
    cache: bool,
    max_tokens: int | None,
    bos: bool,
    engine: str,
    mask: str,
    dtype: str,
    look_up: bool = True,
) -> Prepared | EncdecInput:
    """The one preparation `attnviz.analyse` and the command line share, the model opened once:
    an encoder-decoder's source and target (`target`, `generate` or `stack` given, or its
    config.json says it is one; never the cache), else with `look_up` the text's analysis
    in the cache (`mask` and `dtype` as `analyse` will ask them; no tokenizer, no torch),
    else the text tokenized for the model. Its `check(...)` and `analyse(...)` do the rest."""
    from attnviz.encdec import encdec_input, found_in, open_encdec

    given = target is not None or generate is not None or stack is not None
    opened = open_encdec(check_model(model), use_cache=check_flag(cache, "cache"))
    if given or found_in(opened) is not None:
        encdec = encdec_input(text, opened, model=model, target=target, generate=generate,
                              stack=stack, truncate=truncate, cache=cache, max_tokens=max_tokens,
                              engine=engine)  # fmt: skip
        if pair is not None:
            raise BadInput(
                "{pair} is for encoders: an encoder-decoder reads a source and a {target_text}; "
                "drop {pair}",
                param=("pair", "target_text"),
            )
        if bos is False:  # the decoder starts from the model's own decoder_start_token_id
            raise BadInput(
                "an encoder-decoder's decoder starts from the model's own start token "
                "(decoder_start_token_id): {bos} changes nothing here; drop it",
                param="bos",
            )
        return encdec
    if opened is None:  # the embedded model, a GGUF file: opened here, once
        from attnviz.model.open import open_model

        opened = open_model(check_model(model), use_cache=cache)
    hit = None
    if look_up:  # a text seen before: no tokenizer, no torch
        hit = from_cache(text, pair=pair, model=model, truncate=truncate, mask=mask, dtype=dtype,
                         cache=cache, max_tokens=max_tokens, bos=bos, engine=engine,
                         opened=opened)  # fmt: skip
    if hit is not None:
        return hit
    return prepare_input(text, opened, pair=pair, model=model, truncate=truncate, cache=cache,
                         max_tokens=max_tokens, bos=bos, engine=engine)  # fmt: skip


def from_cache(
    text: str,
    *,
    pair: str | None,
    model: str | None,
    mask: str,
    dtype: str,
    truncate: bool,
    cache: bool,
    max_tokens: int | None,
    bos: bool,
    engine: str,
    opened: OpenModel | None = None,
) -> Prepared | None:
    """The text prepared from the cache alone, without a tokenizer or torch, its `found`
    analysis the one `analyse(mask=mask, dtype=dtype)` gives; None on a miss. The arguments
    are checked as `analyse` checks them (a bad one raises BadInput); `opened` is the model
    as `model.open.open_model` opened it already (then not opened again)."""
    from attnviz.analysis import Analysis
    from attnviz.cache.settings import cache_enabled
    from attnviz.pipeline import cached

    model, truncate, cache, bos, max_tokens = checked_text(text, pair, model, truncate, cache,
                                                           bos, max_tokens)  # fmt: skip
    causal = check_choice(mask, MASKS, "mask") == "causal"
    check_choice(dtype, DTYPES, "dtype")
    if not cache_enabled(not cache):
        return None
    hit = cached(text, model=model, pair=pair, truncate=truncate, causal=causal, dtype=dtype,
                 max_tokens=max_tokens, bos=bos, engine=engine, opened=opened)  # fmt: skip
    if hit is None:
        return None
    (source, config, pieces, engine), attentions = hit
    prepared = Prepared(source, config, pieces, truncate, max_tokens, bos, engine)
    if causal:
        prepared.refuse_internals("the causal what-if ({mask} causal)", param="mask")
    found = Analysis(prepared, attentions, causal, dtype)
    return dataclasses.replace(prepared, found=found)


def checked_text(
    text: str,
    pair: str | None,
    model: str | None,
    truncate: bool,
    cache: bool,
    bos: bool,
    max_tokens: int | None,
) -> tuple[str | None, bool, bool, bool, int | None]:
    """The text's arguments checked as `prepare` checks them: (model, truncate, cache, bos,
    max_tokens)."""
    model = check_model(model)
    flags = check_flag(truncate, "truncate"), check_flag(cache, "cache"), check_flag(bos, "bos")
    max_tokens = check_max_tokens(max_tokens)
    check_text(text, "the text")
    if pair is not None:
        check_text(pair, "the pair")
    return (model, *flags, max_tokens)


def prepare_input(
    text: str,
    opened: OpenModel | None,
    *,
    pair: str | None,
    model: str | None,
    truncate: bool,
    cache: bool,
    max_tokens: int | None,
    bos: bool,
    engine: str,
) -> Prepared:
    """`attnviz.api.prepare`'s work, on the model `opened` already where it is given."""
    from attnviz.pipeline import prepare as _prepare

    model, truncate, cache, bos, max_tokens = checked_text(text, pair, model, truncate, cache,
                                                           bos, max_tokens)  # fmt: skip
    source, config, pieces, engine = _prepare(
        text,
        model=model,
        pair=pair,
        truncate=truncate,
        use_cache=cache,
        max_tokens=max_tokens,
        bos=bos,
        engine=engine,
        opened=opened,
    )
    return Prepared(source, config, pieces, truncate, max_tokens, bos, engine)

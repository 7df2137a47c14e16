"""An encoder-decoder's input (T5, mT5, BART, Marian, Pegasus): a source, a target, and the stack of
attention to look at; tokenized without torch, computed by transformers' eager model.

`prepare_encdec` tokenizes the source (the text) and the target (`target=`), or notes that
the model will write its own target (`generate=N`); `EncdecInput.analyse()` runs the model
(`attnviz.model.seq2seq`) and returns an `attnviz.Analysis` of one stack:

- `encoder`: the source attending to itself, (L_enc, H, S, S);
- `decoder`: the target attending to the target before it (causal), (L_dec, H, T, T);
- `cross`: each target piece (a query) attending to the source (keys), (L_dec, H, T, S).

An `EncdecInput` offers what an `Analysis` reads of its input (`inputs.PreparedInput`): its
`pieces` are the queries' (the source for `encoder`, the target otherwise) and `key_pieces`
the keys' (the source for `cross`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.errors import PASS_THROUGH, AttnvizError, BadInput, exhausted, short_reason
from attnviz.inputs import DTYPES, Input, ModelInfo, TokenizedInput, check_model_asked, short
from attnviz.limits import check_choice, check_range
from attnviz.model.seq2seq_config import STACKS, Seq2seqShape

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.inputs import Asked
    from attnviz.measures.explain import Explanation
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.model.open import OpenModel
    from attnviz.text.pieces import Pieces

__all__ = [
    "EncdecInput",
    "check_not_encdec",
    "encdec_input",
    "found_in",
    "open_encdec",
    "prepare_encdec",
    "read_encdec",
    "stack_shape",
]

GENERATED = "generated"  # how titles and files mark a target the model wrote itself


@dataclass(frozen=True)
class EncdecInput(TokenizedInput, Input["Analysis"]):
    """A source and a target for an encoder-decoder, and the stack to look at; no weights
    loaded, no torch imported. `target` is None until a generated target is written."""

    source: ModelSource
    config: dict[str, Any] = field(repr=False)
    seq: Seq2seqShape
    stack: str
    source_pieces: Pieces
    target: Pieces | None  # the decoder's input ids (start token first); None: to generate
    generate: int | None = None  # the model writes the target: at most this many tokens
    truncate: bool = False
    max_tokens: int | None = None
    bos: bool = True  # not read: the decoder's start token is the model's own

    def __repr__(self) -> str:
        return (
            f"<EncdecInput {self.source.name} ({self.stack}): source={short(self.text)!r}, "
            f"target={short(self.target.text) if self.target else GENERATED!r}>"
        )

    # ------------------------------------------------------------ what an Analysis reads

    @property
    def pieces(self) -> Pieces:  # type: ignore[override]
        """The queries' pieces: the source's (encoder), else the target's."""
        if self.stack == "encoder":
            return self.source_pieces
        if self.target is None:
            raise AttnvizError("the target is not written yet: call analyse() first")
        return self.target

    @property
    def key_pieces(self) -> Pieces:
        """The keys' pieces: the source's for the cross stack, else the queries'."""
        return self.source_pieces if self.stack == "cross" else self.pieces

    @property
    def text(self) -> str:
        return self.source_pieces.text

    @property
    def generated(self) -> bool:
        """Whether the target is the model's own greedy output."""
        return self.generate is not None

    @property
    def num_layers(self) -> int:
        return self.seq.stack_size(self.stack)[0]

    @property
    def num_heads(self) -> int:
        return self.seq.stack_size(self.stack)[1]

    @cached_property
    def shape(self) -> ModelShape:
        """The stack as a `ModelShape`: causal for `decoder`."""
        return stack_shape(self.seq, self.stack)

    @cached_property
    def model(self) -> ModelInfo:
        """The model, as the stack shown: its layers and heads; causal for `decoder`."""
        from attnviz.text.vocabulary import model_languages

        return ModelInfo(
            self.source.name,
            f"{self.seq.family} ({self.stack_label})",
            self.num_layers,
            self.num_heads,
            self.source.folder,
            self.source.origin,
            self.source.folder,
            model_languages(self.source.folder),
            decoder=self.stack == "decoder",
        )

    @property
    def stack_label(self) -> str:
        """`encoder self-attention`, `decoder self-attention` or `cross-attention`, with
        `generated target` when the model wrote the target."""
        name = {"encoder": "encoder self-attention", "decoder": "decoder self-attention"}.get(
            self.stack, "cross-attention"
        )
        return name + (f", {GENERATED} target" if self.generated else "")

    # ------------------------------------------------------------ checks before any work

    def attention_bytes(self, layers: int | None = None) -> int:
        """The float32 attention of all three stacks, in bytes (transformers returns them
        all); `layers` is ignored (every layer is computed)."""
        S = len(self.source_pieces)
        T = len(self.target) if self.target is not None else 1 + (self.generate or 0)
        seq = self.seq
        enc = seq.encoder_layers * seq.encoder_heads * S * S
        dec = seq.decoder_layers * seq.decoder_heads * (T * T + T * S)
        return 4 * (enc + dec)

    def check_asked(self, asked: Asked) -> None:
        """`check`'s work (see `attnviz.inputs.Input.check`). `words`: `query` and `source` are
        the queries' words (the target's on the cross stack), `target` a key's (the source's
        on the cross stack)."""
        from attnviz.limits import amount, attention_budget, check_export
        from attnviz.output import as_path, check_page_measure

        check_model_asked(self, asked)
        if check_choice(asked.mask, ("none", "causal"), "mask") != "none":
            self.refuse_internals("the causal what-if ({mask} causal)", param="mask")
        if asked.upto is not None and self.stack == "cross":
            raise BadInput(
                "rollout chains a stack's attention through its layers, and the cross "
                "stack's target queries never become its source keys: use {stack} encoder "
                "or {stack} decoder",
                param="stack",
            )
        if self.attention_bytes() > attention_budget():
            raise BadInput(
                f"the attention of {self.source.name}'s three stacks for this source and target "
                f"is {amount(self.attention_bytes())}, more than attnviz keeps for one input "
                f"({amount(attention_budget())}): shorten the source or the target"
            )
        if asked.words is not None:
            self.check_words(asked.words, units=asked.units)
        if asked.out is not None:
            out = as_path(asked.out, "out")
            check_page_measure(out, asked.measure)
            weights = self.num_layers * self.num_heads * len(self.source_pieces) ** 2
            if self.target is not None:
                weights = self.num_layers * self.num_heads * len(self.pieces) * len(self.key_pieces)
            check_export(out.suffix, weights)

    def check_words(
        self, words: Mapping[str, str], *, units: str = "words", causal: bool = False
    ) -> dict[str, int]:
        """Where each word of `words` is: `target` among the keys, any other among the
        queries. A generated target is not written yet: its words are looked up later."""
        from attnviz.text.match import find_label

        by_word = check_choice(units, ("words", "tokens"), "units") == "words"
        found = {}
        for param, word in words.items():
            if not isinstance(word, str):
                raise BadInput(f"{{{param}}} must be a word (a str)", param=param)
            side = self.key_pieces if param == "target" else None
            if side is None and self.target is None and self.stack != "encoder":
                continue
            side = side if side is not None else self.pieces
            labels = [w.label for w in side.words()] if by_word else list(side.labels)
            found[param] = find_label(labels, word, param)
        if self.stack == "decoder" and "source" in found and "target" in found:
            from attnviz.measures.find import check_direction

            check_direction(labels, found["source"], found["target"], True)
        return found

    @property
    def engine(self) -> str:
        """What computes the weights: always transformers' eager model."""
        from attnviz.model.foreign import TRANSFORMERS

        return TRANSFORMERS

    def refuse_internals(self, what: str, *, param: str | None = None) -> None:
        """Refuse `what`, which needs the model's internals (transformers' engine computes
        an encoder-decoder): one line naming the engine."""
        from attnviz.pipeline import refuse_on_transformers

        refuse_on_transformers(self.engine, what, param=param)

    def note_engine(self) -> None:
        """One line on stderr (`--quiet` hides it): transformers' engine computed the weights."""
        from attnviz.cache import notices
        from attnviz.model.foreign import engine_note
        from attnviz.model.seq2seq_config import SEQ2SEQ_CLASSES

        computed_by = SEQ2SEQ_CLASSES[self.seq.model_type]
        notices.note(engine_note(self.source.name, self.config, computed_by))

    def explain(self, **_: Any) -> Explanation:
        """Refused: the step-by-step explanation needs attnviz's own engine."""
        self.refuse_internals("explain (each step of one head)")
        raise AssertionError("unreachable: transformers' engine refuses explain")

    def fit_note(self) -> str | None:
        return None

    # ------------------------------------------------------------ the run

    def analyse(
        self,
        *,
        mask: str = "none",
        dtype: str = "float32",
        layers: Sequence[int] | None = None,
        **_: Any,
    ) -> Analysis:
        """Run the model (transformers' eager attention, in `dtype`; a generated target is
        written first) and return the `Analysis` of this stack: every layer of it (`layers`
        is refused), never from the cache (`cache` is not read); `mask` "causal" is refused
        (see `check`)."""
        from attnviz import perf
        from attnviz.analysis import Analysis
        from attnviz.render.data import Sides

        if layers is not None:
            raise BadInput(
                "{layers} does not apply to an encoder-decoder, which reads a source and a "
                "{target_text} and returns every layer of the stack: leave it out",
                param=("layers", "target_text"),
            )
        self.check(mask=mask)
        check_choice(dtype, DTYPES, "dtype")
        perf.import_torch()
        from attnviz.model.seq2seq import generate_greedy, load_seq2seq, run_stacks
        from attnviz.text.target import generated_pieces
        from attnviz.text.tokenize import load_tokenizer

        try:
            model = load_seq2seq(self.source.folder, dtype)
            chosen = self
            if self.target is None:
                ids = generate_greedy(model, self.source_pieces.ids, self.generate or 1)
                tokenizer = load_tokenizer(self.source.folder)
                chosen = dataclasses.replace(self, target=generated_pieces(tokenizer, ids))
            assert chosen.target is not None
            stacks = run_stacks(model, chosen.source_pieces.ids, chosen.target.ids)
        except AttnvizError:
            raise
        except (MemoryError, Exception) as exc:  # out of memory, or transformers' own failure
            error = exhausted(exc)
            if error is not None:
                raise error from None
            if isinstance(exc, PASS_THROUGH):
                raise
            raise AttnvizError(
                f"transformers' {self.seq.family} failed on this source and target "
                f"({short_reason(exc, 160)}): shorten them, or check the checkpoint"
            ) from exc
        attentions = getattr(stacks, self.stack)
        from attnviz.pipeline import check_finite

        check_finite(attentions, self.source)
        self.note_engine()  # once the weights are there: an error is one line alone
        keys = chosen.source_pieces if self.stack == "cross" else None
        sides = Sides(chosen.source_pieces, chosen.target, self.stack, self.generated)
        return Analysis(chosen, attentions, dtype=dtype, key_pieces=keys, sides=sides)

    def with_stack(self, stack: str) -> EncdecInput:
        """The same source and target, another stack."""
        return dataclasses.replace(self, stack=check_choice(stack, STACKS, "stack"))


def stack_shape(seq: Seq2seqShape, stack: str) -> ModelShape:
    """One stack of an encoder-decoder as a `ModelShape` (its layers and heads), computed by
    transformers' engine; causal for `decoder`."""
    from attnviz.model.families import ModelShape
    from attnviz.model.foreign import TRANSFORMERS

    layers, heads = seq.stack_size(stack)
    return ModelShape(
        family=seq.family,
        layers=layers,
        heads=heads,
        hidden=seq.hidden,
        head_size=max(1, seq.hidden // heads),
        intermediate=seq.hidden,
        vocab=seq.vocab,
        max_tokens=seq.max_tokens,
        activation="",
        embedding_size=seq.hidden,
        type_vocab_size=0,
        model_type=seq.model_type,
        positions=seq.max_tokens,
        engine=TRANSFORMERS,
        foreign_decoder=stack == "decoder",
    )


def open_encdec(model: str | None, *, use_cache: bool = True) -> OpenModel | None:
    """`model` opened (`model.open.open_model`), or None for the embedded model and a GGUF
    file, which are never encoder-decoders (nothing is located for them)."""
    import os

    from attnviz.model.locate import MODEL_ENV, SHORT_NAMES
    from attnviz.model.open import open_model

    spec = model if model is not None else os.environ.get(MODEL_ENV, "").strip() or None
    if spec is None or spec in SHORT_NAMES or Path(spec).expanduser().is_file():
        return None
    return open_model(model, use_cache=use_cache)


def found_in(
    opened: OpenModel | None,
) -> tuple[ModelSource, dict[str, Any], Seq2seqShape] | None:
    """(where the model is, its config.json, its shape) when `opened` is an encoder-decoder,
    else None."""
    seq = None if opened is None else opened.seq2seq()
    return None if opened is None or seq is None else (opened.source, opened.raw, seq)


def read_encdec(
    model: str | None, *, use_cache: bool = True
) -> tuple[ModelSource, dict[str, Any], Seq2seqShape] | None:
    """(where the model is, its shape) when `model` is an encoder-decoder, else None: the
    config.json is read, bounded, without torch."""
    return found_in(open_encdec(model, use_cache=use_cache))


def prepare_encdec(
    text: str,
    found: tuple[ModelSource, dict[str, Any], Seq2seqShape],
    *,
    target: str | None,
    generate: int | None,
    stack: str | None,
    truncate: bool = False,
    use_cache: bool = True,
    max_tokens: int | None = None,
    engine: str = "auto",
) -> EncdecInput:
    """Tokenize the source and the target for the encoder-decoder `found` (`read_encdec`).

    Exactly one of `target` (a text) and `generate` (1 to `MAX_GENERATE` new tokens) is
    given; `stack` is `encoder`, `decoder` or `cross` (None: `cross`)."""
    from attnviz.model.foreign import OWN, check_engine
    from attnviz.model.seq2seq import MAX_GENERATE
    from attnviz.text.target import target_pieces
    from attnviz.text.tokenize import load_tokenizer, tokenize

    source, config, seq = found
    if check_engine(engine) == OWN:
        raise BadInput(
            f"{{engine}} attnviz: attnviz's own engine does not compute encoder-decoders, and "
            f"{source.name} is a {seq.family}; pass {{engine}} transformers (or auto)",
            param="engine",
        )
    stack = check_choice("cross" if stack is None else stack, STACKS, "stack")
    if target is not None and generate is not None:
        raise BadInput(
            "{target_text} and {generate} both give the target: pass one of them",
            param=("target_text", "generate"),
        )
    if target is None and generate is None:
        raise BadInput(
            f"{source.name} is a {seq.family} encoder-decoder: its decoder needs a target, "
            "{target_text} TEXT (e.g. the translation), or {generate} N to let the model write one",
            param=("target_text", "generate"),
        )
    if generate is not None:
        generate = check_range(generate, "generate", (1, MAX_GENERATE))
    limit = seq.max_tokens
    if max_tokens is not None:
        limit = check_range(max_tokens, "max_tokens", (1, seq.max_tokens))
    tokenizer = load_tokenizer(source.folder, use_cache=use_cache)
    pieces = tokenize(tokenizer, text, max_positions=limit, truncate=truncate)
    target_side = None
    if target is not None:
        start = (tokenizer.id_to_token(seq.decoder_start) or "<start>", seq.decoder_start)
        target_side = target_pieces(
            tokenizer, target, start=start, max_positions=limit, truncate=truncate
        )
    elif 1 + (generate or 0) > limit:
        raise BadInput(
            f"{{generate}} {generate} is more than {source.name} writes ({limit - 1} after "
            "its start token): ask for fewer",
            param="generate",
        )
    for side in (pieces, target_side):
        if side is not None and max(side.ids) >= seq.vocab:
            raise AttnvizError(
                f"the tokenizer in {source.folder} gives id {max(side.ids)} but the model's "
                f"vocabulary has {seq.vocab} entries: the tokenizer files and the weights do "
                "not belong together"
            )
    return EncdecInput(
        source,
        config,
        seq,
        stack,
        pieces,
        target_side,
        generate,
        truncate,
        max_tokens,
    )


def check_not_encdec(
    name: str, *, stack: str | None, target: str | None, generate: int | None
) -> None:
    """Refuse `stack`, `target` and `generate` for a model that is not an encoder-decoder."""
    pairs = (("stack", stack), ("target_text", target), ("generate", generate))
    given = [p for p, v in pairs if v is not None]
    if given:
        flags = " and ".join("{" + p + "}" for p in given)
        verb, them = ("is", "it") if len(given) == 1 else ("are", "them")
        raise BadInput(
            f"{flags} {verb} for encoder-decoder models (T5, BART, Marian, ...), and {name} is "
            f"not one: leave {them} out",
            param=tuple(given),
        )


def encdec_input(
    text: str,
    opened: OpenModel | None,
    *,
    model: str | None,
    target: str | None,
    generate: int | None,
    stack: str | None,
    truncate: bool,
    cache: bool,
    max_tokens: int | None,
    engine: str,
) -> EncdecInput:
    """`attnviz.api.prepare_encdec`'s work, on the model `opened` already where it is given."""
    model = check_model(model)
    truncate, cache = check_flag(truncate, "truncate"), check_flag(cache, "cache")
    max_tokens = check_max_tokens(max_tokens)
    check_text(text, "the text")
    if target is not None:
        check_text(target, "the target")
    if stack is not None and not isinstance(stack, str):
        raise BadInput(f"{{stack}} must be a str, got {type(stack).__name__}", param="stack")
    found = read_encdec(model, use_cache=cache) if opened is None else found_in(opened)
    if found is None:
        from attnviz.model.locate import locate

        name = locate(model, use_cache=cache).name if opened is None else opened.source.name
        check_not_encdec(name, stack=stack, target=target, generate=generate)
        raise BadInput(f"{name} is not an encoder-decoder model: call analyse(text) instead")
    return prepare_encdec(
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

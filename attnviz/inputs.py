"""What the face's objects share: the model's description, a tokenized input's words, and
the one input protocol.

`ModelInfo` says which model computed the attention; `TokenizedInput` is what `Prepared`
and `Analysis` both offer about their text (tokens, labels, words, the pair). `Input` is the
one protocol of an input before its attention (a text's `Prepared`, an encoder-decoder's
`EncdecInput`, arrays' `GivenInput`): `check(...)` refuses, before any work, what the call
would refuse (`Asked` holds what the call asks), and `analyse(...)` gives its `Analysis`.
`PreparedInput` is what an `Analysis` reads of the input it came from, so that the analysis
does not import the modules that build it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from attnviz.errors import BadInput
from attnviz.measures.model_input import ModelInput

if TYPE_CHECKING:
    from attnviz.measures.explain import Explanation
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.text.pieces import Pieces, Word
    from attnviz.text.vocabulary import TokenizerInfo, VocabularyFit

__all__ = [
    "ARRAYS_ORIGIN",
    "DTYPES",
    "MASKS",
    "Asked",
    "Input",
    "ModelInfo",
    "PreparedInput",
    "TokenizedInput",
    "check_indices",
    "check_model_asked",
    "no_model",
    "short",
]

MASKS: tuple[str, ...] = ("none", "causal")
DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
# The origin of attention that came as arrays (`attnviz.from_attentions`, `--load`): no model
# computed it here, so nothing can run the model again (explain, measures, compare).
ARRAYS_ORIGIN = "your arrays"


@dataclass(frozen=True)
class ModelInfo:
    """Which model computed the attention, and its shape."""

    name: str  # what was asked for (a folder, a Hub id) or the embedded model's name
    family: str  # "BERT", "RoBERTa", ...
    layers: int
    heads: int
    folder: Path  # where its files are
    origin: str  # "embedded", "local folder" or "Hugging Face Hub"
    # The folder whose tokenizer files `tokenizer` describes, read when first asked (None:
    # none to describe): a cache hit never asks, and Gemma's tokenizer.json takes a second.
    tokenizer_folder: Path | None = field(default=None, repr=False)
    languages: tuple[str, ...] | None = None  # from the model card; None: not stated
    decoder: bool = False  # causal by its own mask (GPT-2, Llama, ...), not an encoder
    kv_heads: int | None = None  # key/value heads, when fewer than `heads` (grouped-query)
    # Attention given as arrays (ARRAYS_ORIGIN): each model layer's sliding window in pieces
    # (None: none), as its file said; () otherwise (a model's config says it).
    windows: tuple[int | None, ...] = ()

    @classmethod
    def read(cls, source: ModelSource, shape: ModelShape) -> ModelInfo:
        """The model in `source` of `shape`, with what its tokenizer and model card say."""
        from attnviz.text.vocabulary import model_languages

        return cls(
            source.name,
            shape.family,
            shape.layers,
            shape.heads,
            source.folder,
            source.origin,
            source.folder,
            model_languages(source.folder),
            decoder=shape.causal,
            kv_heads=shape.kv_heads,
        )

    @cached_property
    def tokenizer(self) -> TokenizerInfo | None:
        """Casing, accents, vocabulary size and kind, from `tokenizer_folder`'s files (read
        once, when first asked; `vocabulary.describe_tokenizer` refuses a bad file)."""
        from attnviz.text.vocabulary import describe_tokenizer

        return None if self.tokenizer_folder is None else describe_tokenizer(self.tokenizer_folder)

    @property
    def has_model(self) -> bool:
        """False for attention given as arrays: no model to run again."""
        return self.origin != ARRAYS_ORIGIN

    @property
    def language_list(self) -> str | None:
        """The model card's languages on one line (the first dozen, then how many), or None."""
        from attnviz.text.vocabulary import language_list

        return language_list(self.languages) if self.languages else None

    @property
    def kind(self) -> str:
        """`encoder`, or `decoder, causal` for a model that only looks back."""
        return "decoder, causal" if self.decoder else "encoder"

    @property
    def grouping(self) -> str | None:
        """Grouped-query attention in words, or None when every query head has its own keys."""
        if not self.kv_heads or self.kv_heads == self.heads:
            return None
        return (
            f"{self.heads} query heads share {self.kv_heads} key/value heads "
            f"({self.heads // self.kv_heads} each)"
        )

    @property
    def description(self) -> str:
        """One line: `all-MiniLM-L6-v2: BERT, 6 layers × 12 heads; language en; ...`."""
        parts = [f"{self.name}: {self.family}, {self.layers} layers × {self.heads} heads"]
        if self.decoder:
            parts[0] += f" ({self.kind})"
        if self.grouping:
            parts.append(self.grouping)
        parts.append(f"language {self.language_list or 'not stated'}")
        if self.tokenizer is not None:
            tok = self.tokenizer
            size = f"{tok.size:,} " if tok.size else ""
            parts.append(f"{size}{tok.kind} pieces; {tok.normalisation}")
        return "; ".join(parts)


class TokenizedInput:
    """What a tokenized input offers, with or without its attention: the base of `Prepared`
    and `Analysis`."""

    pieces: Pieces

    @property
    def text(self) -> str:
        return self.pieces.text

    @property
    def pair(self) -> str | None:
        return self.pieces.pair

    @property
    def tokens(self) -> list[str]:
        """The model's vocabulary pieces, special tokens included: `[CLS]`, `joao`, `##ou`."""
        return list(self.pieces.tokens)

    @property
    def labels(self) -> list[str]:
        """Each piece as the text spells it: `João`, `pens`, `##ou` (special tokens as named)."""
        return list(self.pieces.labels)

    @property
    def words(self) -> list[Word]:
        """The words of the text, each with the indices of its pieces; a special token is a word."""
        return self.pieces.words()

    @property
    def pair_start(self) -> int | None:
        """The piece where sentence B starts; None without a pair."""
        return next((i for i, seq in enumerate(self.pieces.sequence_ids) if seq == 1), None)

    @property
    def dropped(self) -> int:
        """Pieces cut off the end by truncation."""
        return self.pieces.dropped

    @property
    def fit(self) -> VocabularyFit:
        """How the text fits the model's vocabulary: pieces per word, unknown words."""
        from attnviz.text.vocabulary import vocabulary_fit

        return vocabulary_fit(self.pieces)


# What `Input.analyse` gives: an `attnviz.Analysis` (named by its users, so that this module,
# which `attnviz.analysis` imports, need not import it back).
Analysed = TypeVar("Analysed", covariant=True)


@dataclass(frozen=True)
class Asked:
    """What a call asks of an input's attention, as `Input.check` takes it (see there)."""

    layer: int | None = None
    head: int | None = None
    heads: Sequence[int] | None = None
    upto: int | None = None  # rollout's last layer
    measure: str = "weight"
    view: str = "show"
    words: Mapping[str, str] | None = None  # an argument's name -> the word it names
    units: str = "words"
    mask: str = "none"
    out: str | Path | None = None  # the file to write
    compared: bool = False  # every measure, side by side (`Analysis.compare`)


class Input(Protocol[Analysed]):
    """The one input protocol: an input before its attention (`Prepared`, `EncdecInput`,
    `GivenInput` subclass it), checked cheaply, then analysed."""

    def check(
        self,
        *,
        layer: int | None = None,
        head: int | None = None,
        heads: Sequence[int] | None = None,
        upto: int | None = None,
        measure: str = "weight",
        view: str = "show",
        words: Mapping[str, str] | None = None,
        units: str = "words",
        mask: str = "none",
        out: str | Path | None = None,
        compared: bool = False,
    ) -> None:
        """Refuse, before any attention is computed (no weights, no torch), what the call these
        arguments are for would refuse. The command line's one pre-check; from Python:
        `attnviz.prepare(text).check(layer=9)`.

        - `layer`, `head`, `heads`, `upto` (rollout's last layer): one this model does not have.
        - `measure` (see `Analysis.measure`): a per-layer measure asked for one head, a list
          of `heads` or the heads `view` ("show", "heads", "model"); any but the weight on a
          decoder family whose decomposition attnviz has not checked. `compared`: the
          measures `Analysis.compare` sets side by side, refused on such a family too.
        - `words`: each argument's name and the word it names, e.g. `{"source": "he",
          "target": "John"}` (`Analysis.find`) or `{"query": "he"}`, looked up among the
          words (or pieces, `units="tokens"`); `source` after `target` under a causal
          attention (a decoder, or `mask="causal"`).
        - `out`, the file to write: a page (.html) of a measure other than the weight; a
          .json or .html file of more weights than attnviz writes.
        """
        self.check_asked(
            Asked(layer, head, heads, upto, measure, view, words, units, mask, out, compared)
        )

    def check_asked(self, asked: Asked) -> None:
        """`check`'s work, each input kind its own."""
        ...

    def analyse(
        self,
        *,
        mask: str = "none",
        dtype: str = "float32",
        cache: bool = True,
        layers: Sequence[int] | None = None,
    ) -> Analysed:
        """The input's attention: computed, read from the cache, or the arrays given."""
        ...

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
        ...


class PreparedInput(ModelInput, Input[Any], Protocol):
    """What an `Analysis` reads of the input it was computed for (`Prepared` is one): what a
    measure reads (`source`, `config`, `pieces`, `shape`), the model's description and its
    size, and the one input protocol (its checks, its explanation)."""

    @property
    def model(self) -> ModelInfo: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...


def check_indices(asked: Asked, layers: int, heads: int) -> None:
    """Refuse a layer, head, list of heads or rollout's last layer (`upto`) that a model of
    `layers` layers and `heads` heads does not have."""
    from attnviz.limits import resolve_heads, resolve_index

    if asked.layer is not None:
        resolve_index(asked.layer, layers, "layer")
    if asked.head is not None:
        resolve_index(asked.head, heads, "head")
    if asked.upto is not None:
        resolve_index(asked.upto, layers, "layer", "upto")
    resolve_heads(asked.heads, heads)


def check_model_asked(prepared: PreparedInput, asked: Asked) -> None:
    """What an input with a model refuses of `asked`: the measure where it does not apply (see
    `Analysis.measure`), any but the weight (or the comparison of them all) where the model's
    internals are not attnviz's to read, and a layer or head the model does not have."""
    from attnviz.measures.contributions import check_measure

    check_measure(asked.measure, head=asked.head, heads=asked.heads, view=asked.view)
    if asked.compared:
        prepared.refuse_internals("comparing the measures")
    elif asked.measure != "weight":
        prepared.refuse_internals(f"{{measure}} {asked.measure}", param="measure")
    check_indices(asked, prepared.num_layers, prepared.num_heads)


def no_model(what: str) -> BadInput:
    """The refusal of `what` (explain, a measure) on attention given as arrays."""
    return BadInput(
        f"{what} needs the model that computed the attention, and this analysis has no model "
        "(its attention came as arrays: from_attentions or --load); analyse the text with "
        "attnviz's own engine instead"
    )


def short(text: str, limit: int = 40) -> str:
    """`text` cut to `limit` characters for a repr."""
    return text if len(text) <= limit else text[: limit - 1] + "…"

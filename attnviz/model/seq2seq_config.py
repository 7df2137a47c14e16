"""An encoder-decoder's config.json (T5, mT5, BART, Marian, Pegasus), read without torch.

transformers computes these models (`attnviz.model.seq2seq`); this module says whether a
config is one, and reads the sizes attnviz needs before any weight is read: each stack's
layers and heads, the vocabulary, how long a source and a target may be, and the token the
decoder starts from. Absurd sizes are refused in one line naming the key, as
`families.describe` refuses an encoder's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnviz.errors import AttnvizError
from attnviz.limits import DECODER_TOKENS, shown
from attnviz.model.config import whole
from attnviz.model.families import ENCODER_DECODERS
from attnviz.model.families.kinds import Seq2seqFamily

__all__ = [
    "SEQ2SEQ_CLASSES",
    "SEQ2SEQ_TYPES",
    "STACKS",
    "Seq2seqShape",
    "check_names",
    "describe_seq2seq",
    "is_seq2seq",
]

# The model types read here (one file a family, in `attnviz.model.families`), each one's
# display name, and the transformers class that computes it (AutoModelForSeq2SeqLM's
# choice, named without importing it): what info and the engine note say.
SEQ2SEQ_TYPES: dict[str, str] = {kind: f.name for kind, f in ENCODER_DECODERS.items()}
SEQ2SEQ_CLASSES: dict[str, str] = {kind: f.class_name for kind, f in ENCODER_DECODERS.items()}
# The three stacks of attention an encoder-decoder has; `cross` is the rectangle.
STACKS: tuple[str, ...] = ("encoder", "decoder", "cross")

_LIMITS = {
    "encoder_layers": 256,
    "decoder_layers": 256,
    "encoder_heads": 1024,
    "decoder_heads": 1024,
    "hidden": 65536,
    "vocab": 4_000_000,
}


@dataclass(frozen=True)
class Seq2seqShape:
    """What an encoder-decoder's config.json says, for code that must not import torch."""

    family: str  # "T5", "BART", ...
    model_type: str
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    hidden: int
    vocab: int
    max_tokens: int  # the longest source, and the longest target, in pieces
    decoder_start: int  # the id the decoder starts from (decoder_start_token_id)
    pad: int | None  # pad_token_id

    def stack_size(self, stack: str) -> tuple[int, int]:
        """(layers, heads) of `stack`: the encoder's, or the decoder's (decoder and cross)."""
        if stack == "encoder":
            return self.encoder_layers, self.encoder_heads
        return self.decoder_layers, self.decoder_heads


# The config.json keys that name what a model is: a string each where set (a list or an
# object there is a corrupt config, refused by `check_names` before any is looked up).
NAME_KEYS = ("model_type",)
# Keys that say yes or no: true, false or null.
FLAG_KEYS = ("is_encoder_decoder", "is_decoder")


def check_names(raw: dict[str, Any], *, where: str = "config.json") -> None:
    """Refuse, in one line naming the key, a config.json whose model_type is not a string or
    whose is_encoder_decoder / is_decoder is not true or false: every reader looks them up."""
    for key in NAME_KEYS:
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise AttnvizError(
                f'{where} has {key}={shown(value, 40)}; expected a name such as "bert": the '
                "config is corrupt"
            )
    for key in FLAG_KEYS:
        value = raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise AttnvizError(
                f"{where} has {key}={shown(value, 40)}; expected true or false: the config is "
                "corrupt"
            )


def is_seq2seq(raw: dict[str, Any]) -> bool:
    """Whether a config.json describes an encoder-decoder (`is_encoder_decoder`, or one of
    the model types read here); a model_type that is not a string is none of them."""
    kind = raw.get("model_type")
    return raw.get("is_encoder_decoder") is True or (
        isinstance(kind, str) and kind in SEQ2SEQ_TYPES
    )


def describe_seq2seq(
    raw: dict[str, Any], *, where: str = "config.json", start: object = None
) -> Seq2seqShape:
    """The encoder-decoder `raw` describes, checked before anything is allocated.

    `start` is generation_config.json's `decoder_start_token_id`, used when config.json has
    none (T5's configs keep it in either). One line naming the key for another encoder-
    decoder type, a size that is not a whole number in range, or no start token.
    """
    model_type = raw.get("model_type")
    if model_type not in SEQ2SEQ_TYPES:
        raise AttnvizError(
            f"{where} describes an encoder-decoder of model type {shown(model_type)}; attnviz "
            f"reads the encoder-decoders {', '.join(SEQ2SEQ_TYPES)}: pass a checkpoint of one "
            "of these"
        )
    family = ENCODER_DECODERS[model_type]
    sizes: dict[str, int] = {}
    for name, key in family.keys.items():
        value: Any = raw.get(key)
        if value is None and name == "decoder_layers":  # T5: as many as the encoder's
            value = sizes["encoder_layers"]
        if not whole(value, 1, _LIMITS[name]):
            raise AttnvizError(
                f"{where} describes an encoder-decoder model ({SEQ2SEQ_TYPES[model_type]}) "
                f"with {key}={shown(value)}; expected a whole number from 1 to "
                f"{_LIMITS[name]}: the config is corrupt or not a {SEQ2SEQ_TYPES[model_type]}'s"
            )
        sizes[name] = value
    max_tokens = _max_tokens(raw, family, where)
    first: Any = raw.get("decoder_start_token_id")
    key = "decoder_start_token_id"
    if first is None:
        first, key = start, "generation_config.json's decoder_start_token_id"
    if not whole(first, 0, sizes["vocab"] - 1):
        raise AttnvizError(
            f"{where} describes an encoder-decoder whose {key} is {shown(first)}; its decoder "
            f"needs the id it starts from, a whole number below vocab_size={sizes['vocab']}: "
            "set decoder_start_token_id in config.json (T5 and Marian start from the pad id)"
        )
    pad = raw.get("pad_token_id")
    return Seq2seqShape(
        family=SEQ2SEQ_TYPES[model_type],
        model_type=model_type,
        max_tokens=max_tokens,
        decoder_start=first,
        pad=pad if whole(pad, 0, sizes["vocab"] - 1) else None,
        **sizes,
    )


def _max_tokens(raw: dict[str, Any], family: Seq2seqFamily, where: str) -> int:
    """The longest source (and target) in pieces: learned positions (BART's) bound it;
    relative ones (T5's) do not, so attnviz bounds it as it bounds a decoder's text."""
    if family.positions is None:
        return DECODER_TOKENS
    positions = raw.get("max_position_embeddings", family.positions)
    if not whole(positions, 1, 65536):
        raise AttnvizError(
            f"{where} has max_position_embeddings={shown(positions)}; expected a whole number "
            "from 1 to 65536: the config is corrupt"
        )
    return positions

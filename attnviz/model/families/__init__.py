"""The registry of model families (model type -> family, one file a family), and the reader
of every config.json attnviz computes.

Each family's file (`bert.py`, ..., `gemma3.py`) holds its facts; shared code reads them
through `FAMILIES` (encoders) and `DECODERS` (decoders) here.
The encoders computed are BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT;
the decoders GPT-2, Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and Gemma 3, each read by
its family's reader (`reader.DecoderReader`; a child's extends its parent's). The
encoder-decoders that transformers computes (T5, mT5, BART, Marian, Pegasus) are listed in
`ENCODER_DECODERS`, read by `attnviz.model.seq2seq_config`.
`describe` reads any of their config.json files into one torch-free `ModelShape`,
refusing absurd sizes before anything is allocated; `Family` (`families.kinds`) names each
encoder family's config keys, state-dict names and quirks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import CONFIG_BYTES, DECODER_TOKENS
from attnviz.model.config import (
    DecoderConfig,
    EncoderConfig,
    agreed,
    check_activation,
    shown,
    whole,
)
from attnviz.model.families.albert import ALBERT
from attnviz.model.families.bart import BART
from attnviz.model.families.bert import BERT
from attnviz.model.families.distilbert import DISTILBERT
from attnviz.model.families.electra import ELECTRA
from attnviz.model.families.gemma2 import GEMMA2
from attnviz.model.families.gemma3 import GEMMA3, GEMMA3_MULTIMODAL
from attnviz.model.families.gpt2 import GPT2
from attnviz.model.families.kinds import DecoderFamily, Family, Seq2seqFamily
from attnviz.model.families.llama import LLAMA
from attnviz.model.families.marian import MARIAN
from attnviz.model.families.mistral import MISTRAL
from attnviz.model.families.pegasus import PEGASUS
from attnviz.model.families.phi3 import PHI3
from attnviz.model.families.qwen2 import QWEN2
from attnviz.model.families.qwen3 import QWEN3
from attnviz.model.families.roberta import ROBERTA, XLM_ROBERTA
from attnviz.model.families.t5 import MT5, T5
from attnviz.reading import read_json

# The registry of decoders: model type -> its family's facts (one line a family).
DECODERS: dict[str, DecoderFamily] = {
    "gpt2": GPT2,
    "llama": LLAMA,
    "mistral": MISTRAL,
    "qwen2": QWEN2,
    "qwen3": QWEN3,
    "phi3": PHI3,
    "gemma2": GEMMA2,
    "gemma3_text": GEMMA3,
    "gemma3": GEMMA3_MULTIMODAL,  # multimodal: the language model's config is text_config
}
# The registry of encoder-decoders (computed by transformers; read by
# `attnviz.model.seq2seq_config`): model type -> its family.
ENCODER_DECODERS: dict[str, Seq2seqFamily] = {
    "t5": T5,
    "mt5": MT5,
    "bart": BART,
    "marian": MARIAN,
    "pegasus": PEGASUS,
}

# Sizes past these are not an encoder this tool can show; refuse before allocating.
# Keyed by `ModelShape` field; messages name each family's own config key.
LIMITS = {
    "layers": 256,
    "heads": 1024,
    "hidden": 65536,
    "intermediate": 262144,
    "positions": 65536,
    "vocab": 4_000_000,
    "type_vocab_size": 1024,
    "embedding_size": 65536,
}

# ---------------------------------------------------------------------------------------------
# Families: where each keeps its sizes in config.json and its weights in the state dict.

# The registry of encoders: model type -> its family (one line a family).
FAMILIES: dict[str, Family] = {
    "bert": BERT,
    "roberta": ROBERTA,
    "xlm-roberta": XLM_ROBERTA,
    "distilbert": DISTILBERT,
    "electra": ELECTRA,
    "albert": ALBERT,
}
SUPPORTED_TYPES = (*FAMILIES, *DECODERS)
SUPPORTED_FAMILIES = (
    "BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT encoders, and GPT-2, Llama, "
    "Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and Gemma 3 decoders"
)
# A config.json without model_type is taken for BERT when it has BERT's keys and nothing
# that marks another architecture.
_BERT_SHAPE = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
_NOT_BERT = ("embedding_size", "n_layer", "n_layers", "d_model", "num_key_value_heads")


@dataclass(frozen=True)
class ModelShape:
    """What a config.json says about the encoder, for code that must not import torch."""

    family: str  # display name: "BERT", "RoBERTa", "XLM-RoBERTa", "DistilBERT", ...
    layers: int
    heads: int
    hidden: int
    head_size: int
    intermediate: int
    vocab: int
    max_tokens: int  # the longest input in pieces, special tokens included
    activation: str
    embedding_size: int  # the width of the embedding tables (== hidden unless factorised)
    type_vocab_size: int  # 0 when the family has no token types (DistilBERT)
    model_type: str = "bert"  # the key into FAMILIES
    positions: int = 512  # rows of the position table (max_position_embeddings)
    layer_norm_eps: float = 1e-12
    pad_position: int | None = None  # RoBERTa's padding index, which positions count after
    project_embeddings: bool = False  # a Linear embedding_size -> hidden after the embeddings
    shared_layers: bool = False  # ALBERT: all layers share one layer's weights
    decoder: DecoderConfig | None = None  # set for a decoder (GPT-2, Llama, Mistral, Qwen2)
    # Who computes the attention: "attnviz" (this package's modules) or "transformers"
    # (transformers' eager model, for a model type attnviz does not compute: model.foreign).
    engine: str = "attnviz"
    foreign_decoder: bool = False  # a decoder that transformers' engine computes

    @property
    def causal(self) -> bool:
        """A decoder: each token sees only itself and the tokens before it."""
        return self.decoder is not None or self.foreign_decoder

    @property
    def own_max_tokens(self) -> int:
        """The longest input the model itself takes (a decoder's `max_tokens` is attnviz's)."""
        if self.decoder is not None:
            return self.decoder.max_positions
        return self.positions if self.foreign_decoder else self.max_tokens

    def token_limit(self, max_tokens: int | None = None, blocked: bool = False) -> tuple[int, str]:
        """The longest input read, and why when it is not the model's own limit.

        `max_tokens` (--max-tokens) sets it, up to the model's own limit and to the most
        pieces whose attention in one layer fits what attnviz keeps (`limits`); by default
        a decoder reads at most `limits.DECODER_TOKENS` pieces. `blocked`: the views made for
        length, which never hold one layer whole, read up to `limits.LONG_TOKENS`.
        """
        from attnviz.limits import ATTENTION_ENV, LONG_TOKENS, amount, check_range, longest_input

        own, fits = self.own_max_tokens, longest_input(self.heads)
        if blocked:
            limit = min(own, LONG_TOKENS)
            if max_tokens is None:
                return limit, "" if limit == own else " (attnviz's bound for the long views)"
            limit = check_range(
                max_tokens, "max_tokens", (1, limit), f" (the long views read at most {limit:,})"
            )
            return limit, " ({max_tokens})"
        if max_tokens is not None:
            limit = check_range(
                max_tokens, "max_tokens", (1, own), f" (this model takes at most {own:,})"
            )
            if limit > fits:
                size = self.heads * limit * limit * 4
                raise BadInput(
                    f"{{max_tokens}} {limit}: one layer's attention at {limit:,} pieces is "
                    f"{amount(size)} ({self.heads} heads), more than attnviz keeps for one input "
                    f"({amount(self.heads * fits * fits * 4)} fits {fits:,} pieces; "
                    f"{ATTENTION_ENV} raises the budget): use {{max_tokens}} {fits} or less",
                    param="max_tokens",
                )
            return limit, "" if limit == own else " ({max_tokens})"
        limit = min(self.max_tokens, own)
        if limit > fits:
            return fits, (
                f" (the most whose attention in one layer fits what attnviz keeps; "
                f"{ATTENTION_ENV} raises it)"
            )
        if limit < own:
            return limit, (
                f" (attnviz's bound for a decoder; {{max_tokens}} raises it up to the model's "
                f"{own:,})"
            )
        return own, ""

    @property
    def kv_heads(self) -> int:
        """Key/value heads: fewer than `heads` under grouped-query attention."""
        return self.decoder.num_kv_heads if self.decoder is not None else self.heads


def read_config(folder: Path) -> dict[str, Any]:
    """The raw config.json of a model folder, checked (by `describe`) to be a family we compute.

    Read only when it is a regular file of at most `limits.CONFIG_BYTES`."""
    raw = read_raw_config(folder)
    describe(raw, where=str(folder / "config.json"))
    return raw


def read_raw_config(folder: Path) -> dict[str, Any]:
    """The config.json of a model folder as a JSON object, not yet checked to be a family
    attnviz computes (`model.foreign` reads the others). Bounded as `read_config` reads it."""
    path = folder / "config.json"
    if not path.exists():
        raise AttnvizError(
            f"{folder} has no config.json: pass the folder of a BERT-family or decoder checkpoint "
            "(config.json and model.safetensors)"
        )
    raw = read_json(path, CONFIG_BYTES, "config.json")
    if not isinstance(raw, dict):
        raise AttnvizError(f"{path} is not a JSON object: restore or re-download the file")
    return raw


def computes(raw: dict[str, Any]) -> bool:
    """Whether attnviz's own engine computes the model type of this config.json (its sizes
    are checked later, by `describe`)."""
    try:
        _model_type(raw, "config.json")
    except AttnvizError:
        return False
    return True


def _model_type(raw: dict[str, Any], where: str) -> str:
    model_type = raw.get("model_type")
    if model_type is None:
        architectures = raw.get("architectures") or ["Bert"]
        bert_named = isinstance(architectures, list) and all(
            isinstance(a, str) and a.startswith("Bert") for a in architectures
        )
        if (
            bert_named
            and all(k in raw for k in _BERT_SHAPE)
            and not any(k in raw for k in _NOT_BERT)
        ):
            return "bert"
        what = "model without model_type that is not shaped like BERT"
    elif isinstance(model_type, str) and model_type in SUPPORTED_TYPES:
        return model_type
    else:
        what = f"{shown(model_type)} model"
    raise AttnvizError(
        f"{where} describes a {what}; attnviz computes {SUPPORTED_FAMILIES} "
        f"(model types: {', '.join(SUPPORTED_TYPES)}): pass a checkpoint of one of these"
    )


def describe(raw: dict[str, Any], *, where: str = "config.json") -> ModelShape:
    """The encoder a config.json describes, checked before anything is allocated.

    Raises AttnvizError, one line naming the key as stored, for another architecture,
    a decoder, relative positions, an activation the encoder lacks, or sizes that are
    not whole numbers in range or do not fit together. `where` names the file.
    """
    model_type = _model_type(raw, where)
    if model_type in DECODERS:
        return _decoder_shape(DECODERS[model_type].describe(raw, where), model_type)
    family = FAMILIES[model_type]
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise AttnvizError(
            f"{where} is a decoder (is_decoder); attnviz shows encoder self-attention only: "
            f"use a {family.name} encoder checkpoint"
        )
    position_type = raw.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise AttnvizError(
            f"{where} uses position_embedding_type={shown(position_type)}; attnviz computes "
            "only absolute position embeddings"
        )

    def value(name: str) -> Any:
        key = family.keys.get(name)
        return raw.get(key, family.defaults[name]) if key else family.defaults[name]

    sizes: dict[str, int] = {}
    for name, limit in LIMITS.items():
        key = family.keys.get(name)
        if key is None:
            continue
        found = agreed(raw, (key, family.aliases[name]), where) if name in family.aliases else None
        key, sizes[name] = found or (key, raw.get(key, family.defaults[name]))
        if not whole(sizes[name], 1, limit):
            raise AttnvizError(
                f"{where} has {key}={shown(sizes[name])}; expected a whole number from 1 to "
                f"{limit}: the config is corrupt or not a {family.name}"
            )
    sizes.setdefault("type_vocab_size", 0)  # DistilBERT has no token types
    sizes.setdefault("embedding_size", sizes["hidden"])  # unfactorised embeddings
    act = check_activation(value("activation"), family.keys["activation"], where)
    eps = value("layer_norm_eps")  # DistilBERT fixes 1e-12 in its code
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
        raise AttnvizError(
            f"{where} has layer_norm_eps={shown(eps)}; expected a small positive number such as "
            "1e-12: the config is corrupt"
        )
    hidden, heads = sizes["hidden"], sizes["heads"]
    if hidden % heads:
        raise AttnvizError(
            f"{where} has {family.keys['hidden']}={hidden}, not divisible by "
            f"{family.keys['heads']}={heads}: the config is corrupt"
        )
    _check_quirks(raw, family, where)
    positions, pad = sizes["positions"], None
    max_tokens = positions
    if family.pad_positions:
        pad = raw.get("pad_token_id", family.defaults["pad_token_id"])
        if not whole(pad, 0, positions - 2):
            raise AttnvizError(
                f"{where} has pad_token_id={shown(pad)} with "
                f"max_position_embeddings={positions}; "
                f"{family.name} numbers positions after the padding index, so it must be a whole "
                f"number below {positions - 1}: the config is corrupt"
            )
        max_tokens = positions - pad - 1
    embedding = sizes["embedding_size"]
    project = family.projection == "always" or (
        family.projection == "if narrower" and embedding != hidden
    )
    return ModelShape(
        family=family.name,
        layers=sizes["layers"],
        heads=heads,
        hidden=hidden,
        head_size=hidden // heads,
        intermediate=sizes["intermediate"],
        vocab=sizes["vocab"],
        max_tokens=max_tokens,
        activation=act,
        embedding_size=embedding,
        type_vocab_size=sizes["type_vocab_size"],
        model_type=model_type,
        positions=positions,
        layer_norm_eps=float(eps),
        pad_position=pad,
        project_embeddings=project,
        shared_layers=family.shared_layers,
    )


def _decoder_shape(cfg: DecoderConfig, model_type: str) -> ModelShape:
    """A decoder's `ModelShape`: its longest input is its own limit or attnviz's bound."""
    return ModelShape(
        family=DECODERS[model_type].name,
        layers=cfg.num_layers,
        heads=cfg.num_heads,
        hidden=cfg.hidden_size,
        head_size=cfg.head_size,
        intermediate=cfg.intermediate_size,
        vocab=cfg.vocab_size,
        max_tokens=min(cfg.max_positions, DECODER_TOKENS),
        activation=cfg.hidden_act,
        embedding_size=cfg.hidden_size,
        type_vocab_size=0,
        model_type=model_type,
        positions=cfg.max_positions,
        layer_norm_eps=cfg.norm_eps,
        decoder=cfg,
    )


def _check_quirks(raw: dict[str, Any], family: Family, where: str) -> None:
    """Family-specific settings the encoder does not compute."""
    if family.shared_layers:
        groups, inner = raw.get("num_hidden_groups", 1), raw.get("inner_group_num", 1)
        if groups != 1 or inner != 1 or isinstance(groups, bool) or isinstance(inner, bool):
            raise AttnvizError(
                f"{where} has num_hidden_groups={shown(groups)} and "
                f"inner_group_num={shown(inner)}; "
                "attnviz computes ALBERT with one shared layer only (both 1, as every released "
                "ALBERT has)"
            )
    sinusoidal = raw.get("sinusoidal_pos_embds", False)
    if not isinstance(sinusoidal, bool):
        raise AttnvizError(
            f"{where} has sinusoidal_pos_embds={shown(sinusoidal)}; expected true or false: "
            "the config is corrupt"
        )


def encoder_config_for(shape: ModelShape) -> EncoderConfig:
    """The encoder's shape from a described config.json."""
    return EncoderConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        num_layers=shape.layers,
        num_heads=shape.heads,
        intermediate_size=shape.intermediate,
        max_positions=shape.positions,
        type_vocab_size=shape.type_vocab_size,
        layer_norm_eps=shape.layer_norm_eps,
        hidden_act=shape.activation,
        embedding_size=shape.embedding_size,
        project_embeddings=shape.project_embeddings,
        pad_position=shape.pad_position,
        shared_layers=shape.shared_layers,
    )

"""Which engine computes a model's attention, and the shape of a model attnviz does not compute.

attnviz's own engine (`encoder.py`, `decoder.py`) computes the families of `families.py`.
For any other model type, transformers' eager model can (`hf_engine.py`): `resolve_engine`
picks one (`auto`: attnviz's where it computes the type), and `describe_foreign` reads the
other config.json files into the same torch-free `ModelShape` (layers, heads, causal or not,
its token limit), refusing before anything is allocated what the transformers engine cannot
show: models without attention (Mamba, RWKV), configs that need remote code (`auto_map`),
absurd sizes, and encoder-decoder models (`refuse_encoder_decoder`).
This module imports neither torch nor transformers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import DECODER_TOKENS, check_choice, shown
from attnviz.model.config import whole
from attnviz.model.families import (
    DECODERS,
    ENCODER_DECODERS,
    LIMITS,
    ModelShape,
    computes,
    describe,
)

ENGINES = ("auto", "attnviz", "transformers")
OWN, TRANSFORMERS = "attnviz", "transformers"

# Model types with no attention weights to show: state-space and recurrent models, and hybrids
# whose layers are not all attention layers (transformers returns no weights for the others).
ATTENTIONLESS = (
    "mamba",
    "mamba2",
    "falcon_mamba",
    "rwkv",
    "xlstm",
    "recurrent_gemma",
    "jamba",
    "bamba",
    "zamba",
    "zamba2",
    "falcon_h1",
    "nemotron_h",
    "granitemoehybrid",
    "lfm2",
    "lfm2_moe",
    "qwen3_next",
    "kimi_linear",
    "olmo_hybrid",
)
# Encoder-decoder model types (their configs may leave is_encoder_decoder to the class default):
# those attnviz reads (the registry's), then the others.
ENCODER_DECODER_TYPES = (
    *ENCODER_DECODERS,
    "umt5",
    "longt5",
    "switch_transformers",
    "t5gemma",
    "mbart",
    "pegasus_x",
    "m2m_100",
    "nllb-moe",
    "fsmt",
    "led",
    "prophetnet",
    "blenderbot",
    "blenderbot-small",
    "plbart",
    "bigbird_pegasus",
    "mvp",
    "encoder-decoder",
    "whisper",
    "speech_to_text",
)
# Decoder model types: each token sees only the tokens before it. Those attnviz computes (the
# registry's), then those only transformers computes. A config of another type is a decoder
# when it says so (is_decoder) or when its architecture is a causal LM (tests check this
# list against transformers' own).
DECODER_TYPES = (
    *DECODERS,
    "olmo",
    "olmo2",
    "olmo3",
    "olmoe",
    "falcon",
    "gpt_neox",
    "gpt_neo",
    "gptj",
    "gpt_bigcode",
    "bloom",
    "opt",
    "mpt",
    "codegen",
    "stablelm",
    "phi",
    "cohere",
    "cohere2",
    "starcoder2",
    "gemma",
    "granite",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "persimmon",
    "xglm",
    "biogpt",
    "openai-gpt",
    "ctrl",
    "smollm3",
    "helium",
    "glm",
    "glm4",
    "exaone4",
    "nemotron",
    "ministral",
    "arcee",
    "seed_oss",
    "gpt_oss",
    "bitnet",
    "vaultgemma",
    "modernbert-decoder",
)
# Encoder model types (transformers has a masked LM of each and no causal LM): every token
# sees every other, whatever `architectures` claims (tests check this list against transformers').
ENCODER_TYPES = (
    "albert",
    "convbert",
    "deberta",
    "deberta-v2",
    "distilbert",
    "esm",
    "eurobert",
    "flaubert",
    "fnet",
    "funnel",
    "ibert",
    "layoutlm",
    "longformer",
    "luke",
    "mobilebert",
    "modernbert",
    "mpnet",
    "mra",
    "nomic_bert",
    "nystromformer",
    "squeezebert",
    "tapas",
    "yoso",
)
# Encoder types whose transformers model turns causal when config.json sets is_decoder (it has
# both a masked and a causal LM of them): a decoder then, an encoder otherwise.
DECODER_CAPABLE_TYPES = (
    "bert",
    "big_bird",
    "camembert",
    "data2vec-text",
    "electra",
    "ernie",
    "megatron-bert",
    "reformer",
    "rembert",
    "roberta",
    "roberta-prelayernorm",
    "roc_bert",
    "roformer",
    "xlm",
    "xlm-roberta",
    "xlm-roberta-xl",
    "xmod",
)
# Encoders that number positions after the padding index, as RoBERTa does: their longest input
# is max_position_embeddings - pad_token_id - 1 (514 - 1 - 1 = 512 for MPNet).
PAD_POSITION_TYPES = (
    "mpnet",
    "camembert",
    "xlm-roberta-xl",
    "data2vec-text",
    "roberta-prelayernorm",
    "longformer",
    "ibert",
    "xmod",
)
# Display names of some types (others are shown as their model_type).
NAMES = {
    "deberta-v2": "DeBERTa-v2",
    "deberta": "DeBERTa",
    "mpnet": "MPNet",
    "modernbert": "ModernBERT",
    "olmo": "OLMo",
    "olmo2": "OLMo 2",
    "falcon": "Falcon",
    "bert": "BERT",
    "roberta": "RoBERTa",
    "gpt_neox": "GPT-NeoX",
    "opt": "OPT",
    "bloom": "BLOOM",
}
# Where a config.json keeps each size, by `ModelShape` field: the first key set counts.
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "hidden": ("hidden_size", "d_model", "n_embd", "dim"),
    "vocab": ("vocab_size",),
    "positions": ("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx"),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim", "hidden_dim"),
}
_REQUIRED = ("layers", "heads", "hidden", "vocab")


def check_engine(engine: object) -> str:
    """`engine` when it is one of `ENGINES`; BadInput naming the argument otherwise."""
    return check_choice(engine, ENGINES, "engine")


def resolve_engine(raw: dict[str, Any], engine: str = "auto", *, where: str = "config.json") -> str:
    """The engine that computes the model this config.json describes: "attnviz" or
    "transformers", the config checked for it.

    `auto` is attnviz's own engine where it computes the model type, else transformers'.
    `attnviz` on a type it does not compute is refused in one line naming `{engine}
    transformers`; `transformers` reads any type transformers has (attnviz's own too).
    """
    engine = check_engine(engine)
    if engine == OWN or (engine == "auto" and computes(raw)):
        if not computes(raw):
            kind = shown(raw.get("model_type"), 40)
            raise BadInput(
                f"{where} describes a {kind} model, which attnviz's own engine does not compute: "
                "pass {engine} transformers (or auto) to compute it with transformers' eager model",
                param="engine",
            )
        describe(raw, where=where)
        return OWN
    describe_foreign(raw, where=where)
    return TRANSFORMERS


def shape_of(raw: dict[str, Any], engine: str) -> ModelShape:
    """The `ModelShape` of a config.json for the engine `resolve_engine` chose."""
    return describe_foreign(raw) if engine == TRANSFORMERS else describe(raw)


def check_start(shape: ModelShape, bos: bool) -> None:
    """Refuse reading a text without a start token (`bos=False`, --no-bos) with a model that
    has none to leave out, an encoder: it would be ignored without a word."""
    if not bos and not shape.causal:
        raise BadInput(
            f"{shape.family} is an encoder, which reads no start token: {{bos}} leaves out a "
            "decoder's and changes nothing here; drop it",
            param="bos",
        )


def refuse_encoder_decoder(raw: dict[str, Any], where: str) -> None:
    """Refuse an encoder-decoder config (T5, BART, Marian, ...) in one line: its three stacks
    of attention (encoder, decoder, cross) come with a target (`attnviz.encdec`), read by
    `analyse(text, target=...)` and the commands that take --target, never as one input."""
    kind = raw.get("model_type")
    if raw.get("is_encoder_decoder") is not True and kind not in ENCODER_DECODER_TYPES:
        return
    if kind in ENCODER_DECODERS:  # a failure of this command (exit 1): others read it
        raise AttnvizError(
            f"{where} describes an encoder-decoder model ({shown(kind, 40)}): its encoder, "
            "decoder and cross attention need a target, {target_text} TEXT (e.g. the "
            "translation) or {generate} N to let the model write one (show, heads, model, "
            "find and export take them)",
            param=("target_text", "generate"),
        )
    raise AttnvizError(
        f"{where} describes an encoder-decoder model ({shown(kind, 40)}) that attnviz does not "
        f"read; its encoder-decoders are {', '.join(ENCODER_DECODERS)}: pass one of these, an "
        "encoder or a decoder"
    )


def describe_foreign(raw: dict[str, Any], *, where: str = "config.json") -> ModelShape:
    """The shape of a model that transformers' eager model computes, from its config.json
    alone: refused in one line when it needs remote code, has no attention, is an
    encoder-decoder, or gives sizes that are missing, not whole numbers or past `LIMITS`."""
    kind = raw.get("model_type")
    if not isinstance(kind, str) or not kind:
        raise AttnvizError(
            f"{where} has no model_type ({shown(kind, 40)}): transformers' engine needs one to "
            "know the architecture; add the model_type its checkpoint was saved with"
        )
    if "auto_map" in raw:
        raise AttnvizError(
            f"{where} asks for code stored with the checkpoint (auto_map), which attnviz never "
            "runs, nor asks transformers to: use a model type transformers itself has"
        )
    if kind in ATTENTIONLESS or _mixed_layers(raw.get("layer_types")):
        raise AttnvizError(
            f"{where} describes a {shown(kind, 40)} model, whose layers (all or some) have no "
            "attention weights (a state-space or recurrent model): attnviz shows attention "
            "models only"
        )
    refuse_encoder_decoder(raw, where)
    sizes: dict[str, int] = {}
    for name, keys in _KEYS.items():
        key = next((k for k in keys if raw.get(k) is not None), None)
        if key is None:
            if name in _REQUIRED:
                raise AttnvizError(
                    f"{where} gives no {name} ({' or '.join(keys)}): the config is incomplete "
                    "or not a transformer's"
                )
            continue
        value = raw[key]
        if not whole(value, 1, LIMITS[name]):
            raise AttnvizError(
                f"{where} has {key}={shown(value)}; expected a whole number from 1 to "
                f"{LIMITS[name]}: the config is corrupt"
            )
        sizes[name] = value
    hidden, heads = sizes["hidden"], sizes["heads"]
    head_dim = raw.get("head_dim")
    head_size = head_dim if isinstance(head_dim, int) and whole(head_dim, 1, 65536) else 0
    head_size = head_size or max(1, hidden // heads)
    causal = is_causal_decoder(raw, kind)
    positions = sizes.get("positions", DECODER_TOKENS)
    limit = min(positions, DECODER_TOKENS) if causal else positions
    pad = raw.get("pad_token_id", 1)
    if kind in PAD_POSITION_TYPES:
        if not whole(pad, 0, positions - 2):
            raise AttnvizError(
                f"{where} has pad_token_id={shown(pad)} with max_position_embeddings={positions}; "
                f"{NAMES.get(kind, kind)} numbers positions after the padding index, so it must "
                f"be a whole number below {positions - 1}: the config is corrupt"
            )
        limit = positions - pad - 1
    act = next((raw[k] for k in ("hidden_act", "hidden_activation", "activation") if k in raw), "")
    return ModelShape(
        family=NAMES.get(kind, kind),
        layers=sizes["layers"],
        heads=heads,
        hidden=hidden,
        head_size=head_size,
        intermediate=sizes.get("intermediate", 4 * hidden),
        vocab=sizes["vocab"],
        max_tokens=limit,
        activation=act if isinstance(act, str) else shown(act, 20),
        embedding_size=hidden,
        type_vocab_size=raw["type_vocab_size"] if whole(raw.get("type_vocab_size"), 0, 1024) else 0,
        model_type=kind,
        positions=positions,
        engine=TRANSFORMERS,
        foreign_decoder=causal,
    )


def _mixed_layers(types: object) -> bool:
    """Whether a config's layer_types names layers other than attention ones (a hybrid)."""
    if not isinstance(types, list):
        return False
    return any(isinstance(t, str) and not re.search(r"attention|attn", t) for t in types)


def is_causal_decoder(raw: dict[str, Any], kind: str) -> bool:
    """Whether the model is a causal decoder: by its model type where attnviz's tables know
    it (an encoder type is one whatever its `architectures` claims; one that can be either is
    a decoder when config.json sets is_decoder); for another type, by what config.json says
    (is_decoder, or a causal head in `architectures`), which `hf_engine.check_kind` sets
    against transformers' own mapping when the model is loaded."""
    if kind in DECODER_TYPES:
        return True
    if kind in DECODER_CAPABLE_TYPES:
        return raw.get("is_decoder") is True
    if kind in ENCODER_TYPES:
        return False
    architectures = raw.get("architectures")
    listed = architectures if isinstance(architectures, list) else []
    names = [a for a in listed if isinstance(a, str)]
    causal_head = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in names)
    return raw.get("is_decoder") is True or causal_head


def model_class(raw: dict[str, Any]) -> str:
    """The transformers class that computes the model: the base model of the architecture
    config.json names (`DebertaV2ForMaskedLM` -> `DebertaV2Model`), without importing it."""
    architectures = raw.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures else None
    kind = raw.get("model_type")
    if isinstance(first, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,80}", first):
        stem = re.sub(r"(For[A-Z]\w*|LMHeadModel|PreTrainedModel|Model)$", "", first)
        # AutoModel loads the class of model_type: an architecture of another type is a claim
        if stem and isinstance(kind, str) and _letters(stem) == _letters(kind):
            return stem + "Model"
    return f"AutoModel ({shown(kind, 40)})"


def _letters(name: str) -> str:
    """`name` lower case, letters and digits only: `DebertaV2` and `deberta-v2` agree."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def computes_with(raw: dict[str, Any], engine: str) -> str:
    """What computes the weights, as `info` says it: "attnviz's own engine", or
    "transformers' eager DebertaV2Model"."""
    if engine == TRANSFORMERS:
        return f"transformers' eager {model_class(raw)}"
    return "attnviz's own engine (from-scratch modules)"


def engine_note(name: str, raw: dict[str, Any], computed_by: str | None = None) -> str:
    """The line that says transformers' engine computed the weights of model `name`
    (`computed_by`: the class that did, when not the base model of `model_class`)."""
    kind = str(raw.get("model_type"))
    why = "" if computes(raw) else f" ({NAMES.get(kind, kind)} is not a type attnviz computes)"
    return f"{name}: weights computed by transformers' eager {computed_by or model_class(raw)}{why}"


def check_folder(folder: Path, gguf: Path | None) -> None:
    """Refuse a model folder transformers' engine cannot read: one converted from a GGUF file."""
    if gguf is not None:
        raise BadInput(
            f"{gguf.name} is a GGUF file, which transformers' engine does not read: use "
            "{engine} attnviz (or auto) for it, or a folder saved by transformers",
            param="engine",
        )

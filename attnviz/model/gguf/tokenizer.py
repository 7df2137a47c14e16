"""A GGUF file's tokenizer as a `tokenizer.json`: its vocabulary, scores, merges, token types
and special ids, read and checked here, handed to transformers' own GGUF converters
(`transformers.integrations.gguf.convert_gguf_tokenizer`) so that the pieces equal
`AutoTokenizer.from_pretrained(folder, gguf_file=...)`'s.

transformers builds Gemma 3's 262,144-token tokenizer in about 24 s; the result is kept
(`tokenizer.json` in the converted folder), so that is paid once per file.
"""

from __future__ import annotations

import json
from typing import Any

from attnviz.errors import PASS_THROUGH, quiet_panics, short_reason
from attnviz.limits import shown
from attnviz.model.gguf.read import BadGguf, GgufHeader

MAX_VOCAB = 4_000_000  # as a config.json's vocab_size
_KEYS = {  # tokenizer.ggml.* -> the name transformers' converters take
    "model": "tokenizer_type",
    "pre": "pre_tokenizer_type",
    "tokens": "tokens",
    "scores": "scores",
    "token_type": "token_type",
    "merges": "merges",
    "bos_token_id": "bos_token_id",
    "eos_token_id": "eos_token_id",
    "unknown_token_id": "unk_token_id",
    "padding_token_id": "pad_token_id",
    "add_space_prefix": "add_prefix_space",
}
_SPECIAL = {"bos_token": "bos_token_id", "eos_token": "eos_token_id"}
_SPECIAL.update({"unk_token": "unknown_token_id", "pad_token": "padding_token_id"})


def tokenizer_parts(header: GgufHeader) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what transformers' converter takes, tokenizer_config.json) from the file's metadata,
    each checked: BadGguf in one line for a missing or malformed vocabulary."""
    meta = header.metadata

    def bad(why: str) -> BadGguf:
        return BadGguf(f"cannot build the tokenizer of {header.path}: {why}; the file is corrupt")

    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise bad("it has no list of tokens (tokenizer.ggml.tokens)")
    if len(tokens) > MAX_VOCAB:
        raise bad(f"it lists {len(tokens):,} tokens (at most {MAX_VOCAB:,})")
    kind = meta.get("tokenizer.ggml.model")
    if kind not in ("llama", "gpt2"):
        raise BadGguf(
            f"{header.path} has a {shown(kind, 30)} tokenizer; attnviz reads GGUF tokenizers "
            "of kind llama (sentencepiece) and gpt2 (byte-level BPE)"
        )
    found: dict[str, Any] = {}
    for key, name in _KEYS.items():
        value = meta.get(f"tokenizer.ggml.{key}")
        if value is not None:
            found[name] = value
    for name in ("scores", "token_type"):
        if name in found and (not hasattr(found[name], "shape") or len(found[name]) != len(tokens)):
            raise bad(f"its {name} do not give one number per token")
        if name in found:
            found[name] = found[name].tolist()
    merges = found.get("merges")
    if merges is not None and not (
        isinstance(merges, list) and all(isinstance(m, str) and m.count(" ") == 1 for m in merges)
    ):
        raise bad("its merges are not pairs of tokens")
    if kind == "llama" and "scores" not in found:
        raise bad("its sentencepiece vocabulary has no scores")
    if kind == "gpt2" and merges is None:
        raise bad("its byte-level vocabulary has no merges")
    config: dict[str, Any] = {}
    for name, key in _SPECIAL.items():
        index = meta.get(f"tokenizer.ggml.{key}")
        if index is not None:
            if not isinstance(index, int) or not 0 <= index < len(tokens):
                raise bad(f"its {key} is {shown(index)}, not one of its tokens")
            config[name] = tokens[index]
    add_bos = meta.get("tokenizer.ggml.add_bos_token")
    if add_bos is None and kind == "llama":
        add_bos = True  # llama.cpp adds BOS to a sentencepiece vocabulary that does not say
    config["add_bos_token"] = bool(add_bos)
    config["add_eos_token"] = bool(meta.get("tokenizer.ggml.add_eos_token", False))
    return found, config


def tokenizer_json(header: GgufHeader, architecture: str) -> tuple[str, dict[str, Any]]:
    """(tokenizer.json text, tokenizer_config.json dict) for the file's tokenizer."""
    parts, config = tokenizer_parts(header)
    try:
        from tokenizers import processors
        from transformers.integrations.gguf import convert_gguf_tokenizer
        from transformers.utils import logging

        verbosity = logging.get_verbosity()
        logging.set_verbosity_error()  # its notes on merges derived are not the user's business
        with quiet_panics():
            backend, _ = convert_gguf_tokenizer(architecture, parts)
            template = _template(config, parts)
            if template is not None:
                single, pair, special = template
                backend.post_processor = processors.TemplateProcessing(
                    single=single, pair=pair, special_tokens=special
                )
            text = backend.to_str()
        logging.set_verbosity(verbosity)
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # a Rust panic too (see PASS_THROUGH)
        raise BadGguf(
            f"cannot build the tokenizer of {header.path} ({short_reason(exc)}): the file's "
            "vocabulary is corrupt"
        ) from exc
    json.loads(text)  # what the tokenizers library wrote reads back
    return text, {**config, "tokenizer_class": "PreTrainedTokenizerFast"}


def _template(
    config: dict[str, Any], parts: dict[str, Any]
) -> tuple[str, str, list[tuple[str, int]]] | None:
    """The BOS / EOS added around a text (transformers' `update_post_processor` does the same)."""
    bos = config.get("bos_token") if config["add_bos_token"] else None
    eos = config.get("eos_token") if config["add_eos_token"] else None
    if bos is None and eos is None:
        return None
    before = f"{bos}:0 " if bos is not None else ""
    after = f" {eos}:0" if eos is not None else ""
    single = f"{before}$A:0{after}"
    pair = f"{single} {before}$B:1{after}"
    special = {}
    if bos is not None:
        special[bos] = parts["bos_token_id"]
    if eos is not None:
        special[eos] = parts["eos_token_id"]
    return single, pair, list(special.items())

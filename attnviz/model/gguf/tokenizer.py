"""A GGUF file's tokenizer as a `tokenizer.json`: its vocabulary, scores, merges, token types
and special ids, read and checked here, handed to transformers' own GGUF converters
(`transformers.integrations.gguf.convert_gguf_tokenizer`) so that the pieces equal
`AutoTokenizer.from_pretrained(folder, gguf_file=...)`'s.

transformers builds Gemma 3's 262,144-token tokenizer in about 24 s; the result is kept
(`tokenizer.json` in the converted folder), so that is paid once per file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attnviz.errors import PASS_THROUGH, quiet_panics, short_reason
from attnviz.limits import (
    GGUF_TOKEN_BYTES,
    GGUF_TOKENS,
    GGUF_VOCABULARY_BYTES,
    TOKENIZER_BYTES,
    amount,
    shown,
)
from attnviz.model.gguf.metadata import BadGguf
from attnviz.model.gguf.read import GgufHeader

# For a vocabulary without merges, transformers derives them: it tries every split of every
# token in two (quadratic in a token's length) and keeps each whose halves are tokens, about
# 300 bytes a merge until the tokenizer is built. At most this many splits are tried, 1.7
# times Gemma 3's 1.2 million (which make 514,906 merges).
MAX_SPLITS = 2 * 2**20
_ID = (0, 1 << 31)
_IDS = {  # tokenizer.ggml.* -> the name transformers' converters take
    "bos_token_id": "bos_token_id",
    "eos_token_id": "eos_token_id",
    "unknown_token_id": "unk_token_id",
    "padding_token_id": "pad_token_id",
}
_SPECIAL = {"bos_token": "bos_token_id", "eos_token": "eos_token_id"}
_SPECIAL.update({"unk_token": "unknown_token_id", "pad_token": "padding_token_id"})
_ADDED = (2, 3, 4, 5)  # token types kept as added tokens: unknown, control, user-defined, unused


@dataclass(frozen=True)
class TokenizerKind:
    """One kind of GGUF tokenizer (`tokenizer.ggml.model`): what it is called, the part it
    cannot be built without, and whether llama.cpp adds BOS when the file does not say."""

    words: str
    needs: str  # "scores" or "merges"
    adds_bos: bool


TOKENIZER_KINDS = {
    "llama": TokenizerKind("sentencepiece", "scores", adds_bos=True),
    "gpt2": TokenizerKind("byte-level BPE", "merges", adds_bos=False),
}


def tokenizer_parts(header: GgufHeader) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what transformers' converter takes, tokenizer_config.json) from the file's metadata,
    each key read by type and every size bounded before anything is built from it: BadGguf
    in one line for a missing, malformed or oversized vocabulary."""
    meta = header.meta

    def bad(why: str) -> BadGguf:
        return BadGguf(f"cannot build the tokenizer of {header.path}: {why}")

    model = meta.string("tokenizer.ggml.model")
    if model not in TOKENIZER_KINDS:
        raise BadGguf(
            f"{header.path} has a {shown(model, 30)} tokenizer; attnviz reads GGUF tokenizers "
            "of kind llama (sentencepiece) and gpt2 (byte-level BPE)"
        )
    kind = TOKENIZER_KINDS[model]
    tokens = meta.strings("tokenizer.ggml.tokens", GGUF_TOKENS)
    if not tokens:
        raise bad("it has no list of tokens (tokenizer.ggml.tokens); the file is corrupt")
    _check_tokens(tokens, bad)
    found: dict[str, Any] = {"tokenizer_type": model, "tokens": tokens}
    pre = meta.string("tokenizer.ggml.pre")
    if pre is not None:
        found["pre_tokenizer_type"] = pre
    space = meta.flag("tokenizer.ggml.add_space_prefix")
    if space is not None:
        found["add_prefix_space"] = space
    for name, whole in (("scores", False), ("token_type", True)):
        values = meta.numbers(f"tokenizer.ggml.{name}", len(tokens), whole)
        if values is not None:
            found[name] = values
    merges = meta.strings("tokenizer.ggml.merges", GGUF_TOKENS)
    if merges is not None:
        _check_merges(merges, bad)
        found["merges"] = merges
    if kind.needs not in found:
        raise bad(f"its {kind.words} vocabulary has no {kind.needs}; the file is corrupt")
    _check_size(found, bad)
    if merges is None:
        splits = sum(len(t) - 1 for t in tokens if len(t) > 1)
        if splits > MAX_SPLITS:
            raise bad(
                f"its vocabulary has no merges, and deriving them would try {splits:,} splits "
                f"of its tokens (attnviz tries at most {MAX_SPLITS:,}; Gemma 3's take 1.2 "
                "million): the vocabulary is not one a model uses"
            )
    config: dict[str, Any] = {}
    for key, name in _IDS.items():
        index = meta.integer(f"tokenizer.ggml.{key}", _ID)
        if index is not None:
            found[name] = index
    for name, key in _SPECIAL.items():
        index = meta.integer(f"tokenizer.ggml.{key}", _ID)
        if index is not None:
            if index >= len(tokens):
                raise bad(f"its {key} is {index:,}, not one of its {len(tokens):,} tokens")
            config[name] = tokens[index]
    add_bos = meta.flag("tokenizer.ggml.add_bos_token")
    config["add_bos_token"] = kind.adds_bos if add_bos is None else add_bos
    config["add_eos_token"] = bool(meta.flag("tokenizer.ggml.add_eos_token"))
    return found, config


def _check_tokens(tokens: list[str], bad: Callable[[str], BadGguf]) -> None:
    """Refuse a token, or all of them together, longer than a real vocabulary's."""
    longest = max(map(len, tokens))  # characters; a character is at most 4 bytes in UTF-8
    if longest * 4 > GGUF_TOKEN_BYTES:
        for i, token in enumerate(tokens):
            size = len(token.encode("utf-8", "replace"))
            if size > GGUF_TOKEN_BYTES:
                raise bad(
                    f"its token {i:,} is {size:,} bytes long; attnviz reads tokens of at most "
                    f"{GGUF_TOKEN_BYTES:,} bytes (real vocabularies' longest are under 256; "
                    "Gemma 3's: 48), so this is not a model's vocabulary"
                )
    total = sum(map(len, tokens))
    if total > GGUF_VOCABULARY_BYTES:
        raise bad(
            f"its {len(tokens):,} tokens hold {total:,} characters; attnviz reads at most "
            f"{amount(GGUF_VOCABULARY_BYTES)} of tokens (Gemma 3's 262,144 take 2.3 MB)"
        )


def _check_merges(merges: list[str], bad: Callable[[str], BadGguf]) -> None:
    for i, merge in enumerate(merges):
        if merge.count(" ") != 1 or len(merge) > 2 * GGUF_TOKEN_BYTES + 1:
            raise bad(f"its merge {i:,} ({shown(merge, 40)}) is not a pair of tokens")


def _check_size(found: dict[str, Any], bad: Callable[[str], BadGguf]) -> None:
    """Refuse, before building, a tokenizer whose tokenizer.json could not be read back: the
    vocabulary and merges alone, as JSON, are a lower bound of its size."""
    tokens, merges = found["tokens"], found.get("merges") or []
    types = found.get("token_type") or []
    added = sum(1 for t in types if t in _ADDED)
    size = len(json.dumps(tokens, ensure_ascii=False).encode()) + 4 * len(tokens)
    size += len(json.dumps(merges, ensure_ascii=False).encode()) + 100 * added
    if size > TOKENIZER_BYTES:
        raise bad(
            f"its tokenizer.json would take more than {amount(size)}, past the "
            f"{amount(TOKENIZER_BYTES)} attnviz reads of one: the vocabulary is too large"
        )


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
    if len(text) > TOKENIZER_BYTES:  # characters: at least as many bytes
        raise BadGguf(
            f"cannot build the tokenizer of {header.path}: its tokenizer.json takes "
            f"{amount(len(text))}, past the {amount(TOKENIZER_BYTES)} attnviz reads of one: "
            "the vocabulary is too large"
        )
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

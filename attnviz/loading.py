"""`--load FILE.npz`: the attention in a file, as an `Analysis` (`load_attentions`).

It reads attnviz's own exports (`attnviz export`, `Analysis.save`) with their words and
labels, a sentence pair's B, the layers they kept, a decoder's mask and sliding windows, and
any .npz with an `attentions` array and a `tokens` array (`key_tokens` for a rectangle;
`word_of_piece` and `words` optional). The file is read by attnviz.reading.read_npz (no
pickle, every header checked first); its arrays are then checked as `from_attentions` checks
a caller's, each failure one line naming the file's array.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.analysis import Analysis
from attnviz.arrays import GIVEN, MAX_LAYERS, arrays_analysis, checked_analysis
from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import attention_budget

__all__ = ["NPZ_EXTRA_BYTES", "load_attentions"]

NPZ_EXTRA_BYTES = 64 * 2**20  # room beside the attentions for tokens, words and the rest


def load_attentions(path: str | Path) -> Analysis:
    """The attention in the .npz file `path`: attnviz's own export, or any .npz with an
    `attentions` array and a `tokens` array (see the module). Read with no pickle, every
    array's size checked from its header first; anything wrong is one line."""
    from attnviz.output import as_path
    from attnviz.reading import read_npz

    file = as_path(path)
    arrays = read_npz(file, attention_budget() + NPZ_EXTRA_BYTES)
    missing = [n for n in ("attentions", "tokens") if n not in arrays]
    if missing:
        raise AttnvizError(
            f"{file} has no {' and no '.join(repr(n) for n in missing)} array: --load reads "
            "attnviz's own exports and any .npz with 'attentions' [layers, heads, T, T] and "
            "'tokens' (one str per token)"
        )
    try:
        return _from_file(arrays)
    except BadInput as exc:  # in the file's words: its arrays, not a Python argument
        arrays_of = {"words": "word_of_piece", "word_labels": "words", "type_ids":
                     "token_type_ids", "key_words": "key_word_of_piece"}  # fmt: skip
        spelled = exc.spelled(lambda name: f"its {arrays_of.get(name, name)!r} array")
        if "normalised" in exc.params:  # no such option on the command line: say Python's
            spelled = spelled.replace(
                "pass normalised=False", "attnviz.from_attentions(..., normalised=False) in Python"
            ).replace(" to draw the weights as they are", " draws the weights as they are")
        spelled = spelled.replace(  # no such argument in a file: say what to change in it
            "pass causal=None to detect it, or False", "drop that array (attnviz detects it)"
        )
        raise BadInput(f"{file}: {spelled}") from None


def _text(arrays: dict[str, Any], name: str) -> str | None:
    value = arrays.get(name)
    if value is None or not isinstance(value, np.ndarray) or value.dtype.kind != "U":
        return None
    return str(value.reshape(-1)[0]) if value.size == 1 else None


def _file_name(arrays: dict[str, Any]) -> str | None:
    """The model's name for the titles, with what the export's title said beside it: an
    encoder-decoder's stack and a generated target (in English: the file does not say the
    language it was drawn in). The engine is the analysis's own (`_from_file`)."""
    from attnviz.lexicon import label

    name = _text(arrays, "model")
    if name is None:
        return None
    stack = _text(arrays, "stack")
    if stack in ("encoder", "decoder", "cross"):
        name = label("en", f"stack_{stack}", model=name)
        generated = arrays.get("generated")
        if isinstance(generated, np.ndarray) and generated.dtype == bool and generated.all():
            name = label("en", "generated_target", model=name)
    return name


def _stack_rows(arrays: dict[str, Any]) -> dict[str, Any]:
    """An encoder-decoder's export (`render.data.sides_record`) names the source `tokens`
    whatever its stack; the rows of its decoder and cross stacks are the target's."""
    stack = _text(arrays, "stack")
    if stack not in ("decoder", "cross") or "target_tokens" not in arrays:
        return arrays
    rows = {name: arrays[f"target_{name}"] for name in ("tokens", "words", "word_of_piece")
            if f"target_{name}" in arrays}  # fmt: skip
    chosen = {k: v for k, v in arrays.items() if k != "token_type_ids"}  # the source's
    return {**chosen, **rows} if "word_of_piece" in rows else {**chosen, **rows, "words": None}


def _from_file(arrays: dict[str, Any]) -> Analysis:
    """`from_attentions` on the arrays of an .npz (attnviz's words and layers when there)."""
    arrays = _stack_rows(arrays)
    attentions = arrays["attentions"]
    tokens = arrays["tokens"]
    key_tokens = arrays.get("key_tokens")
    causal_value = arrays.get("causal")
    causal = None
    if isinstance(causal_value, np.ndarray) and causal_value.dtype == bool:
        causal = bool(causal_value.reshape(-1)[0]) if causal_value.size == 1 else None
    names = arrays.get("words")
    labels = None
    if isinstance(names, np.ndarray) and names.dtype.kind == "U":
        labels = [str(name) for name in names.reshape(-1)[: np.size(tokens) + 1]]
    words = _file_words(arrays, "word_of_piece", tokens, labels)
    key_words = _file_words(arrays, "key_word_of_piece", key_tokens, None)
    if words is None:
        labels = None
    analysis = checked_analysis(
        attentions,
        tokens,
        key_tokens=key_tokens,
        words=words,
        key_words=key_words,
        word_labels=labels,
        model=_file_name(arrays),
        causal=causal if causal else None,
        batch=0,
        normalised=True,
        type_ids=_type_ids(arrays, tokens),
        owned=True,
    )
    layers = arrays.get("layers")
    L = attentions.shape[0]
    numbers = list(range(L))
    if (
        isinstance(layers, np.ndarray)
        and layers.dtype.kind in "iu"
        and layers.shape == (L,)
        and np.all(np.diff(layers) > 0)
        and layers[0] >= 0
        and layers[-1] < MAX_LAYERS
    ):  # the layers an export kept: numbered as the model's
        numbers = [int(n) for n in layers]
    windows = _file_windows(arrays, numbers) if analysis.model.decoder else ()
    # the weights an engine of attnviz's computed stay its own, in titles and files; any
    # other file's are "given"
    engine = _text(arrays, "engine")
    engine = engine if engine in ("attnviz", "transformers") else GIVEN
    if numbers == list(range(L)) and not windows and engine == GIVEN:
        return analysis
    return arrays_analysis(
        analysis.attentions,
        analysis.pieces,
        key_pieces=analysis.key_pieces,
        name=analysis.model.name,
        causal=analysis.model.decoder,
        dtype=analysis.dtype,
        layers=numbers,
        windows=windows,
        engine=engine,
    )


def _file_windows(arrays: dict[str, Any], numbers: list[int]) -> tuple[int | None, ...]:
    """Each model layer's sliding window from an export's `windows` (one per entry, 0 for
    none); () when it has none that fit or none at all."""
    given = arrays.get("windows")
    if (
        not isinstance(given, np.ndarray)
        or given.dtype.kind not in "iu"
        or given.shape != (len(numbers),)
        or not given.any()
        or given.min() < 0
    ):
        return ()
    windows: list[int | None] = [None] * (max(numbers) + 1)
    for layer, window in zip(numbers, given.tolist(), strict=True):
        windows[layer] = int(window) or None
    return tuple(windows)


def _type_ids(arrays: dict[str, Any], tokens: Any) -> list[int] | None:
    """An export's `token_type_ids` when they mark a pair's second sentence (0s and 1s,
    one per token, with a pair text); None otherwise."""
    ids = arrays.get("token_type_ids")
    if (
        _text(arrays, "pair")
        and isinstance(ids, np.ndarray)
        and isinstance(tokens, np.ndarray)
        and ids.dtype.kind in "iu"
        and ids.shape == tokens.shape
        and np.isin(ids, (0, 1)).all()
    ):
        return [int(i) for i in ids]
    return None


def _file_words(
    arrays: dict[str, Any], name: str, tokens: Any, labels: Sequence[str] | None
) -> list[int | None] | None:
    """The word ids of an export's `word_of_piece` (each piece's word), a special token's
    None restored from its look (a word of one piece that looks like `[CLS]` or `<s>`,
    labelled as its token: `[UNK]` standing for a word of the text keeps it); None when the
    file has none (or they do not fit)."""
    from attnviz.text.given import SPECIAL_TOKEN

    owner = arrays.get(name)
    if (
        not isinstance(owner, np.ndarray)
        or not isinstance(tokens, np.ndarray)
        or owner.dtype.kind not in "iu"
        or owner.shape != tokens.shape
        or owner.ndim != 1
        or (owner.size and (owner.min() < 0 or owner.max() >= owner.size))
    ):  # a word number past the pieces would make bincount allocate that many
        return None
    counts = np.bincount(owner) if owner.size else np.zeros(0, dtype=np.int64)
    ids: list[int | None] = []
    for token, word in zip(tokens.tolist(), owner.tolist(), strict=True):
        alone = counts[word] == 1
        named = labels is None or (word < len(labels) and labels[word] == token)
        special = alone and named and SPECIAL_TOKEN.fullmatch(str(token))
        ids.append(None if special else int(word))
    return ids

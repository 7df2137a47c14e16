"""Attention as data files: .npz (no pickle) and .json, over the model's own pieces.

A file holds the attention with the text, its words and pieces, and what `about` says of
the model (its name, its kind, whether a causal mask hid later keys, the dtype). Plain
values in, a file out: `Analysis.save` and `Analysis.to_dict` gather the values.

An encoder-decoder's file carries both of its inputs whatever the stack (`sides_record`):
`text`, `words`, `tokens` and `input_ids` are the source's (the encoder's input),
`target_text`, `target_words`, `target_tokens` and `target_ids` the target's as the decoder
was fed it (its start token first), with `stack` (`encoder`: source × source; `decoder`:
target × target; `cross`: target queries × source keys) and `generated`.

Masked cells keep their weight, exactly 0.0; `causal` and `windows` (one per entry of
`attentions`, the layer's sliding window in pieces, null in JSON and 0 in .npz for none)
say which: query q cannot see key k when `causal` and (k > q, or q - k >= the window).

A rectangle (L, H, Tq, Tk), keys from another input than the queries (cross-attention, or
arrays given so), keeps the fields above for the queries (the rows) and adds the keys'
(the columns) only then: `key_tokens`, `key_ids`, `key_text`, `key_words` and
`key_word_of_piece` (with `key_word_pieces` in JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from attnviz.output import atomic_write

if TYPE_CHECKING:
    from attnviz.text.pieces import Pieces

__all__ = [
    "About",
    "Sides",
    "data_record",
    "key_record",
    "layer_windows",
    "sides_record",
    "write_data",
]


class Engine(TypedDict, total=False):
    """What computed the weights: "attnviz" (its own engine, the default), "transformers", or
    "given" (arrays a caller gave: `attnviz.from_attentions`, a file from another tool)."""

    engine: str


class About(Engine):
    """What a data file says of the model and of how the attention was computed."""

    model: str  # its name
    kind: str  # "encoder" or "decoder, causal"
    causal: bool  # a causal mask hid later keys: a decoder's own, or an encoder's what-if
    dtype: str  # what the model computed in
    # Each model layer's sliding window in pieces (None: none); () for an encoder.
    windows: tuple[int | None, ...]


def word_of_piece(pieces: Pieces) -> np.ndarray:
    """(T,) int64: the index in `pieces.words()` of the word each piece belongs to."""
    owner = np.zeros(len(pieces), dtype=np.int64)  # (T,)
    for w, word in enumerate(pieces.words()):
        owner[word.pieces] = w
    return owner


def layer_windows(about: About, layers: list[int]) -> list[int | None]:
    """The sliding window of each of `layers` (the model's layer numbers); None: none."""
    windows = about["windows"]
    return [windows[layer] if layer < len(windows) else None for layer in layers]


def key_record(keys: Pieces | None) -> dict[str, Any]:
    """The keys' fields of a rectangle's record (nothing for a square), as plain lists."""
    if keys is None:
        return {}
    words = keys.words()
    return {
        "key_text": keys.text,
        "key_words": [w.label for w in words],
        "key_word_pieces": [list(w.pieces) for w in words],
        "key_word_of_piece": word_of_piece(keys).tolist(),
        "key_tokens": list(keys.tokens),
        "key_ids": list(keys.ids),
    }


@dataclass(frozen=True)
class Sides:
    """An encoder-decoder's two inputs, as its data files carry them: the source (the
    encoder's input) and the target as the decoder was fed it (start token first), the
    stack the attention is (`encoder`, `decoder` or `cross`), and whether the model wrote
    the target itself (`--generate`)."""

    source: Pieces
    target: Pieces
    stack: str
    generated: bool = False


def sides_record(sides: Sides | None) -> dict[str, Any]:
    """An encoder-decoder's fields, whatever its stack: `text`, `words`, `tokens` and
    `input_ids` are the source's, `target_*` the target's (nothing for other models)."""
    if sides is None:
        return {}
    record: dict[str, Any] = {"stack": sides.stack, "generated": sides.generated}
    for prefix, side in (("", sides.source), ("target_", sides.target)):
        words = side.words()
        record.update(
            {
                f"{prefix}text": side.text,
                f"{prefix}words": [w.label for w in words],
                f"{prefix}word_pieces": [list(w.pieces) for w in words],
                f"{prefix}word_of_piece": word_of_piece(side).tolist(),
                f"{prefix}tokens": list(side.tokens),
                f"{prefix}{'input_' if not prefix else ''}ids": list(side.ids),
            }
        )
    record["token_type_ids"] = list(sides.source.type_ids)
    return record


def _sides_arrays(sides: Sides | None) -> dict[str, np.ndarray]:
    """`sides_record` as .npz arrays (nothing for other models)."""
    record = sides_record(sides)
    record.pop("word_pieces", None)
    record.pop("target_word_pieces", None)
    arrays = {}
    for name, value in record.items():
        if name.endswith(("ids", "word_of_piece")):
            arrays[name] = np.array(value, dtype=np.int64)  # (T,)
        else:
            arrays[name] = np.array(value, dtype=np.str_ if not isinstance(value, bool) else bool)
    return arrays


def data_record(
    pieces: Pieces,
    attentions: np.ndarray,
    layers: list[int],
    about: About,
    keys: Pieces | None = None,
    sides: Sides | None = None,
) -> dict[str, Any]:
    """The record `.json` holds: every kept layer's attention (L, H, T, T) over the pieces.

    `layers` is the model's layer of each entry of `attentions`. `kind` is "encoder" or
    "decoder, causal"; `causal` is true when a causal mask hid the later keys, the
    decoder's own or an encoder's what-if (`kind` tells which).
    """
    words = pieces.words()
    record = {
        "model": about["model"],
        "kind": about["kind"],
        "text": pieces.text,
        "pair": pieces.pair,
        "causal": about["causal"],
        "dtype": about["dtype"],
        "engine": about.get("engine", "attnviz"),  # what computed the weights
        "words": [w.label for w in words],
        "word_pieces": [list(w.pieces) for w in words],  # each word's piece indices
        "word_of_piece": word_of_piece(pieces).tolist(),
        "tokens": list(pieces.tokens),
        "input_ids": list(pieces.ids),
        "token_type_ids": list(pieces.type_ids),
        **key_record(keys),
        "layers": layers,  # the model's layer of each entry of attentions
        "windows": layer_windows(about, layers),  # each entry's sliding window, or null
        "attentions": attentions.astype(np.float32).tolist(),
    }
    record.update(sides_record(sides))  # an encoder-decoder: both sides, the stack
    return record


def write_data(
    out: Path,
    pieces: Pieces,
    attentions: np.ndarray,
    layers: list[int],
    about: About,
    extra: dict[str, np.ndarray] | None = None,
    keys: Pieces | None = None,
    sides: Sides | None = None,
) -> None:
    """The attentions (L, H, T, T) over the model's own pieces, as .npz (no pickle) or
    .json, all of the file or nothing; `extra` arrays (a measure) are written under their
    names beside them. `keys`: a rectangle's keys (L, H, Tq, Tk), written beside.
    `sides`: an encoder-decoder's source and target (`sides_record`)."""
    extra = extra or {}
    if out.suffix.lower() != ".npz":
        record = data_record(pieces, attentions, layers, about, keys, sides)
        record.update({name: values.tolist() for name, values in extra.items()})
        with atomic_write(out, "w") as handle:
            json.dump(record, handle, ensure_ascii=False)
        return
    arrays: dict[str, Any] = dict(
        attentions=attentions.astype(np.float32, copy=False),  # (L, H, T, T)
        layers=np.array(layers, dtype=np.int64),  # (L,): the model's layer numbers
        tokens=np.array(pieces.tokens, dtype=np.str_),
        input_ids=np.array(pieces.ids, dtype=np.int64),
        token_type_ids=np.array(pieces.type_ids, dtype=np.int64),
        kind=np.array(about["kind"], dtype=np.str_),
        causal=np.array(about["causal"]),
        # (L,) int64: each entry's sliding window in pieces, 0 for none
        windows=np.array([w or 0 for w in layer_windows(about, layers)], dtype=np.int64),
        dtype=np.array(about["dtype"], dtype=np.str_),
        engine=np.array(about.get("engine", "attnviz"), dtype=np.str_),  # what computed them
        model=np.array(about["model"], dtype=np.str_),
        text=np.array(pieces.text, dtype=np.str_),
        pair=np.array(pieces.pair or "", dtype=np.str_),  # "" without a pair
        words=np.array([w.label for w in pieces.words()], dtype=np.str_),
        word_of_piece=word_of_piece(pieces),  # (T,) int64: each piece's word
        **_key_arrays(keys),
        **extra,  # a measure: (L, H, T, T) or (L, T, T)
    )
    arrays.update(_sides_arrays(sides))  # an encoder-decoder: both sides, the stack
    with atomic_write(out, "wb") as handle:
        np.savez(handle, **arrays)


def _key_arrays(keys: Pieces | None) -> dict[str, np.ndarray]:
    """A rectangle's keys as .npz arrays (nothing for a square)."""
    if keys is None:
        return {}
    return {
        "key_tokens": np.array(keys.tokens, dtype=np.str_),  # (Tk,)
        "key_ids": np.array(keys.ids, dtype=np.int64),  # (Tk,)
        "key_text": np.array(keys.text, dtype=np.str_),
        "key_words": np.array([w.label for w in keys.words()], dtype=np.str_),
        "key_word_of_piece": word_of_piece(keys),  # (Tk,) int64: each key piece's word
    }

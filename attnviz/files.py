"""What `Analysis.save` writes besides images: the data files and where a page opens.

The data files (.npz without pickle, .json) hold the attention over the model's own
pieces with the text, its words and the model's name; `page_options` checks and
resolves where an HTML page opens, as the views would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.limits import check_choice, resolve_heads
from attnviz.output import atomic_write

if TYPE_CHECKING:
    from attnviz.analysis import Analysis

__all__ = ["data_record", "page_options", "write_data"]

PAGE_VIEWS = ("show", "heads", "model", "matrix")


def word_of_piece(analysis: Analysis) -> np.ndarray:
    """(T,) int64: the index in `words` of the word each piece belongs to."""
    owner = np.zeros(len(analysis.pieces), dtype=np.int64)  # (T,)
    for w, word in enumerate(analysis.words):
        owner[word.pieces] = w
    return owner


def causal_mask(analysis: Analysis) -> bool:
    """Whether a causal mask hid later keys: a decoder's own, or an encoder's what-if."""
    return analysis.causal or analysis.model.decoder


def data_record(analysis: Analysis) -> dict[str, Any]:
    """The data `save("x.json")` writes: every layer's attention over the model's pieces.

    `kind` is "encoder" or "decoder, causal"; `causal` is true when a causal mask hid the
    later keys, the decoder's own or an encoder's what-if (`kind` tells which).
    """
    words = analysis.words
    return {
        "model": analysis.model.name,
        "kind": analysis.model.kind,
        "text": analysis.text,
        "pair": analysis.pair,
        "causal": causal_mask(analysis),
        "dtype": analysis.dtype,
        "words": [w.label for w in words],
        "word_pieces": [list(w.pieces) for w in words],  # each word's piece indices
        "word_of_piece": word_of_piece(analysis).tolist(),
        "tokens": analysis.tokens,
        "input_ids": list(analysis.pieces.ids),
        "token_type_ids": list(analysis.pieces.type_ids),
        "layers": _layers(analysis),  # the model's layer of each entry of attentions
        "attentions": analysis.attentions.astype(np.float32).tolist(),
    }


def _layers(analysis: Analysis) -> list[int]:
    kept = analysis.layers
    return list(range(analysis.attentions.shape[0])) if kept is None else list(kept)


def write_data(analysis: Analysis, out: Path, measure: str = "weight") -> None:
    """The raw attentions over the model's own pieces, as .npz (no pickle) or .json;
    with a `measure`, that measure too, under its name ("value-zeroing" -> value_zeroing)."""
    extra: dict[str, np.ndarray] = {}
    if measure != "weight":
        extra[measure.replace("-", "_")] = analysis.measure(measure).astype(np.float32)
    if out.suffix.lower() != ".npz":
        record = data_record(analysis)
        record.update({name: values.tolist() for name, values in extra.items()})
        with atomic_write(out, "w") as handle:
            json.dump(record, handle, ensure_ascii=False)
        return
    pieces = analysis.pieces
    arrays: dict[str, Any] = dict(
        attentions=analysis.attentions.astype(np.float32, copy=False),  # (L, H, T, T)
        layers=np.array(_layers(analysis), dtype=np.int64),  # (L,): the model's layer numbers
        tokens=np.array(pieces.tokens, dtype=np.str_),
        input_ids=np.array(pieces.ids, dtype=np.int64),
        token_type_ids=np.array(pieces.type_ids, dtype=np.int64),
        kind=np.array(analysis.model.kind, dtype=np.str_),
        causal=np.array(causal_mask(analysis)),
        dtype=np.array(analysis.dtype, dtype=np.str_),
        model=np.array(analysis.model.name, dtype=np.str_),
        text=np.array(analysis.text, dtype=np.str_),
        pair=np.array(analysis.pair or "", dtype=np.str_),  # "" without a pair
        words=np.array([w.label for w in analysis.words], dtype=np.str_),
        word_of_piece=word_of_piece(analysis),  # (T,) int64: each piece's word
        **extra,  # the measure asked for: (L, H, T, T) or (L, T, T)
    )
    with atomic_write(out, "wb") as handle:
        np.savez(handle, **arrays)


def page_options(
    analysis: Analysis,
    view: str,
    layer: int,
    head: int | None,
    heads: Sequence[int] | None,
    units: str,
    theme: str,
) -> dict[str, Any]:
    """Where the page opens, checked as the views check it."""
    check_choice(view, PAGE_VIEWS, "view")
    check_choice(theme, ("auto", "light", "dark"), "theme")
    analysis.prepared.check(layer=layer, head=head, heads=heads)
    chosen = analysis.view(layer, head, units)  # resolves layer, head and units once
    words = analysis.words
    word_start = next(
        (w for w, word in enumerate(words) if analysis.pieces.sequence_ids[word.pieces[0]] == 1),
        None,
    )
    return {
        "words": [w.pieces for w in words],
        "word_labels": [w.label for w in words],
        "pair_start": analysis.pair_start,
        "pair_word_start": word_start,
        "title": analysis.title,
        "view": {"show": "matrix", "heads": "heads", "model": "model"}.get(view, view),
        "layer": chosen.layer,
        "head": chosen.head,
        "heads": resolve_heads(heads, analysis.model.heads),
        "units": units,
        "theme": theme,
    }

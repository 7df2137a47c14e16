"""An encoder-decoder's target as its decoder reads it: the start token, then the target.

transformers trains and scores an encoder-decoder on `labels`, the target tokenized with
its special tokens (T5 and Marian end it with `</s>`, BART wraps it in `<s>` … `</s>`), and
feeds the decoder those labels shifted one place right: the model's
`decoder_start_token_id` first, the last label dropped (each position predicts the next
label). `target_pieces` gives exactly those decoder input ids as `Pieces`, so the decoder
and cross stacks have one row per piece fed. `generated_pieces` labels ids the model wrote
itself (`--generate`), with the text they decode to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz.errors import BadInput
from attnviz.text.pieces import Pieces
from attnviz.text.tokenize import split_words, tokenize

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["generated_pieces", "target_pieces"]


def target_pieces(
    tokenizer: Tokenizer,
    target: str,
    *,
    start: tuple[str, int],
    max_positions: int,
    truncate: bool = False,
) -> Pieces:
    """The decoder's input for `target`: `start` (token, id) and then the target's pieces
    with its special tokens, less the last (labels shifted right, as transformers shifts
    them). At most `max_positions` pieces fed: a longer target is refused in one line, or
    with `truncate` its labels are cut to that many (as the tokenizer truncates)."""
    try:
        labels = tokenize(tokenizer, target, max_positions=max_positions, truncate=truncate)
    except BadInput as exc:
        raise exc.prefixed("the target: ") from None
    return _drop_last(labels.with_start(*start))


def _drop_last(pieces: Pieces) -> Pieces:
    """`pieces` without the last piece (the last label, which no position is fed)."""
    return Pieces(
        text=pieces.text,
        pair=None,
        tokens=pieces.tokens[:-1],
        ids=pieces.ids[:-1],
        type_ids=pieces.type_ids[:-1],
        offsets=pieces.offsets[:-1],
        word_ids=pieces.word_ids[:-1],
        sequence_ids=pieces.sequence_ids[:-1],
    )


def generated_pieces(tokenizer: Tokenizer, ids: list[int]) -> Pieces:
    """Pieces for ids the decoder was fed (the start token, then what the model wrote): the
    text is what they decode to, each piece's span the text its id adds to it. Special
    tokens (the start, an end token, padding) have no span and no word."""
    special = {i for i, added in tokenizer.get_added_tokens_decoder().items() if added.special}
    text = ""
    offsets: list[tuple[int, int]] = []
    sequence_ids: list[int | None] = []
    written: list[int] = []
    for token_id in ids:
        if token_id in special:
            offsets.append((0, 0))
            sequence_ids.append(None)
            continue
        written.append(token_id)
        longer = tokenizer.decode(written, skip_special_tokens=True)
        if longer.startswith(text):
            begin = len(text) + (len(longer) - len(text) - len(longer[len(text) :].lstrip()))
            offsets.append((begin, len(longer)))
            text = longer
        else:  # a decoder that rewrites what came before (byte pieces of one character)
            offsets.append((len(text), len(longer)))
            text = longer
        sequence_ids.append(0)
    offsets = [(min(a, len(text)), min(b, len(text))) for a, b in offsets]
    return Pieces(
        text=text,
        pair=None,
        tokens=[tokenizer.id_to_token(i) or f"<{i}>" for i in ids],
        ids=list(ids),
        type_ids=[0] * len(ids),
        offsets=offsets,
        word_ids=split_words(offsets, sequence_ids, text, None),
        sequence_ids=sequence_ids,
    )

"""Pieces from tokens given as strings (attention computed elsewhere), not from a tokenizer.

`given_pieces(tokens, word_ids)` builds the `Pieces` the views read from a list of tokens
and, optionally, the word each belongs to, as transformers' `BatchEncoding.word_ids()` gives
it (an int per token, None for a special token). Without word ids the words are read from
the tokens' own marks: WordPiece's `##` continues a word; where any token carries byte-level
BPE's `Ġ` or sentencepiece's `▁`, a token without it continues the word before; otherwise
each token is a word. A token that looks like a special token (`[CLS]`, `<s>`, `<|endoftext|>`)
is one when no word ids are given.

There is no original text, so one is made: the words' labels (given, or their tokens without
the marks) joined by spaces, each token's span cut from it, so that labels follow attnviz's
convention (`un`, `##believ`, `##able`). Given word labels whose length is not the sum of
their tokens' leave the tokens after the first labelled by their own text. Pure Python.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attnviz.text.pieces import CONTINUES, Pieces

__all__ = ["SPECIAL_TOKEN", "bare", "given_pieces", "guess_word_ids"]

# What a special token looks like: [CLS], [SEP], <s>, </s>, <bos>, <|endoftext|>.
SPECIAL_TOKEN = re.compile(r"\[[A-Za-z_]{1,20}\]|</?[A-Za-z_]{1,20}>|<\|[^|<>\s]{1,60}\|>")
_START_MARKS = "Ġ▁"


def bare(token: str) -> str:
    """`token` without a leading `##`, `Ġ` or `▁` (the tokenizers' word marks)."""
    if token.startswith(CONTINUES):
        return token[len(CONTINUES) :]
    return token[1:] if token[:1] in _START_MARKS else token


def guess_word_ids(tokens: Sequence[str]) -> list[int | None]:
    """Each token's word, read from the tokens' marks (see the module); None: special."""
    marked = any(t[:1] in _START_MARKS for t in tokens)  # byte-level BPE or sentencepiece
    ids: list[int | None] = []
    word = -1
    previous_special = True
    for token in tokens:
        if SPECIAL_TOKEN.fullmatch(token):
            ids.append(None)
            previous_special = True
            continue
        if marked:
            continues = not token.startswith(tuple(_START_MARKS))
        else:
            continues = token.startswith(CONTINUES)
        if previous_special or not continues:
            word += 1
        ids.append(word)
        previous_special = False
    return ids


def given_pieces(
    tokens: Sequence[str],
    word_ids: Sequence[int | None] | None = None,
    word_labels: Sequence[str] | None = None,
    ids: Sequence[int] | None = None,
    second: Sequence[bool] | None = None,
) -> Pieces:
    """The `Pieces` of `tokens`, grouped into words by `word_ids` (None: guessed from the
    tokens' marks), the words labelled `word_labels` (one per word, specials included;
    None: their tokens' text), with vocabulary `ids` (None: -1, unknown); `second` marks
    the tokens of a sentence pair's B (its first is marked `B:`). The caller has checked
    the lengths and types."""
    words = guess_word_ids(tokens) if word_ids is None else list(word_ids)
    runs: list[list[int]] = []  # the tokens of each word, in order (a special alone)
    for i, word in enumerate(words):
        if runs and word is not None and words[i - 1] == word:
            runs[-1].append(i)
        else:
            runs.append([i])
    offsets: list[tuple[int, int]] = [(0, 0)] * len(tokens)
    parts: list[str] = []
    position = 0
    for k, run in enumerate(runs):
        if words[run[0]] is None:  # a special token: no text
            continue
        texts = [bare(tokens[i]) for i in run]
        label = word_labels[k] if word_labels is not None else "".join(texts)
        start = position + (1 if parts else 0)  # a space between words
        if sum(map(len, texts)) == len(label):
            cut = start
            for i, text in zip(run, texts, strict=True):
                offsets[i] = (cut, cut + len(text))
                cut += len(text)
        else:  # the label does not split into its tokens: the first piece spans the word
            offsets[run[0]] = (start, start + len(label))
        parts.append(label)
        position = start + len(label)
    return Pieces(
        text=" ".join(parts),
        pair=None,
        tokens=list(tokens),
        ids=[-1] * len(tokens) if ids is None else [int(i) for i in ids],
        type_ids=[0] * len(tokens) if second is None else [int(b) for b in second],
        offsets=offsets,
        word_ids=words,
        sequence_ids=[
            None if w is None else int(second is not None and second[i])
            for i, w in enumerate(words)
        ],
    )

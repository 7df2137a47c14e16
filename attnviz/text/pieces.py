"""One tokenized input as attnviz reads it: its pieces, their labels, the words they make.

`Pieces` holds the tokenizer's parallel lists (tokens, ids, offsets, word and sequence
ids) and the label of each piece, cut from the original text, so an uncased model still
shows `João`, not `joao`. The three kinds of tokenizer mark words differently: WordPiece
(BERT, DistilBERT, ELECTRA) marks a piece that continues a word with `##`; byte-level BPE
(RoBERTa, GPT-2) and sentencepiece (XLM-RoBERTa, ALBERT, Llama) instead mark a piece that
starts a word with `Ġ` or `▁`. Labels use one convention for all: a piece that starts a
word shows its text bare, a piece that continues a word already begun shows `##` and its
text (`un`, `##believ`, `##able`). A piece that is only the word-start mark (a lone `Ġ` or
`▁`, carrying the space before a word) is shown as `▁`. Special tokens (`[CLS]`, `<s>`,
`</s>`) show their names; the byte-level pieces of one character (an emoji split over
bytes) each show it. `token_kinds` says which pieces are [CLS], [SEP] or punctuation.
Pure Python (numpy inside `token_kinds`); no tokenizer, no torch.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CONTINUES", "SPACE", "Pieces", "TokenKinds", "Word", "is_punctuation", "token_kinds"]

CONTINUES = "##"  # the mark on a label whose piece continues a word
SPACE = "▁"  # the label of a piece that is only a word-start mark
_WORD_START_MARKS = "Ġ▁"  # byte-level BPE's and sentencepiece's marks in the vocabulary


@dataclass(frozen=True)
class Word:
    """A run of pieces that the tokenizer assigned to one word (or one special token)."""

    label: str
    pieces: list[int]


@dataclass(frozen=True)
class Pieces:
    """One tokenized input: parallel lists, one entry per piece."""

    text: str
    pair: str | None
    tokens: list[str]  # the vocabulary pieces: [CLS], joao, ##ou
    ids: list[int]
    type_ids: list[int]
    offsets: list[tuple[int, int]]  # character spans in the text (or the pair) it came from
    word_ids: list[int | None]  # None for special tokens
    sequence_ids: list[int | None]  # 0 for text, 1 for pair, None for special tokens
    dropped: int = 0  # pieces cut off by --truncate
    # characters --truncate left unread when it cut a text far too long before tokenizing:
    # every character after the end of the last piece read (`attnviz.text.tokenize`), not only
    # those cut
    cut: int = 0
    labels: list[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", self._labels())

    def __len__(self) -> int:
        return len(self.tokens)

    def source(self, i: int) -> str:
        """The original text that piece `i` came from."""
        return self.pair if self.sequence_ids[i] == 1 and self.pair is not None else self.text

    def _labels(self) -> list[str]:
        """Each piece's text from the original, `##` on pieces that continue a word."""
        labels: list[str] = []
        begun: set[tuple[int | None, int]] = set()  # words whose text a piece has shown
        for i, token in enumerate(self.tokens):
            seq, word = self.sequence_ids[i], self.word_ids[i]
            if seq is None:  # a special token
                labels.append(token)
                continue
            if token and not token.strip(_WORD_START_MARKS):  # only the space before a word
                labels.append(SPACE)
                continue
            start, end = self.offsets[i]
            original = _span(self.source(i), start, end)  # sentencepiece spans may hold the space
            if not original:
                labels.append(token)
                continue
            if token.startswith(CONTINUES):  # WordPiece marks continuations itself
                continues = True
            elif token.startswith(tuple(_WORD_START_MARKS)):  # BPE / sentencepiece word start
                continues = False
            else:
                continues = word is not None and (seq, word) in begun
            labels.append(CONTINUES + original if continues else original)
            if word is not None:
                begun.add((seq, word))
        return labels

    def with_start(self, token: str, token_id: int) -> Pieces:
        """These pieces with a start token in front (a special token: no word, no text)."""
        return Pieces(
            text=self.text,
            pair=self.pair,
            tokens=[token, *self.tokens],
            ids=[token_id, *self.ids],
            type_ids=[0, *self.type_ids],
            offsets=[(0, 0), *self.offsets],
            word_ids=[None, *self.word_ids],
            sequence_ids=[None, *self.sequence_ids],
            dropped=self.dropped,
            cut=self.cut,
        )

    def without_start(self) -> Pieces:
        """These pieces without the first (the start token a tokenizer put in front)."""
        return Pieces(
            text=self.text,
            pair=self.pair,
            tokens=self.tokens[1:],
            ids=self.ids[1:],
            type_ids=self.type_ids[1:],
            offsets=self.offsets[1:],
            word_ids=self.word_ids[1:],
            sequence_ids=self.sequence_ids[1:],
            dropped=self.dropped,
            cut=self.cut,
        )

    def words(self) -> list[Word]:
        """Pieces grouped into words; each special token is a word of its own."""
        groups: list[Word] = []
        previous: tuple[int | None, int | None] | None = None
        for i, (seq, word) in enumerate(zip(self.sequence_ids, self.word_ids, strict=True)):
            key = (seq, word)
            if word is not None and key == previous:
                groups[-1].pieces.append(i)
            else:
                groups.append(Word("", [i]))
            previous = key
        return [Word(self._word_label(w.pieces), w.pieces) for w in groups]

    def _word_label(self, pieces: list[int]) -> str:
        first, last = pieces[0], pieces[-1]
        if self.word_ids[first] is None:
            return self.labels[first]
        text = _span(self.source(first), self.offsets[first][0], self.offsets[last][1])
        return text or self.labels[first]


@dataclass(frozen=True)
class TokenKinds:
    """Which pieces of one input are [CLS], [SEP] or punctuation: bool arrays (T,)."""

    cls: np.ndarray  # (T,) bool
    sep: np.ndarray  # (T,) bool
    punct: np.ndarray  # (T,) bool

    def __len__(self) -> int:
        return len(self.cls)


def token_kinds(pieces: Pieces, *, first: bool = False) -> TokenKinds:
    """[CLS], [SEP] and punctuation pieces of one tokenized input.

    [CLS] is a special token at position 0; [SEP] is every other special token (so
    RoBERTa's <s> and </s> count too). With `first` (a decoder), `cls` marks the first
    piece whatever it is: the BOS when the tokenizer adds one, else the first word. A
    piece is punctuation when its original text (or, without one, its token), stripped
    of a leading `##`, `Ġ` or `▁` and of spaces, is made only of Unicode punctuation;
    special tokens never are.
    """
    import numpy as np

    special = np.array([seq is None for seq in pieces.sequence_ids], dtype=bool)  # (T,)
    cls = np.zeros_like(special)
    cls[0] = special[0] or first
    sep = special & ~cls
    punct = np.array(
        [
            not special[i]
            and is_punctuation(_strip_marks(pieces.labels[i] or pieces.tokens[i]).strip())
            for i in range(len(pieces))
        ],
        dtype=bool,
    )  # (T,)
    return TokenKinds(cls=cls, sep=sep, punct=punct)


def _strip_marks(text: str) -> str:
    """`text` without a leading `##`, `Ġ` or `▁` (WordPiece's, BPE's, SentencePiece's mark)."""
    for mark in (CONTINUES, *_WORD_START_MARKS):
        if text.startswith(mark):
            return text[len(mark) :]
    return text


def _span(source: str, start: int, end: int) -> str:
    """The text of a span, for a label: with the combining marks that follow it, in NFC.

    An uncased tokenizer strips accents, so the span of `cafe` + U+0301 (a decomposed
    `café`) ends before the accent: it is taken back, and the label composed (for
    display only; the pieces and offsets are the tokenizer's).
    """
    while end < len(source) and unicodedata.combining(source[end]):
        end += 1
    return unicodedata.normalize("NFC", source[start:end].strip())


def is_punctuation(text: str) -> bool:
    """True when `text` is not empty and every character is Unicode punctuation (P*)."""
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)

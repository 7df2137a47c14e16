"""Text to word pieces, with offsets into the original text and word groups.

The `tokenizers` library reads a model's `tokenizer.json` without importing
transformers; only a model without that file falls back to transformers'
AutoTokenizer (whose fast tokenizer wraps the same object).

Labels are cut from the original text, so an uncased model still shows `João`,
not `joao`, whatever the tokenizer. The three kinds mark words differently:
WordPiece (BERT, DistilBERT, ELECTRA) marks a piece that continues a word with
`##`; byte-level BPE (RoBERTa) and sentencepiece (XLM-RoBERTa, ALBERT) instead
mark a piece that starts a word with `Ġ` or `▁`. Labels use one convention for
all: a piece that starts a word shows its text bare, a piece that continues a
word already begun shows `##` and its text (`un`, `##believ`, `##able`). A piece
that is only the word-start mark (a lone `Ġ` or `▁`, carrying the space before a
word) is shown as `▁`. Special tokens (`[CLS]`, `<s>`, `</s>`) show their names;
the byte-level pieces of one character (an emoji split over bytes) each show it.
"""

from __future__ import annotations

import contextlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attnviz.errors import PASS_THROUGH, AttnvizError, BadInput, quiet_panics, short_reason
from attnviz.limits import max_text_chars

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Encoding, Tokenizer


# Tokenizer files other than tokenizer.json that transformers can build a fast tokenizer from:
# WordPiece, byte-level BPE (with merges.txt), XLM-RoBERTa's and ALBERT's sentencepiece models.
TOKENIZER_FILES = ("vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")
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
    cut: int = 0  # characters cut off by --truncate before tokenizing (a text far too long)
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


def load_tokenizer(folder: Path, *, use_cache: bool = True) -> Tokenizer:
    """The model's fast tokenizer, with its own padding and truncation switched off.

    `use_cache` (unless ATTNVIZ_NO_CACHE is set) keeps a tokenizer that transformers had
    to convert in the cache's folder, for the next run.
    """
    path = folder / "tokenizer.json"
    if not path.is_file() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise AttnvizError(
            f"{folder} has no tokenizer.json or vocab.txt (nor vocab.json or a sentencepiece "
            "model): copy the tokenizer files that came with the checkpoint next to its config.json"
        )
    try:
        if path.is_file():
            from tokenizers import Tokenizer

            with quiet_panics():
                tokenizer = Tokenizer.from_file(str(path))
        else:
            tokenizer = _tokenizer_from_transformers(folder, use_cache)
    except (AttnvizError, *PASS_THROUGH):
        raise
    except BaseException as exc:  # a Rust panic too (see PASS_THROUGH)
        raise AttnvizError(
            f"cannot read the tokenizer in {folder} ({short_reason(exc, 120)}): the model "
            "folder needs tokenizer.json (or vocab.txt, vocab.json and merges.txt, or a "
            "sentencepiece model)"
        ) from exc
    tokenizer.no_padding()  # never pad a single sentence
    tokenizer.no_truncation()  # the model's position limit applies, not the tokenizer's
    return tokenizer


def _tokenizer_from_transformers(folder: Path, use_cache: bool) -> Tokenizer:
    """transformers' fast tokenizer for a folder without tokenizer.json, converted once.

    The conversion is kept in the attention cache's folder, so later runs load it with
    the `tokenizers` library and never import transformers. A cache that cannot keep it
    costs the next run time, and a warning; never the command.
    """
    from tokenizers import Tokenizer

    from attnviz import cache

    saved = None
    if use_cache and cache.cache_enabled(False):
        with contextlib.suppress(OSError):
            saved = cache.tokenizer_path(folder)
    if saved is not None:
        with contextlib.suppress(Exception):  # missing or unreadable: convert again below
            text = cache.load_tokenizer_json(saved)
            if text is not None:
                with quiet_panics():
                    return Tokenizer.from_str(text)

    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    backend = getattr(auto, "backend_tokenizer", None)
    if backend is None:
        raise AttnvizError(
            f"{folder} has no tokenizer.json and its tokenizer has no fast version: "
            "add tokenizer.json (save the tokenizer with transformers)"
        )
    if saved is not None:
        cache.store_tokenizer_json(saved, backend.to_str())
    return backend


def tokenize(
    tokenizer: Tokenizer,
    text: str,
    *,
    pair: str | None = None,
    max_positions: int,
    truncate: bool = False,
    why: str = "",
) -> Pieces:
    """Tokenize `text` (and `pair`) with special tokens; enforce the model's length limit.

    `why` follows the limit in the refusal when the bound is not the model's own.
    """
    for value in (text, pair):
        try:
            (value or "").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: bytes that were not UTF-8
            raise BadInput(
                "the text is not valid UTF-8: convert it first, e.g. iconv -f latin1 -t utf-8"
            ) from None
    text, cut = _bounded(text, pair, max_positions, truncate)
    encoding = _encode(tokenizer, text, pair)
    if all(seq is None for seq in encoding.sequence_ids):
        raise BadInput(
            "the text has nothing the tokenizer keeps (only spaces, control or zero-width "
            "characters): pass a sentence with words"
        )
    dropped = 0
    if len(encoding) > max_positions:
        if not truncate:
            raise BadInput(
                f"the text is {len(encoding)} pieces long but the model takes at most "
                f"{max_positions}{why}: shorten it or pass {{truncate}} to keep the first "
                f"{max_positions}",
                param=("truncate", "max_tokens"),  # `why` may name max_tokens
            )
        tokenizer.enable_truncation(max_positions)
        try:
            full = len(encoding)
            encoding = _encode(tokenizer, text, pair)
            dropped = full - len(encoding)
        finally:
            tokenizer.no_truncation()
    return _pieces(encoding, text, pair, dropped, cut)


def _bounded(text: str, pair: str | None, max_positions: int, truncate: bool) -> tuple[str, int]:
    """`text` refused by its size before it is tokenized, or with --truncate cut at a space.

    Tokenizing costs time and memory in proportion to the characters (10 MB took 17 s
    and 1.7 GB), and a text of more than `max_text_chars` cannot fit the model's
    positions: the cut, made at a space so no word is split, keeps every piece that
    could be kept. Returns the text and how many characters were cut.
    """
    limit = max_text_chars(max_positions)
    size = len(text) + len(pair or "")
    if size <= limit:
        return text, 0
    if not truncate or pair is not None or len(pair or "") >= limit:
        fix = "shorten it" + (" or pass {truncate} to keep its start" if pair is None else "")
        raise BadInput(
            f"the text is {size:,} characters long, more than a model of {max_positions} "
            f"positions can take (attnviz reads at most {limit:,}): {fix}",
            param="truncate",
        )
    space = text.rfind(" ", limit // 2, limit + 1)
    kept = text[: space if space > 0 else limit]
    return kept, len(text) - len(kept)


def _encode(tokenizer: Tokenizer, text: str, pair: str | None) -> Encoding:
    """`tokenizer.encode`, its failures (a Rust panic included) as one AttnvizError."""
    try:
        with quiet_panics():
            return tokenizer.encode(text, pair)
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # a hostile tokenizer.json: a catastrophic regex, no [UNK]
        raise AttnvizError(
            f"the model's tokenizer failed on this text ({short_reason(exc, 120)}): its "
            "tokenizer files are broken; use the tokenizer that came with the checkpoint"
        ) from None


def _pieces(encoding: Encoding, text: str, pair: str | None, dropped: int, cut: int = 0) -> Pieces:
    return Pieces(
        text=text,
        pair=pair,
        tokens=list(encoding.tokens),
        ids=list(encoding.ids),
        type_ids=list(encoding.type_ids),
        offsets=[tuple(o) for o in encoding.offsets],  # type: ignore[misc]
        word_ids=list(encoding.word_ids),
        sequence_ids=list(encoding.sequence_ids),
        dropped=dropped,
        cut=cut,
    )


def is_punctuation(text: str) -> bool:
    """True when `text` is not empty and every character is Unicode punctuation (P*)."""
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)

"""What a model reads: its tokenizer's casing, accents and vocabulary, its languages, and
how well a text fits that vocabulary.

- `describe_tokenizer(folder)`: from `tokenizer.json` (or, without it, the tokenizer's
  other files): whether text is lowercased and accents stripped, the vocabulary's size
  and kind (WordPiece, byte-level BPE, SentencePiece).
- `model_languages(folder)`: the `language:` field of the model card, the front matter
  of a `README.md` next to the weights; None when the card does not say.
- `vocabulary_fit(pieces)`: pieces per word and unknown words. A text fits badly when
  its words take more than `POOR_FIT_PIECES_PER_WORD` pieces on average (punctuation
  not counted), or when any word is unknown (`[UNK]`): typical for a text in a language
  the model was not trained on. `FitNote` says how badly, and what to use instead.

Reads JSON and text only: no torch, no transformers.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import AttnvizError
from attnviz.extras import DECODER_AT_HAND, multilingual_at_hand, offer
from attnviz.limits import MODEL_CARD_BYTES, TOKENIZER_BYTES
from attnviz.reading import read_bounded, read_json

if TYPE_CHECKING:
    from attnviz.text.pieces import Pieces

__all__ = [
    "OTHER_MODELS",
    "POOR_FIT_PIECES_PER_WORD",
    "TokenizerInfo",
    "VocabularyFit",
    "describe_tokenizer",
    "model_languages",
    "vocabulary_fit",
]

# English text on an English WordPiece vocabulary takes about 1.0-1.3 pieces per word;
# Portuguese on the same vocabulary about 1.9 (the lesson's sentence: 23 pieces, 12 words).
POOR_FIT_PIECES_PER_WORD = 1.5
UNKNOWN_TOKENS = frozenset({"[UNK]", "<unk>"})
# Models to suggest for Portuguese (and other languages) when a text fits badly.
OTHER_MODELS = (
    "neuralmind/bert-base-portuguese-cased",
    "bert-base-multilingual-cased",
    "xlm-roberta-base",
)
_KINDS = {"WordPiece": "WordPiece", "BPE": "BPE", "Unigram": "SentencePiece (Unigram)"}


@dataclass(frozen=True)
class TokenizerInfo:
    """How a model's tokenizer reads text."""

    kind: str  # "WordPiece", "byte-level BPE", "SentencePiece (Unigram)", ... or "unknown"
    size: int | None  # pieces in its vocabulary (None: not readable)
    lowercase: bool | None  # None: could not tell
    strip_accents: bool | None

    @property
    def normalisation(self) -> str:
        """`lowercases, strips accents` / `keeps case and accents` / `not stated`."""
        if self.lowercase is None and self.strip_accents is None:
            return "not stated"
        case = "lowercases" if self.lowercase else "keeps case"
        accents = "strips accents" if self.strip_accents else "keeps accents"
        return f"{case}, {accents}"

    @property
    def uncased(self) -> bool:
        return bool(self.lowercase)


# A sentencepiece model, by the names checkpoints give it (XLM-R, ALBERT and T5, DeBERTa-v2).
SENTENCEPIECE_FILES = ("sentencepiece.bpe.model", "spiece.model", "spm.model")


def describe_tokenizer(folder: Path) -> TokenizerInfo:
    """The tokenizer in `folder`: its kind, vocabulary size, lowercasing and accent stripping.

    Its files are read as `reading.read_bounded` reads them: a file that is not a regular
    one, larger than `limits.TOKENIZER_BYTES`, not JSON or nested too deeply is refused
    in one line (AttnvizError), as loading the tokenizer would refuse it.
    """
    path = folder / "tokenizer.json"
    if path.exists():
        data = read_json(path, TOKENIZER_BYTES, "tokenizer file")
        if isinstance(data, dict):
            return _from_tokenizer_json(data)
    return _from_other_files(folder)


# How deep a tokenizer.json's normalizer and pre-tokenizer specs are looked into (real ones
# nest two or three levels).
_DEPTH = 32


def _from_tokenizer_json(data: dict[str, Any]) -> TokenizerInfo:
    model = _object(data.get("model"))
    name = model.get("type")
    name = name if isinstance(name, str) and len(name) <= 40 else None
    kind = _KINDS.get(str(name), name or "unknown")
    if kind == "BPE" and _mentions(data.get("pre_tokenizer"), "ByteLevel", _DEPTH):
        kind = "byte-level BPE"
    vocab = model.get("vocab")
    size = len(vocab) if isinstance(vocab, dict | list) else None
    if isinstance(vocab, dict):
        added = data.get("added_tokens")
        contents = (
            [t.get("content") for t in added if isinstance(t, dict)]
            if isinstance(added, list)
            else []
        )
        size = len(vocab) + sum(isinstance(c, str) and c not in vocab for c in contents)
    lowercase, accents = _normaliser(data.get("normalizer"), _DEPTH)
    return TokenizerInfo(kind, size, lowercase, accents)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _mentions(spec: Any, kind: str, depth: int) -> bool:
    """Whether a tokenizers spec, or one nested in it (to `depth` levels), is of type `kind`."""
    if depth <= 0:
        return False
    if isinstance(spec, dict):
        return spec.get("type") == kind or any(_mentions(v, kind, depth - 1) for v in spec.values())
    if isinstance(spec, list):
        return any(_mentions(v, kind, depth - 1) for v in spec)
    return False


def _normaliser(spec: Any, depth: int) -> tuple[bool, bool]:
    """(lowercases, strips accents) of a tokenizers normalizer spec, to `depth` levels."""
    if not isinstance(spec, dict) or depth <= 0:
        return False, False
    kind = spec.get("type")
    if kind == "BertNormalizer":
        lower = bool(spec.get("lowercase"))
        strip = spec.get("strip_accents")
        return lower, lower if strip is None else bool(strip)  # None follows lowercase
    if kind == "Sequence":
        nested = spec.get("normalizers")
        parts = [_normaliser(n, depth - 1) for n in nested] if isinstance(nested, list) else []
        return any(p[0] for p in parts), any(p[1] for p in parts)
    return kind == "Lowercase", kind == "StripAccents"


def _from_other_files(folder: Path) -> TokenizerInfo:
    config: dict[str, Any] = {}
    if (folder / "tokenizer_config.json").exists():
        config = _object(
            read_json(folder / "tokenizer_config.json", TOKENIZER_BYTES, "tokenizer file")
        )
    lower = config.get("do_lower_case")
    strip = config.get("strip_accents", lower)
    size: int | None = None
    if (folder / "vocab.txt").exists():
        kind = "WordPiece"
        data = read_bounded(folder / "vocab.txt", TOKENIZER_BYTES, "tokenizer file")
        with contextlib.suppress(UnicodeDecodeError):  # as the tokenizer reads it: by lines
            size = sum(1 for _ in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    elif (folder / "vocab.json").is_file():
        kind = "byte-level BPE"
    elif any((folder / n).is_file() for n in SENTENCEPIECE_FILES):
        kind = "SentencePiece"
    else:
        kind = "unknown"
    return TokenizerInfo(
        kind,
        size,
        None if lower is None else bool(lower),
        None if strip is None else bool(strip),
    )


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.S)


def model_languages(folder: Path) -> tuple[str, ...] | None:
    """The languages the model card (`README.md` beside the weights) lists; None if it doesn't.

    Only the first `limits.MODEL_CARD_BYTES` of the card are read (the front matter comes
    first), and only from a regular file: a card that is a pipe or a device is not stated.

    Reads the `language:` field of the card's YAML front matter, as a single value
    (`language: en`), an inline list (`language: [pt, en]`) or a block list.
    """
    try:
        card = read_bounded(folder / "README.md", MODEL_CARD_BYTES, "model card", head=True)
    except (OSError, AttnvizError):  # missing, or a pipe, a device, a folder: not stated
        return None
    text = card.decode("utf-8", errors="replace")
    match = _FRONT_MATTER.match(text)
    if not match:
        return None
    lines = match.group(1).splitlines()
    for n, line in enumerate(lines):
        key, _, value = line.partition(":")
        if key.strip() != "language" or line[:1].isspace():
            continue
        value = value.strip()
        if value:
            items = value.strip("[]").split(",")
        else:
            items = []
            for item in lines[n + 1 :]:
                if not item.strip().startswith("-"):
                    break
                items.append(item.strip()[1:])
        languages = tuple(i.strip().strip("'\"") for i in items if i.strip().strip("'\""))
        return languages or None
    return None


def language_list(languages: tuple[str, ...], limit: int = 12) -> str:
    """The languages a card lists, for one line: the first `limit`, then how many in all
    (a card may list thousands)."""
    if len(languages) <= limit:
        return ", ".join(languages)
    return f"{', '.join(languages[:limit])}, … ({len(languages):,} languages)"


@dataclass(frozen=True)
class VocabularyFit:
    """How a text fits a model's vocabulary: pieces per word, and words it does not know."""

    words: int  # words of the text (and pair), punctuation and special tokens not counted
    pieces: int  # their pieces
    unknown: tuple[str, ...]  # words the tokenizer turned into an unknown token

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / self.words if self.words else 1.0

    @property
    def poor(self) -> bool:
        """More than POOR_FIT_PIECES_PER_WORD pieces per word, or any unknown word."""
        return bool(self.unknown) or self.pieces_per_word > POOR_FIT_PIECES_PER_WORD

    def note(
        self, model: str, languages: tuple[str, ...] | None = None, *, decoder: bool = False
    ) -> str | None:
        """One line for stderr when the fit is poor (None when it is fine).

        The models it suggests are encoders: for a `decoder` it names none, since the
        user chose a decoder to look at one.
        """
        if not self.poor:
            return None
        counts = f"{_count(self.pieces, 'piece')} for {_count(self.words, 'word')}"
        how = [f"{self.pieces_per_word:.1f} pieces per word ({counts})"]
        if self.unknown:
            shown = ", ".join(self.unknown[:5]) + (" …" if len(self.unknown) > 5 else "")
            how.append(f"{_count(len(self.unknown), 'unknown word')}: {shown}")
        speaks = f" (model language: {language_list(languages)})" if languages else ""
        start = (
            f"note: this text fits {model}'s vocabulary badly{speaks}: {'; '.join(how)}, so "
            "its attention is spread over fragments of words. For a text in another language "
        )
        at_hand = multilingual_at_hand()
        if decoder:
            other = f", e.g. --model {at_hand} (installed)" if at_hand not in (None, model) else ""
            return f"{start}use a model trained on it{other} (--quiet hides notes)"
        offered = offer(at_hand or DECODER_AT_HAND, "multilingual")
        return (
            f"{start}use a model for it: for Portuguese {offered}, or from the Hugging Face Hub "
            f"{OTHER_MODELS[0]}, {OTHER_MODELS[1]} or {OTHER_MODELS[2]} (--quiet hides notes)"
        )


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def vocabulary_fit(pieces: Pieces) -> VocabularyFit:
    """Pieces per word and unknown words of one tokenized input."""
    from attnviz.text.pieces import is_punctuation

    words = counted = 0
    unknown: list[str] = []
    for word in pieces.words():
        first = word.pieces[0]
        if pieces.sequence_ids[first] is None or is_punctuation(word.label):
            continue
        words += 1
        counted += len(word.pieces)
        lettered = any(c.isalpha() for c in word.label)  # ░▒▓█ or 🙂: no language's fault
        if lettered and any(pieces.tokens[i] in UNKNOWN_TOKENS for i in word.pieces):
            unknown.append(word.label)
    return VocabularyFit(words, counted, tuple(dict.fromkeys(unknown)))

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
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def describe_tokenizer(folder: Path) -> TokenizerInfo:
    """The tokenizer in `folder`: its kind, vocabulary size, lowercasing and accent stripping."""
    path = folder / "tokenizer.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            return _from_tokenizer_json(data)
    return _from_other_files(folder)


def _from_tokenizer_json(data: dict[str, Any]) -> TokenizerInfo:
    model = data.get("model") or {}
    kind = _KINDS.get(str(model.get("type")), str(model.get("type") or "unknown"))
    if kind == "BPE" and "ByteLevel" in json.dumps(data.get("pre_tokenizer")):
        kind = "byte-level BPE"
    vocab = model.get("vocab")
    size = len(vocab) if isinstance(vocab, dict | list) else None
    if isinstance(vocab, dict):
        added = data.get("added_tokens") or []
        size = len(vocab) + sum(t.get("content") not in vocab for t in added)
    lowercase, accents = _normaliser(data.get("normalizer"))
    return TokenizerInfo(kind, size, lowercase, accents)


def _normaliser(spec: Any) -> tuple[bool, bool]:
    """(lowercases, strips accents) of a tokenizers normalizer spec."""
    if not isinstance(spec, dict):
        return False, False
    kind = spec.get("type")
    if kind == "BertNormalizer":
        lower = bool(spec.get("lowercase"))
        strip = spec.get("strip_accents")
        return lower, lower if strip is None else bool(strip)  # None follows lowercase
    if kind == "Sequence":
        parts = [_normaliser(n) for n in spec.get("normalizers") or []]
        return any(p[0] for p in parts), any(p[1] for p in parts)
    return kind == "Lowercase", kind == "StripAccents"


def _from_other_files(folder: Path) -> TokenizerInfo:
    config: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    lower = config.get("do_lower_case")
    strip = config.get("strip_accents", lower)
    if (folder / "vocab.txt").is_file():
        kind = "WordPiece"
        size: int | None = sum(1 for _ in (folder / "vocab.txt").open(encoding="utf-8"))
    elif (folder / "vocab.json").is_file():
        kind, size = "byte-level BPE", None
    elif any((folder / n).is_file() for n in ("sentencepiece.bpe.model", "spiece.model")):
        kind, size = "SentencePiece", None
    else:
        kind, size = "unknown", None
    return TokenizerInfo(
        kind,
        size,
        None if lower is None else bool(lower),
        None if strip is None else bool(strip),
    )


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.S)


def model_languages(folder: Path) -> tuple[str, ...] | None:
    """The languages the model card (`README.md` beside the weights) lists; None if it doesn't.

    Reads the `language:` field of the card's YAML front matter, as a single value
    (`language: en`), an inline list (`language: [pt, en]`) or a block list.
    """
    try:
        text = (folder / "README.md").read_text(encoding="utf-8", errors="replace")[:20_000]
    except OSError:
        return None
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
        how = [f"{self.pieces_per_word:.1f} pieces per word ({self.pieces} for {self.words} words)"]
        if self.unknown:
            shown = ", ".join(self.unknown[:5]) + (" …" if len(self.unknown) > 5 else "")
            how.append(f"{len(self.unknown)} unknown word(s): {shown}")
        speaks = f" (model language: {', '.join(languages)})" if languages else ""
        if decoder:
            return (
                f"note: this text fits {model}'s vocabulary badly{speaks}: {'; '.join(how)}, so "
                "its attention is spread over fragments of words. For a text in another "
                "language use a model trained on it (--quiet hides notes)"
            )
        return (
            f"note: this text fits {model}'s vocabulary badly{speaks}: {'; '.join(how)}, so "
            "its attention is spread over fragments of words. For a text in another language "
            f"use a model for it, e.g. for Portuguese --model {OTHER_MODELS[0]}, or a "
            f"multilingual {OTHER_MODELS[1]} or {OTHER_MODELS[2]} (--quiet hides notes)"
        )


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
        if any(pieces.tokens[i] in UNKNOWN_TOKENS for i in word.pieces):
            unknown.append(word.label)
    return VocabularyFit(words, counted, tuple(dict.fromkeys(unknown)))

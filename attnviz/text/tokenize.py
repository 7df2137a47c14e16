"""Text to word pieces (`attnviz.text.pieces.Pieces`) with a model's own tokenizer.

The `tokenizers` library reads a model's `tokenizer.json` without importing
transformers; only a model without that file falls back to transformers'
AutoTokenizer (whose fast tokenizer wraps the same object). A text is refused by its
size before it is tokenized, and cut at a space when truncation is asked for.

"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import PASS_THROUGH, AttnvizError, BadInput, quiet_panics, short_reason
from attnviz.limits import TOKENIZER_BYTES, max_text_chars
from attnviz.reading import read_bounded, read_json
from attnviz.text.pieces import Pieces, is_punctuation

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer


# Tokenizer files other than tokenizer.json that transformers can build a fast tokenizer from:
# WordPiece, byte-level BPE (with merges.txt), XLM-RoBERTa's and ALBERT's sentencepiece models,
# and DeBERTa-v2/v3's (spm.model; transformers' engine computes DeBERTa).
TOKENIZER_FILES = (
    "vocab.txt",
    "vocab.json",
    "sentencepiece.bpe.model",
    "spiece.model",
    "spm.model",
)
# What transformers reads besides them; all are copied, each read as `reading.read_bounded`
# reads it, into a private folder that transformers then reads (see `_from_pretrained`).
_WITH_THEM = (
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "config.json",
)


def load_tokenizer(folder: Path, *, use_cache: bool = True) -> Tokenizer:
    """The model's fast tokenizer, with its own padding and truncation switched off.

    `use_cache` (unless ATTNVIZ_NO_CACHE is set) keeps a tokenizer that transformers had
    to convert in the cache's folder, for the next run.
    """
    path = folder / "tokenizer.json"
    if not path.exists() and not any((folder / name).exists() for name in TOKENIZER_FILES):
        raise AttnvizError(
            f"{folder} has no tokenizer.json or vocab.txt (nor vocab.json or a sentencepiece "
            "model): copy the tokenizer files that came with the checkpoint next to its config.json"
        )
    try:
        if path.exists():
            from tokenizers import Tokenizer

            # Read here, bounded and from a regular file only; parsed by the library.
            text = read_bounded(path, TOKENIZER_BYTES, "tokenizer file").decode("utf-8")
            with quiet_panics():
                tokenizer = Tokenizer.from_str(text)
        else:
            tokenizer = _tokenizer_from_transformers(folder, use_cache)
    except (AttnvizError, *PASS_THROUGH):
        raise
    except BaseException as exc:  # a Rust panic too (see PASS_THROUGH); RecursionError
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

    from attnviz.cache import settings, tokenizers

    saved = None
    if use_cache and settings.cache_enabled(False):
        with contextlib.suppress(OSError):
            saved = tokenizers.tokenizer_path(folder)
    if saved is not None:
        with contextlib.suppress(Exception):  # missing or unreadable: convert again below
            text = tokenizers.load_tokenizer_json(saved)
            if text is not None:
                with quiet_panics():
                    return Tokenizer.from_str(text)

    from transformers import AutoTokenizer

    auto = _from_pretrained(AutoTokenizer, folder)
    backend = getattr(auto, "backend_tokenizer", None)
    if backend is None:
        raise AttnvizError(
            f"{folder} has no tokenizer.json and its tokenizer has no fast version: "
            "add tokenizer.json (save the tokenizer with transformers)"
        )
    if saved is not None:
        tokenizers.store_tokenizer_json(saved, backend.to_str())
    return backend


def _from_pretrained(auto_tokenizer: Any, folder: Path) -> Any:
    """transformers' tokenizer for `folder`, built from bounded copies of its files.

    transformers opens a folder's files itself, whatever they are: each is copied here
    first, only when it is a regular file within `limits.TOKENIZER_BYTES` (else one
    line), into a private folder that transformers reads instead.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="attnviz-tokenizer-") as private:
        for name in (*TOKENIZER_FILES, *_WITH_THEM):
            if (folder / name).exists():
                data = read_bounded(folder / name, TOKENIZER_BYTES, "tokenizer file")
                if name.endswith(".json"):
                    _check_nesting(folder / name, data)
                (Path(private) / name).write_bytes(data)
        return auto_tokenizer.from_pretrained(private, local_files_only=True)


def _check_nesting(path: Path, data: bytes) -> None:
    """Refuse JSON nested past Python's parser in one line naming the file (transformers
    would report it as a RecursionError); any other fault is left for transformers to report."""
    import json

    try:
        json.loads(data)
    except RecursionError:
        raise AttnvizError(
            f"cannot read {path}: its JSON is nested too deeply; restore or re-download the file"
        ) from None
    except ValueError:
        pass


def tokenize(
    tokenizer: Tokenizer,
    text: str,
    *,
    pair: str | None = None,
    max_positions: int,
    truncate: bool | None = False,
    why: str = "",
    start: tuple[str, int] | None = None,
    unstart: int | None = None,
) -> Pieces:
    """Tokenize `text` (and `pair`) with special tokens; enforce the model's length limit.

    `truncate` None: the caller offers no truncation (`find --file` reads each example
    whole), so a refusal of a long text does not point to it.

    `why` follows the limit in the refusal when the bound is not the model's own.
    `start` (token, id) is a start token put in front of the tokenizer's pieces (see
    `start_token`); it takes one of the `max_positions`. `unstart` is the id of a start
    token the tokenizer puts in front itself, taken off (the text read as typed).
    """
    for value in (text, pair):
        try:
            (value or "").encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: bytes that were not UTF-8
            raise BadInput(
                "the text is not valid UTF-8: convert it first, e.g. iconv -f latin1 -t utf-8"
            ) from None
    extra = 1 if start is not None else 0
    room = max_positions - extra  # positions left for the tokenizer's own pieces
    given = len(text)
    text, cut = _bounded(text, pair, max(room, 1), bool(truncate))
    encoding = _encode(tokenizer, text, pair)
    if all(seq is None for seq in encoding.sequence_ids):
        raise BadInput(
            "the text has nothing the tokenizer keeps (only spaces, control or zero-width "
            "characters): pass a sentence with words"
        )
    dropped = 0
    if len(encoding) > room:
        with_start = f" with the start token {start[0]} attnviz adds" if start else ""
        if not truncate or room < 1:
            if room < 1:
                fix = "raise {max_tokens}"
            elif truncate is None:
                fix = "shorten it"
            else:
                fix = "shorten it or pass {truncate} to keep the first " + str(max_positions)
            raise BadInput(
                f"the text is {len(encoding) + extra} pieces long{with_start} but the model takes "
                f"at most {max_positions}{why}: {fix}"
                + (" ({bos} reads the text as typed)" if start else ""),
                param=("truncate", "max_tokens", "bos"),  # `why` may name max_tokens
            )
        tokenizer.enable_truncation(room)
        try:
            full = len(encoding)
            encoding = _encode(tokenizer, text, pair)
            dropped = full - len(encoding)
        finally:
            tokenizer.no_truncation()
    typed = typed_special(tokenizer, encoding, text, pair)
    if cut:
        cut = _unread(encoding, given)
    pieces = _pieces(encoding, text, pair, dropped, cut, typed)
    if start is not None:
        return pieces.with_start(*start)
    if unstart is not None and len(pieces) > 1 and pieces.ids[0] == unstart:
        return pieces.without_start() if pieces.sequence_ids[0] is None else pieces
    return pieces


def typed_special(
    tokenizer: Tokenizer, encoding: Encoding, text: str, pair: str | None
) -> set[int]:
    """Positions of special tokens typed in the text (`<|endoftext|>`, `[SEP]`).

    The tokenizer keeps such a token whole but gives it the text's sequence id, as if it
    were a word; it is the model's special token all the same (a decoder parks attention
    on a typed `<|endoftext|>` as it does on its start token), so attnviz counts it as
    special: its own unit, dropped by `exclude="special"`. Only a token the text spells
    out counts: an unknown character's [UNK] stays the text's.
    """
    special = {
        i: added.content
        for i, added in tokenizer.get_added_tokens_decoder().items()
        if added.special
    }
    typed = set()
    for t, (token_id, seq) in enumerate(zip(encoding.ids, encoding.sequence_ids, strict=True)):
        if seq is None or token_id not in special:
            continue
        start, end = encoding.offsets[t]
        source = pair if seq == 1 and pair is not None else text
        if source[start:end].strip() == special[token_id]:
            typed.add(t)
    return typed


def start_token(
    tokenizer: Tokenizer, folder: Path, config: dict[str, Any]
) -> tuple[str, int] | None:
    """The model's start token (BOS) as (token, id) when its tokenizer does not add one
    itself; None when it does, or when the model defines none.

    The start token is the tokenizer's `bos_token` (tokenizer_config.json), else
    config.json's `bos_token_id`, when the vocabulary has it. Interpretability tools read a
    decoder with it in front (TransformerLens prepends it by default): the model was
    trained on texts that follow one, and without it the first word takes the role of the
    attention sink.
    """
    token = _configured_bos(folder)
    token_id = tokenizer.token_to_id(token) if token is not None else None
    if token_id is None:
        raw = config.get("bos_token_id")
        if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
            token, token_id = tokenizer.id_to_token(raw), raw
    if token is None or token_id is None:
        return None
    if own_start(tokenizer) == token_id:
        return None  # the tokenizer adds it itself (Llama, Gemma)
    return token, token_id


def own_start(tokenizer: Tokenizer) -> int | None:
    """The id of the start token the tokenizer puts in front by itself (Llama's, Gemma's
    `<bos>`), or None."""
    with contextlib.suppress(Exception):  # a tokenizer that fails on "" adds nothing we know of
        first = _encode(tokenizer, "", None).ids[:1]
        if first:
            return int(first[0])
    return None


def _configured_bos(folder: Path) -> str | None:
    """tokenizer_config.json's `bos_token` (a string, or an object with `content`), if any."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return None
    try:
        config = read_json(path, TOKENIZER_BYTES, "tokenizer file")
    except AttnvizError:
        return None  # a broken tokenizer_config.json: config.json's bos_token_id may say
    bos = config.get("bos_token") if isinstance(config, dict) else None
    if isinstance(bos, dict):
        bos = bos.get("content")
    return bos if isinstance(bos, str) and 0 < len(bos) <= 100 else None


def split_words(
    offsets: Sequence[tuple[int, int]],
    sequence_ids: Sequence[int | None],
    text: str,
    pair: str | None,
) -> list[int | None]:
    """Word ids from the pieces' spans, for a tokenizer that marks no words of its own.

    A tokenizer without a pre-tokenizer (Gemma's: its normalizer turns spaces into `▁` and
    the whole text is one "word") gives every piece the same word id, so attnviz draws the
    sentence as one word. Here a word starts at the text's start, after whitespace, and at
    and after punctuation, as BERT's pre-tokenizer splits words; special tokens have none.
    """
    words: list[int | None] = []
    count, previous_punct = -1, False
    for (start, end), seq in zip(offsets, sequence_ids, strict=True):
        if seq is None:
            words.append(None)
            continue
        source = pair if seq == 1 and pair is not None else text
        span = source[start:end].strip()
        punct = is_punctuation(span)
        before = source[start - 1 : start] if start > 0 else ""
        new = count < 0 or start == 0 or before.isspace() or source[start:end][:1].isspace()
        if new or punct or previous_punct:
            count += 1
        words.append(count)
        previous_punct = punct
    return words


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


def _unread(encoding: Encoding, size: int) -> int:
    """The characters of a text of `size` characters that `encoding` leaves unread: those
    after the end of its last piece of the text (sequence 0).

    What a cut before tokenizing (`_bounded`) drops is more than the characters cut: the
    characters before the cut that no piece read covers go too (the pieces cut after
    tokenizing, or marks the tokenizer keeps no piece for: "a" and 100,000 combining
    accents cut at 32,768 characters leave 100,000 unread, not 67,233).
    """
    ends = [
        end
        for (_, end), sequence in zip(encoding.offsets, encoding.sequence_ids, strict=True)
        if sequence == 0
    ]
    return size - max(ends, default=0)


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


def _pieces(
    encoding: Encoding,
    text: str,
    pair: str | None,
    dropped: int,
    cut: int = 0,
    special: Collection[int] = (),
) -> Pieces:
    """The Pieces of `encoding`; positions in `special` (typed special tokens) count as
    special: no word, no sequence."""
    word_ids = [None if t in special else w for t, w in enumerate(encoding.word_ids)]
    sequence_ids = [None if t in special else s for t, s in enumerate(encoding.sequence_ids)]
    # A typed special token keeps no span, as the tokenizer's own have none: its sequence
    # is gone, so a span would point into the wrong one of text and pair.
    offsets = [(0, 0) if t in special else (o[0], o[1]) for t, o in enumerate(encoding.offsets)]
    if (
        len({w for w in word_ids if w is not None}) == 1
        and sum(w is not None for w in word_ids) > 1
    ):
        word_ids = split_words(encoding.offsets, sequence_ids, text, pair)
    return Pieces(
        text=text,
        pair=pair,
        tokens=list(encoding.tokens),
        ids=list(encoding.ids),
        type_ids=list(encoding.type_ids),
        offsets=offsets,
        word_ids=word_ids,
        sequence_ids=sequence_ids,
        dropped=dropped,
        cut=cut,
    )

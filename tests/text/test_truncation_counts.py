"""The truncation note counts what --truncate actually dropped (issue 34).

A text far too long is cut before it is tokenized, then its pieces past the model's limit
are dropped. The characters the note counts are every character left unread (after the
end of the last piece read), not only those cut before tokenizing: "a" and 100,000
combining accents (U+0301) printed "dropped the last 0 pieces and the last 67,233
characters", though the model reads the "a" alone and none of the 100,000 accents.
"""

from __future__ import annotations

from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.text.pieces import Pieces

ACCENTS = "a" + "\u0301" * 100_000


def last_read(pieces: Pieces) -> int:
    """The end of the last piece of the text read (sequence 0)."""
    ends = zip(pieces.offsets, pieces.sequence_ids, strict=True)
    return max(end for (_, end), q in ends if q == 0)


def test_combining_accents_cut_count_every_accent_left_unread() -> None:
    prepared = attnviz.prepare(ACCENTS, truncate=True, max_tokens=8, cache=False)
    assert prepared.pieces.tokens == ["[CLS]", "a", "[SEP]"] and prepared.dropped == 0
    assert last_read(prepared.pieces) == 1
    assert prepared.pieces.cut == 100_000  # every accent: none is read


def test_words_then_accents_count_the_pieces_dropped_and_every_character_after() -> None:
    text = "word " * 10_000 + ACCENTS  # cut at a space, then cut to 8 pieces
    prepared = attnviz.prepare(text, truncate=True, max_tokens=8, cache=False)
    assert len(prepared.pieces) == 8 and prepared.dropped > 6_000
    assert last_read(prepared.pieces) == 29  # six words read: "word word ... word"
    assert prepared.pieces.cut == len(text) - 29


def test_a_text_that_fits_cuts_nothing() -> None:
    prepared = attnviz.prepare("a" + "\u0301" * 100, truncate=True, max_tokens=8, cache=False)
    assert prepared.pieces.cut == 0 and prepared.dropped == 0


def test_the_note_counts_the_accents_dropped() -> None:
    result = CliRunner().invoke(app, ["show", ACCENTS, "--truncate", "--max-tokens", "8"])
    assert result.exit_code == 0, result.stderr
    note = result.stderr.splitlines()[0]
    assert note.startswith("note: --truncate dropped the last 100,000 characters")
    assert "67,233" not in note

"""`attnviz tokens`: the word pieces of the text, no weights loaded."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from attnviz.cli.analysing import prepare_request
from attnviz.cli.input import Request
from attnviz.errors import BadInput


def run(console: Console, request: Request) -> None:
    """The pieces of the text: index, piece, its text, id, word, span (no weights loaded).

    `piece` is the vocabulary's entry (`##ou`, or byte-level BPE's `Ġc` and `JoÃ£o`, whose
    characters stand for bytes); `text` is what the piece covers in the text, as the views
    label it (`##ou`, `c`, `João`).
    """
    from rich.table import Table

    from attnviz import lexicon
    from attnviz.render.cells import visible

    if request.engine != "auto":
        raise BadInput("{engine} chooses what computes the weights, and tokens reads none: "
                       "leave it out", param="engine")  # fmt: skip
    pieces = prepare_request(request)[0].pieces
    words = pieces.words()
    word_of = {i: (w, word.label) for w, word in enumerate(words) for i in word.pieces}
    lang = request.lang
    table = Table(title=lexicon.label(lang, "tokens_title", pieces=len(pieces), words=len(words)))
    for name, justify in (
        ("index", "right"),
        ("piece", "left"),
        ("text", "left"),
        ("id", "right"),
        ("word", "left"),
        ("span", "left"),
    ):
        table.add_column(lexicon.label(lang, f"tokens_{name}"), justify=justify)  # type: ignore[arg-type]
    for i, piece in enumerate(pieces.tokens):
        w, label = word_of[i]
        start, end = pieces.offsets[i]
        span = "" if pieces.sequence_ids[i] is None else f"{start}–{end}"
        text = Text(visible(pieces.labels[i]))
        word = Text(f"{w} {visible(label)}")
        table.add_row(str(i), Text(visible(piece)), text, str(pieces.ids[i]), word, span)
    console.print(table)

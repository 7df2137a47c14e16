"""The face's argument checks (a text, a flag, a bound, a model name), in the caller's words."""

from __future__ import annotations

import numbers
import os

from attnviz.errors import BadInput


def check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise BadInput(f"{what} is empty: pass a sentence")
    return value


def check_flag(value: object, param: str) -> bool:
    """`value` as a bool: True, False (numpy's too, and 0 or 1); BadInput for anything else."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    # Named as is, not as the command line's flag: a flag cannot be given a non-bool.
    raise BadInput(f"{param} must be True or False, got {type(value).__name__}")


def check_max_tokens(value: object) -> int | None:
    """`max_tokens` as an int (numpy's too) or None; BadInput for anything else (its range is
    the model's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BadInput(
            f"{{max_tokens}} must be a whole number of pieces, or None; got {type(value).__name__}",
            param="max_tokens",
        )
    return int(value)


def check_model(model: object) -> str | None:
    """A model given as a str or a path (a folder), as `locate` takes it."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if model is None:
        return model
    if isinstance(model, str):
        check_path_like(model)
        return model
    raise BadInput(
        f"model must be a folder or a Hugging Face Hub id (a str or a path), got "
        f"{type(model).__name__}"
    )


def check_path_like(name: str) -> None:
    """Refuse a model name no folder or Hub id can have: a NUL, a part longer than a file
    name may be (255 bytes), or longer than a path (4,096 bytes); the file system would
    answer with an OSError or a ValueError."""
    try:
        encoded = os.fsencode(name)
    except UnicodeError:
        encoded = b"\0"  # a lone surrogate: no file name either
    if b"\0" in encoded or len(encoded) > 4096 or any(len(p) > 255 for p in encoded.split(b"/")):
        raise BadInput(
            f"model {name[:40]!r}{'…' if len(name) > 40 else ''} is neither a folder nor a "
            "Hugging Face Hub id: no file name holds a NUL or passes 255 bytes",
            param="model",
        )

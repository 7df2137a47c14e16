"""A GGUF file's metadata read by type: every key attnviz reads goes through one of the
readers here (a string, a whole number in a range, a finite number, a bool, a list of strings
or of numbers of a bounded length), which refuse a value of another type in one line naming
the key, what it holds and what was expected, before the value is used.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from attnviz.errors import AttnvizError
from attnviz.limits import shown


class BadGguf(AttnvizError):
    """A GGUF file attnviz cannot read: corrupt, truncated, lying, or of an unknown kind."""


def named(key: str, limit: int = 80) -> str:
    """A metadata key as a message shows it: quoted, escaped, whole up to `limit` characters."""
    return repr(key) if len(key) <= limit else repr(key[: limit - 1]) + "…"


def held(value: object) -> str:
    """What a metadata value is, in words: `the string 'abc'`, `a list of 3 strings`."""
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {shown(value, 40)}"
    if isinstance(value, numbers.Number):
        return f"the number {shown(value, 40)}"
    if isinstance(value, list):
        kinds = sorted({_WORDS.get(type(v).__name__, type(v).__name__) for v in value})
        return f"a list of {len(value):,} {'/'.join(kinds) or 'item'}{'s' * (len(value) != 1)}"
    if isinstance(value, tuple):
        return f"an array of {len(value):,} array{'s' * (len(value) != 1)}"
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        what = "bool" if dtype.kind == "b" else f"{dtype} number"
        return f"an array of {len(value):,} {what}{'s' * (len(value) != 1)}"  # type: ignore[arg-type]
    return f"a {type(value).__name__}"


_WORDS = {"str": "string", "ndarray": "array", "list": "list"}


class Metadata:
    """The metadata of the GGUF file `where`, each key read through a typed reader.

    Each reader returns None for a key the file leaves out, the value when it is of the
    type asked for, and raises BadGguf (one line) for anything else.
    """

    def __init__(self, values: dict[str, Any], where: str) -> None:
        self.values = values
        self.where = where

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def refuse(self, key: str, value: object, expected: str) -> BadGguf:
        return BadGguf(
            f"{self.where}: its metadata key {named(key)} holds {held(value)}, where "
            f"{expected} is expected: the file is corrupt or was not written by llama.cpp "
            "(re-download or re-convert it)"
        )

    def string(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.refuse(key, value, "a string")

    def integer(self, key: str, bounds: tuple[int, int]) -> int | None:
        """A whole number (of any GGUF integer type) from `bounds[0]` to `bounds[1]`."""
        value = self.values.get(key)
        if value is None:
            return None
        low, high = bounds
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise self.refuse(key, value, f"a whole number from {low:,} to {high:,}")
        if not low <= int(value) <= high:
            raise self.refuse(key, value, f"a whole number from {low:,} to {high:,}")
        return int(value)

    def number(self, key: str, positive: bool = False) -> float | None:
        """A finite number (float or integer), above 0 when `positive`."""
        value = self.values.get(key)
        if value is None:
            return None
        what = "a finite number above 0" if positive else "a finite number"
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self.refuse(key, value, what)
        number = float(value)
        if not math.isfinite(number) or (positive and number <= 0):
            raise self.refuse(key, value, what)
        return number

    def flag(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.refuse(key, value, "a bool")

    def strings(self, key: str, limit: int) -> list[str] | None:
        """A list of at most `limit` strings."""
        value = self.values.get(key)
        if value is None:
            return None
        what = f"a list of at most {limit:,} strings"
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.refuse(key, value, what)
        if len(value) > limit:
            raise self.refuse(key, value, what)
        return value

    def numbers(self, key: str, length: int, whole: bool = False) -> list[Any] | None:
        """Exactly `length` finite numbers (whole ones when `whole`), as a Python list."""
        value = self.values.get(key)
        if value is None:
            return None
        what = f"an array of {length:,} {'whole' if whole else 'finite'} numbers"
        kinds = "iu" if whole else "iuf"
        dtype = getattr(value, "dtype", None)
        if dtype is None or dtype.kind not in kinds or len(value) != length:
            raise self.refuse(key, value, what)
        if dtype.kind == "f":
            import numpy as np

            if not np.isfinite(value).all():
                raise self.refuse(key, value, what)
        return list(value.tolist())

"""Slices of a corpus for many processes, and sums that add up the same in any order.

A corpus is cut into blocks of `block_size(batch_size)` sentences in input order (block k
holds sentences k·B … k·B + B − 1); shard I of N (1-based) takes the blocks k with
k mod N = I − 1. A whole run is shard 1 of 1: it runs the same blocks, each batched the
same way (shortest first within its block), so a sentence's attention is computed in the
same batch, bit for bit, whichever shard runs it.

The sums over blocks are kept exact (`ExactSums`: each float64 as an integer multiple of
2**-1074, the smallest float64), so adding the shards' sums in any order gives the same
integer, and rounding it once gives the same float64 a whole run gives.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Sequence

from attnviz.errors import BadInput
from attnviz.limits import CORPUS_CHUNK, SHARDS, check_range

__all__ = [
    "BLOCK_BATCHES",
    "ExactSums",
    "InputDigest",
    "block_size",
    "check_shard",
    "exact",
    "from_hex",
    "rounded",
    "shard_blocks",
    "shard_texts",
    "to_hex",
]

BLOCK_BATCHES = 8  # batches a block holds: sorting within 8 batches keeps the padding small
_SCALE = 1074  # 2**-1074 is the smallest float64: every float64 is an integer times it
_HEX = re.compile(r"-?[0-9a-f]{1,400}")  # a float64 sum in units of 2**-1074 fits in 400


def check_shard(shard: object) -> tuple[int, int]:
    """`(i, n)` (1 ≤ i ≤ n) from a pair or from "I/N", the I-th of N slices; one line if not."""
    if isinstance(shard, str):
        found = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", shard)
        if found is None:
            raise BadInput(f"{{shard}} must be I/N (the I-th of N slices, e.g. 1/4), not {shard!r}",
                           param="shard")  # fmt: skip
        shard = (int(found[1]), int(found[2]))
    if not isinstance(shard, tuple | list) or len(shard) != 2:
        raise BadInput("shard must be a pair (i, n): the i-th of n slices, 1 ≤ i ≤ n",
                       param="shard")  # fmt: skip
    n = check_range(shard[1], "shard", SHARDS, " (the number of slices)")
    i = check_range(shard[0], "shard", (1, n), f" (the slice: 1 to {n})")
    return i, n


def block_size(batch_size: int) -> int:
    """Sentences a block holds: `BLOCK_BATCHES` batches, at most `limits.CORPUS_CHUNK` (a
    corpus is read and held a block at a time: with --batch-size 4096 a block is one batch)."""
    return min(BLOCK_BATCHES * batch_size, max(batch_size, CORPUS_CHUNK))


def shard_blocks(count: int, block: int, shard: tuple[int, int]) -> list[range]:
    """The blocks of `count` items that shard (i, n) takes, each a range of positions."""
    i, n = shard
    starts = range((i - 1) * block, count, n * block)
    return [range(s, min(s + block, count)) for s in starts]


class InputDigest:
    """The sha256 and the count of the texts a run was given, every shard's included."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def add(self, text: str) -> None:
        encoded = text.encode("utf-8", "surrogatepass")
        self._hash.update(len(encoded).to_bytes(8, "little") + encoded)
        self.count += 1

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def shard_texts(
    texts: Iterable[str], block: int, shard: tuple[int, int], digest: InputDigest
) -> Iterator[str]:
    """The texts of shard (i, n), in input order; every text read (and digested), so the
    digest covers the whole input once the iterator is spent."""
    i, n = shard
    for k, text in enumerate(texts):
        digest.add(text)
        if (k // block) % n == i - 1:
            yield text


def exact(values: Sequence[float]) -> list[int]:
    """Each finite float64 as the integer it is in units of 2**-1074 (no rounding)."""
    out = []
    for x in values:
        if not math.isfinite(x):
            raise BadInput(f"a sum is {x}: the model's attention is not finite here")
        numerator, denominator = float(x).as_integer_ratio()  # denominator: a power of 2
        out.append(numerator << (_SCALE + 1 - denominator.bit_length()))
    return out


def rounded(values: Sequence[int]) -> list[float]:
    """The float64 nearest each exact sum (int / int is correctly rounded in Python)."""
    return [v / (1 << _SCALE) for v in values]


def to_hex(values: Sequence[int]) -> list[str]:
    return [format(v, "x") for v in values]


def from_hex(values: object, count: int, what: str) -> list[int]:
    """`count` exact sums written by `to_hex`; one line naming `what` when they are not."""
    if not isinstance(values, list) or len(values) != count:
        raise BadInput(f"{what}: expected {count} sums")
    if not all(isinstance(v, str) and _HEX.fullmatch(v) for v in values):
        raise BadInput(f"{what}: a sum is not a hexadecimal integer")
    return [int(v, 16) for v in values]


class ExactSums:
    """Running exact sums of float64 arrays of one size: `add` a block's sums, `floats()`."""

    def __init__(self, size: int) -> None:
        self.values = [0] * size

    def add(self, floats: Iterable[float]) -> None:
        self.add_exact(exact(list(floats)))

    def add_exact(self, values: Sequence[int]) -> None:
        if len(values) != len(self.values):
            raise ValueError(f"{len(values)} sums, expected {len(self.values)}")
        self.values = [a + b for a, b in zip(self.values, values, strict=True)]

    def floats(self) -> list[float]:
        return rounded(self.values)

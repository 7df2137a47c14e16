"""Fuzzing a GGUF file's metadata: each value replaced by a value of each other type.

Each example takes a tiny GGUF file (a sentencepiece Llama, a byte-level GPT-2), replaces one
metadata key attnviz reads (or adds it, when the file leaves it out) with a string, a whole
number, a float (NaN and infinities among them), a bool, or an array of strings, numbers or
arrays, and converts the file (header, config, tokenizer). Whatever the value:

- the file is converted, or refused with one AttnvizError line, never another exception;
- a value of another type than the key holds is refused, naming the key.

`make test` runs a short, derandomised profile; `make fuzz` the long one
(ATTNVIZ_FUZZ=long, ATTNVIZ_FUZZ_EXAMPLES cases, 400 by default).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnviz.errors import AttnvizError
from attnviz.model.gguf import convert
from tests.gguf_files import (
    ARRAY,
    BOOL,
    FLOAT32,
    FLOAT64,
    STRING,
    UINT8,
    pair,
    pairs,
    with_pairs,
    write_gguf,
)

LONG = os.environ.get("ATTNVIZ_FUZZ") == "long"
EXAMPLES = int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", "400" if LONG else "30"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
)
INTEGERS = (0, 1, 2, 3, 4, 5, 10, 11)  # u8, i8, u16, i16, u32, i32, u64, i64
RANGES = {0: (0, 255), 1: (-128, 127), 2: (0, 65535), 3: (-32768, 32767)}
RANGES.update({4: (0, 2**32 - 1), 5: (-(2**31), 2**31 - 1)})
RANGES.update({10: (0, 2**64 - 1), 11: (-(2**63), 2**63 - 1)})
# Keys attnviz reads that the written files leave out, and the type each holds.
ABSENT = {
    "general.name": "string",
    "general.alignment": "whole",
    "llama.attention.sliding_window": "whole",  # GPT-2 reads none
    "{arch}.rope.scaling.type": "string",
    "{arch}.vocab_size": "whole",
    "tokenizer.ggml.padding_token_id": "whole",
    "tokenizer.ggml.add_eos_token": "bool",
    "tokenizer.ggml.add_space_prefix": "bool",
}


def category(kind: int, value: object = None) -> str:
    """What a GGUF value of type `kind` is: string, whole, number, bool, strings, numbers."""
    if kind == STRING:
        return "string"
    if kind in INTEGERS:
        return "whole"
    if kind in (FLOAT32, FLOAT64):
        return "number"
    if kind == BOOL:
        return "bool"
    item = value[0] if isinstance(value, tuple) else -1  # type: ignore[index]
    if item == STRING:
        return "strings"
    if item in INTEGERS:
        return "wholes"
    if item == BOOL:
        return "bools"
    return "numbers" if item in (FLOAT32, FLOAT64) else "arrays"


# What a key holding one kind of value accepts of another (an integer where a float goes).
ACCEPTED = {("number", "whole"), ("numbers", "wholes")}


def _scalar(kind: int) -> st.SearchStrategy[tuple[int, object]]:
    if kind in RANGES:
        low, high = RANGES[kind]
        picks = [v for v in (0, 1, -1, 7, 2**31, 2**40, high) if low <= v <= high]
        return st.sampled_from(picks).map(lambda v: (kind, v))
    if kind in (FLOAT32, FLOAT64):
        picks = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1.5, 1e-6]
        return st.sampled_from(picks).map(lambda v: (kind, v))
    if kind == BOOL:
        return st.booleans().map(lambda v: (kind, v))
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
    return text.map(lambda v: (kind, v))


def values() -> st.SearchStrategy[tuple[int, object]]:
    """A metadata value of any type: (GGUF type, value; an array's value (item type, items))."""
    scalar = st.sampled_from([*INTEGERS, FLOAT32, FLOAT64, BOOL, STRING]).flatmap(_scalar)
    array = st.sampled_from([UINT8, 5, FLOAT32, BOOL, STRING]).flatmap(
        lambda item: st.lists(_scalar(item), max_size=3).map(
            lambda items: (ARRAY, (item, [v for _, v in items]))
        )
    )
    nested = st.integers(0, 2).map(lambda n: (ARRAY, (ARRAY, [(UINT8, [1])] * n)))
    return st.one_of(scalar, array, nested)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fuzz-gguf")
    return {
        family: write_gguf(folder / f"{family}.gguf", family, "F32") for family in ("llama", "gpt2")
    }


def _held(raw: bytes) -> tuple[str, str]:
    """(key, category) of one metadata pair's bytes."""
    (n,) = struct.unpack_from("<Q", raw, 0)
    kind = struct.unpack_from("<I", raw, 8 + n)[0]
    value = struct.unpack_from("<I", raw, 12 + n) if kind == ARRAY else None
    return raw[8 : 8 + n].decode(), category(kind, value)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_every_metadata_value_of_another_type_is_one_line_naming_its_key(
    files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    family = data.draw(st.sampled_from(sorted(files)), label="family")
    base = files[family].read_bytes()
    held = dict(_held(raw) for raw in pairs(base)[0].values())
    ours = ("general.", "tokenizer.", "{arch}.", f"{family}.")
    absent = {k.format(arch=family): v for k, v in ABSENT.items() if k.startswith(ours)}
    held.update({k: v for k, v in absent.items() if k not in held})
    key = data.draw(st.sampled_from(sorted(held)), label="key")
    kind, value = data.draw(values(), label="value")
    path = tmp_path_factory.mktemp("case") / "m.gguf"
    path.write_bytes(with_pairs(base, {key: None}, (pair(key, kind, value),)))
    convert.forget()
    try:
        convert.converted_folder(path, use_cache=False)
        message = None
    except AttnvizError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 600, message
        assert "unexpected" not in message, message
    given_as = category(kind, value)
    if given_as != held[key] and (held[key], given_as) not in ACCEPTED:
        assert message is not None, f"{key} ({held[key]}) accepted {given_as}: {value!r}"
        assert repr(key) in message, message

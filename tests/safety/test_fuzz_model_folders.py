"""Fuzzing model folders: config.json, tokenizer.json and safetensors headers from strangers.

Each example copies a valid tiny checkpoint, mutates one of its files, and runs
`attnviz show` on it in a fresh process (a crash in Rust or C would take pytest down
with it). Every outcome must be a result (valid JSON) or one `Error:` line with exit
code 1 or 2, in bounded time and memory: never a traceback, a signal, a hang, or
"out of memory".

`make test` runs a short, derandomised profile; `make fuzz` the long one
(ATTNVIZ_FUZZ=long, a few hundred cases per file kind).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import TinyFactory

LONG = os.environ.get("ATTNVIZ_FUZZ") == "long"
EXAMPLES = int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", "150" if LONG else "6"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
)
TIME_LIMIT_S = 60  # a tiny model: anything near this is a hang
PEAK_RSS_MB = 1500  # a tiny model: torch and the tokenizer take about 400 MB
TEXT = "João pensou: o trem estava cheio, mas ele conseguiu uma cadeira livre. aaaaaaaab"

# Values a hostile JSON file may hold where a number, a string or a table is expected.
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**9, 512, 513, 65536, 65537]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["gelu", "relu", "bert", "roberta", "(a+)+$", "[UNK]"]),
    st.integers(10_000, 1_000_000).map(lambda n: "x" * n),  # a value too long to echo
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _run(folder: Path) -> tuple[int, str, str, float]:
    """attnviz show on `folder` in a fresh wrapper: (exit code, stdout, stderr, peak RSS MB)."""
    code = (
        "import json, resource, subprocess, sys\n"
        f"r = subprocess.run(sys.argv[1:], capture_output=True, timeout={TIME_LIMIT_S},"
        " stdin=subprocess.DEVNULL)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps([r.returncode, r.stdout.decode(errors='replace'),"
        " r.stderr.decode(errors='replace'), peak]))\n"
    )
    command = [sys.executable, "-m", "attnviz", "show", TEXT, "--model", str(folder)]
    command += ["--no-cache", "--json", "--units", "tokens"]
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1", "RUST_BACKTRACE": "1"}
    wrapper = subprocess.run(
        [sys.executable, "-c", code, *command],
        capture_output=True,
        env=env,
        timeout=TIME_LIMIT_S + 30,
    )
    assert wrapper.returncode == 0, f"hang or wrapper failure: {wrapper.stderr[-2000:]!r}"
    returncode, out, err, peak = json.loads(wrapper.stdout)
    return returncode, out, err, peak


def _check(folder: Path, what: str) -> None:
    code, out, err, peak = _run(folder)
    assert code in (0, 1, 2), f"{what}: exit {code} (a signal?)\n{err[-3000:]}"
    assert "Traceback" not in err and "panicked" not in err, f"{what}:\n{err[-3000:]}"
    assert peak < PEAK_RSS_MB, f"{what}: peak RSS {peak:.0f} MB"
    if code == 0:
        record = json.loads(out, parse_constant=_no_constant)  # NaN is not JSON
        assert record["weights"], what
        return
    assert out == "", f"{what}: output and an error"
    assert err.startswith("Error: ") and err.count("\n") == 1, f"{what}:\n{err[-3000:]}"
    assert "please report it" not in err and "out of memory" not in err, f"{what}: {err}"
    assert len(err) < 1000, f"{what}: a {len(err)}-character error line"


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} in JSON output")


def _copy(base: Path, into: str) -> Path:
    folder = Path(into) / "model"
    shutil.copytree(base, folder)
    return folder


def _set_path(document: Any, path: list[Any], value: Any) -> Any:
    """`document` with the item at `path` (keys or indices, clipped to what exists) set."""
    if not path or not isinstance(document, dict | list) or not document:
        return value
    step, rest = path[0], path[1:]
    if isinstance(document, dict):
        keys = sorted(document)
        key = step if isinstance(step, str) and step in document else keys[hash(step) % len(keys)]
        return {**document, key: _set_path(document[key], rest, value)}
    index = step % len(document) if isinstance(step, int) else 0
    return [*document[:index], _set_path(document[index], rest, value), *document[index + 1 :]]


_PATHS = st.lists(st.one_of(st.text(max_size=12), st.integers(0, 10_000)), max_size=4)
_BYTES = st.tuples(st.integers(0, 10**9), st.binary(max_size=16))  # where, what


def _mutate_bytes(data: bytes, how: str, where: int, junk: bytes) -> bytes:
    at = where % max(1, len(data))
    if how == "truncate":
        return data[:at]
    if how == "overwrite":
        return data[:at] + junk + data[at + len(junk) :]
    return data[:at] + junk + data[at:]  # insert


@pytest.fixture(scope="module")
def base(tiny_bert: TinyFactory) -> Path:
    return tiny_bert(max_position_embeddings=128)


def test_the_unmutated_checkpoint_gives_a_result(base: Path) -> None:
    code, out, err, _ = _run(base)
    assert code == 0, err
    assert json.loads(out)["tokens"][0] == "[CLS]"


CONFIG_KEYS = [
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "vocab_size",
    "type_vocab_size",
    "hidden_act",
    "layer_norm_eps",
    "pad_token_id",
    "position_embedding_type",
    "is_decoder",
    "embedding_size",
    "architectures",
]


@FUZZ
@given(
    choice=st.one_of(
        st.tuples(st.just("set"), st.sampled_from(CONFIG_KEYS), _JSON),
        st.tuples(st.just("delete"), st.sampled_from(CONFIG_KEYS), st.none()),
        st.tuples(st.just("bytes"), st.sampled_from(["truncate", "overwrite", "insert"]), _BYTES),
        st.tuples(st.just("whole"), st.just(""), _JSON),
    )
)
def test_fuzz_config_json(base: Path, choice: tuple[str, str, Any]) -> None:
    how, key, value = choice
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy(base, tmp)
        path = folder / "config.json"
        config = json.loads(path.read_text())
        if how == "set":
            config[key] = value
            path.write_text(json.dumps(config))
        elif how == "delete":
            config.pop(key, None)
            path.write_text(json.dumps(config))
        elif how == "whole":
            path.write_text(json.dumps(value))
        else:
            where, junk = value
            path.write_bytes(_mutate_bytes(path.read_bytes(), key, where, junk))
        _check(folder, f"config.json {how} {key}={str(value)[:80]!r}")


DECODER_CONFIG_KEYS = {
    "llama": [
        "model_type",
        "num_key_value_heads",
        "head_dim",
        "rope_parameters",
        "rope_scaling",
        "rope_theta",
        "sliding_window",
        "layer_types",
        "max_window_layers",
        "use_sliding_window",
        "attention_bias",
        "rms_norm_eps",
        "max_position_embeddings",
        "hidden_size",
        "num_attention_heads",
    ],
    "gpt2": [
        "model_type",
        "n_embd",
        "n_head",
        "n_layer",
        "n_inner",
        "n_positions",
        "activation_function",
        "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn",
        "layer_norm_epsilon",
    ],
}


@pytest.fixture(scope="module")
def decoders(tiny_decoder: TinyFactory) -> dict[str, Path]:
    return {"llama": tiny_decoder("qwen2", sliding_window=5), "gpt2": tiny_decoder("gpt2")}


@FUZZ
@given(
    family=st.sampled_from(["llama", "gpt2"]),
    choice=st.one_of(
        st.tuples(st.just("set"), st.integers(0, 100), _JSON),
        st.tuples(st.just("delete"), st.integers(0, 100), st.none()),
    ),
)
def test_fuzz_decoder_config_json(
    decoders: dict[str, Path], family: str, choice: tuple[str, int, Any]
) -> None:
    how, which, value = choice
    keys = DECODER_CONFIG_KEYS[family]
    key = keys[which % len(keys)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy(decoders[family], tmp)
        path = folder / "config.json"
        config = json.loads(path.read_text())
        if how == "set":
            config[key] = value
        else:
            config.pop(key, None)
        path.write_text(json.dumps(config))
        _check(folder, f"{family} config.json {how} {key}={str(value)[:80]!r}")


TOKENIZER_PATHS = [
    ["model", "type"],
    ["model", "unk_token"],
    ["model", "vocab"],
    ["model", "continuing_subword_prefix"],
    ["model", "max_input_chars_per_word"],
    ["normalizer"],
    ["normalizer", "type"],
    ["pre_tokenizer"],
    ["pre_tokenizer", "type"],
    ["post_processor"],
    ["post_processor", "single"],
    ["added_tokens"],
    ["truncation"],
    ["padding"],
    ["decoder"],
]
_REGEXES = st.sampled_from(["(a+)+$", "(a|a)*b", "(?=a)*", "[", "\\p{L}+", "(x+x+)+y", ""])


@FUZZ
@given(
    choice=st.one_of(
        st.tuples(st.just("set"), st.sampled_from(TOKENIZER_PATHS), _JSON),
        st.tuples(st.just("regex"), st.just(["pre_tokenizer"]), _REGEXES),
        st.tuples(st.just("deep"), _PATHS, _JSON),
        st.tuples(st.just("bytes"), st.sampled_from(["truncate", "overwrite", "insert"]), _BYTES),
    )
)
def test_fuzz_tokenizer_json(base: Path, choice: tuple[str, Any, Any]) -> None:
    how, where, value = choice
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy(base, tmp)
        path = folder / "tokenizer.json"
        if how == "bytes":
            at, junk = value
            path.write_bytes(_mutate_bytes(path.read_bytes(), where, at, junk))
        else:
            document = json.loads(path.read_text())
            if how == "regex":
                split = {"type": "Split", "pattern": {"Regex": value}, "behavior": "Isolated"}
                value = {**split, "invert": False}
            document = _set_path(document, list(where), value)
            path.write_text(json.dumps(document))
        _check(folder, f"tokenizer.json {how} {where} = {str(value)[:80]!r}")


_DTYPES = st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "X"])
_SHAPES = st.lists(st.integers(-2, 2**40), max_size=4)
_OFFSETS = st.lists(st.integers(-(2**63), 2**64), min_size=0, max_size=3)


@FUZZ
@given(
    choice=st.one_of(
        st.tuples(st.just("dtype"), st.integers(0, 100), _DTYPES),
        st.tuples(st.just("shape"), st.integers(0, 100), _SHAPES),
        st.tuples(st.just("offsets"), st.integers(0, 100), _OFFSETS),
        st.tuples(st.just("entry"), st.integers(0, 100), _JSON),
        st.tuples(st.just("length"), st.integers(0, 100), st.integers(0, 2**64 - 1)),
        st.tuples(st.just("bytes"), st.sampled_from(["truncate", "overwrite", "insert"]), _BYTES),
    )
)
def test_fuzz_safetensors_header(base: Path, choice: tuple[str, Any, Any]) -> None:
    how, which, value = choice
    with tempfile.TemporaryDirectory() as tmp:
        folder = _copy(base, tmp)
        path = folder / "model.safetensors"
        data = path.read_bytes()
        if how == "bytes":
            at, junk = value
            path.write_bytes(_mutate_bytes(data, which, at, junk))
        else:
            (length,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8 : 8 + length])
            body = data[8 + length :]
            names = sorted(k for k in header if k != "__metadata__")
            name = names[which % len(names)]
            if how == "length":
                path.write_bytes(struct.pack("<Q", value) + data[8:])
                _check(folder, f"safetensors header length {value}")
                return
            if how == "entry":
                header[name] = value
            else:
                field = {"dtype": "dtype", "shape": "shape", "offsets": "data_offsets"}[how]
                header[name] = {**header[name], field: value}
            raw = json.dumps(header).encode()
            path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
        _check(folder, f"model.safetensors {how} {which} = {str(value)[:80]!r}")


@pytest.fixture(scope="module")
def gguf_base(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from tests.gguf_files import write_gguf

    path = write_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", "llama", "Q8_0")
    return path.read_bytes()


# Where a GGUF file's counts and lengths sit: the tensor and pair counts, the first key's
# length; anywhere in the header (a u64 overwritten at a random place) or the data.
_GGUF_U64 = st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**31, 2**32, 2**62, 2**63])


@FUZZ
@given(
    choice=st.one_of(
        st.tuples(st.just("u64"), st.sampled_from([8, 16, 24]), _GGUF_U64),
        st.tuples(st.just("u64 anywhere"), st.integers(0, 10**9), _GGUF_U64),
        st.tuples(st.just("bytes"), st.sampled_from(["truncate", "overwrite", "insert"]), _BYTES),
    )
)
@example(choice=("bytes", "insert", (182783, b"\x00")))  # a block's scale turned infinite
def test_fuzz_gguf_file(gguf_base: bytes, choice: tuple[str, Any, Any]) -> None:
    how, where, value = choice
    data = bytearray(gguf_base)
    if how == "bytes":
        at, junk = value
        data = bytearray(_mutate_bytes(bytes(data), where, at, junk))
    else:
        at = where if how == "u64" else 4 + where % (len(data) - 12)
        data[at : at + 8] = struct.pack("<Q", value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        path.write_bytes(bytes(data))
        _check(path, f"gguf {how} {where} = {str(value)[:80]!r}")

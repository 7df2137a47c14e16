"""A model folder from a stranger: every read is bounded, every refusal one line (issue 24).

Each file attnviz reads from a model folder (config.json, the shard index, tokenizer.json
and the tokenizer's other files, the model card, the safetensors header) may be a FIFO
(reading it would wait forever), a device (/dev/zero never ends), a sparse file of
gigabytes, or JSON nested past Python's recursion limit. Each is refused in one line,
or, for the optional model card, skipped ("not stated"), within seconds and in bounded
memory; and a weights header that lies is refused by `info` exactly when `show`
refuses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from attnviz.errors import AttnvizError
from attnviz.limits import CONFIG_BYTES, TOKENIZER_BYTES
from attnviz.model.families import read_config
from attnviz.model.weights import count_parameters, load_encoder, safetensors_shapes, weight_files
from attnviz.reading import read_bounded
from attnviz.text.tokenize import load_tokenizer
from attnviz.text.vocabulary import describe_tokenizer, model_languages
from tests.conftest import TinyFactory

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need a POSIX system")


class Hung(Exception):
    pass


@contextlib.contextmanager
def within(seconds: int = 10) -> Iterator[None]:
    """Fail (instead of hanging the suite) if the block takes longer than `seconds`."""

    def stop(signum: int, frame: object) -> None:
        raise Hung(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _copy(folder: Path, tmp_path: Path, name: str = "model") -> Path:
    copy = tmp_path / name
    shutil.copytree(folder, copy)
    return copy


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _sparse(path: Path, size: int = 2 * 2**30) -> None:
    """A file of `size` bytes that takes no disk (a hole)."""
    path.unlink(missing_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)


def _folder(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()


def _deep(path: Path, depth: int = 100_000) -> None:
    path.write_text('{"model": ' + "[" * depth + "]" * depth + "}")


HOSTILE: dict[str, Callable[[Path], None]] = {
    "a FIFO": _fifo,
    "/dev/zero": _zero,
    "a folder": _folder,
    "a 2 GB sparse file": _sparse,
}


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and len(message) < 400, message
    return message


# --- the one reading function -----------------------------------------------------------------


def test_read_bounded_reads_a_regular_file_whole_and_refuses_past_its_bound(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 1000)
    assert read_bounded(path, 1000, "test file") == b"x" * 1000
    with pytest.raises(
        AttnvizError,
        match=r"f.json is 1 KB; a test file is far smaller \(attnviz reads at most 1 KB\)",
    ) as refused:
        read_bounded(path, 999, "test file")
    one_line(refused)
    assert read_bounded(path, 10, "model card", head=True) == b"x" * 10


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_read_bounded_refuses_what_is_not_a_regular_file_of_its_size(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "tokenizer.json"
    HOSTILE[kind](path)
    with within(), pytest.raises(AttnvizError) as refused:
        read_bounded(path, TOKENIZER_BYTES, "tokenizer file")
    assert str(path) in one_line(refused)


def test_a_fifo_swapped_in_after_the_check_does_not_hang_the_open(tmp_path: Path) -> None:
    """The file is opened without blocking and checked again: the race is lost harmlessly."""
    from attnviz import limits

    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    real_stat = os.stat

    def swapping_stat(target: object, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(target, *args, **kwargs)  # type: ignore[arg-type]
        if Path(str(target)) == path and stat.S_ISREG(result.st_mode):
            path.unlink()
            os.mkfifo(path)  # swapped between the check and the open
        return result

    with within(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits.os, "stat", swapping_stat)
        with pytest.raises(AttnvizError, match="not a regular file"):
            read_bounded(path, TOKENIZER_BYTES, "tokenizer file")


# --- each reader ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_model_card_is_not_read_and_its_language_not_stated(
    tiny_bert: TinyFactory, tmp_path: Path, kind: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    HOSTILE[kind](folder / "README.md")
    with within():
        assert model_languages(folder) is None


def test_a_long_model_card_is_read_only_as_far_as_its_front_matter(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    card = folder / "README.md"
    card.write_text("---\nlanguage: pt\n---\n")
    with card.open("ab") as handle:
        handle.truncate(2 * 2**30)  # 2 GB of nothing after it
    with within():
        assert model_languages(folder) == ("pt",)


@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json", "vocab.txt"])
def test_hostile_tokenizer_files_are_refused_in_one_line(
    tiny_bert: TinyFactory, tmp_path: Path, kind: str, name: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    if name != "tokenizer.json":  # the other files are read when tokenizer.json is absent
        (folder / "tokenizer.json").unlink()
    HOSTILE[kind](folder / name)
    for read in (describe_tokenizer, load_tokenizer):
        with within(), pytest.raises(AttnvizError) as refused:
            read(folder)
        assert name in one_line(refused)


@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize("name", ["special_tokens_map.json", "config.json"])
def test_files_transformers_reads_for_a_tokenizer_are_bounded_too(
    tiny_bert: TinyFactory, tmp_path: Path, kind: str, name: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    (folder / "tokenizer.json").unlink()
    HOSTILE[kind](folder / name)
    with within(), pytest.raises(AttnvizError) as refused:
        load_tokenizer(folder, use_cache=False)
    assert name in one_line(refused)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_config_or_index_is_refused_in_one_line(
    tiny_decoder: TinyFactory, tmp_path: Path, kind: str
) -> None:
    folder = _copy(tiny_decoder("llama", shard="20KB"), tmp_path)
    HOSTILE[kind](folder / "model.safetensors.index.json")
    with within(), pytest.raises(AttnvizError) as refused:
        weight_files(folder)
    assert "model.safetensors.index.json" in one_line(refused)
    HOSTILE[kind](folder / "config.json")
    with within(), pytest.raises(AttnvizError) as refused:
        read_config(folder)
    assert "config.json" in one_line(refused)


def test_the_bounds_are_above_real_files(embedded_folder: Path) -> None:
    assert (embedded_folder / "config.json").stat().st_size < CONFIG_BYTES / 100
    assert (embedded_folder / "tokenizer.json").stat().st_size < TOKENIZER_BYTES / 10


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_deeply_nested_tokenizer_json_is_one_line(
    tiny_bert: TinyFactory, tmp_path: Path, name: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    if name != "tokenizer.json":
        (folder / "tokenizer.json").unlink()
    _deep(folder / name)
    for read in (describe_tokenizer, load_tokenizer):
        with pytest.raises(AttnvizError) as refused:
            read(folder)
        assert name in one_line(refused)


def _sequences(depth: int) -> dict:
    """A normalizer Sequence of Sequences, `depth` deep (within Python's JSON limit)."""
    spec: dict = {"type": "Lowercase"}
    for _ in range(depth):
        spec = {"type": "Sequence", "normalizers": [spec]}
    return spec


@pytest.mark.parametrize(
    "tokenizer",
    [
        {"model": [], "normalizer": 5, "added_tokens": {"a": 1}},
        {"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [3, {"content": [1]}]},
        {"model": {"type": "x" * 10_000}, "pre_tokenizer": {"a": [[[[[[[[{"b": 1}]]]]]]]]}},
        {"model": {"type": "BPE"}, "normalizer": _sequences(400)},
        {"normalizer": {"type": "Sequence", "normalizers": {"a": 1}}},
    ],
)
def test_odd_shapes_of_tokenizer_json_are_described_without_an_internal_error(
    tiny_bert: TinyFactory, tmp_path: Path, tokenizer: dict
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    info = describe_tokenizer(folder)
    assert len(info.kind) <= 40


# --- safetensors headers: info counts what show loads -----------------------------------------


def _rewrite_header(path: Path, change: Callable[[dict], None], tail: bytes = b"") -> None:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    change(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + size :] + tail)


def _first(header: dict) -> dict:
    return header[min(k for k in header if k != "__metadata__")]


def _last(header: dict) -> dict:
    return max(
        (v for k, v in header.items() if k != "__metadata__"), key=lambda v: v["data_offsets"]
    )


LIES: dict[str, tuple[Callable[[dict], None], bytes]] = {
    "a shape of a trillion numbers": (
        lambda h: _first(h).update(shape=[1_000_000, 1_000_000]),
        b"",
    ),
    "a shape one row short": (
        lambda h: _first(h).update(shape=[_first(h)["shape"][0] - 1, *_first(h)["shape"][1:]]),
        b"",
    ),
    "a range past the end": (
        lambda h: _last(h).update(data_offsets=[_last(h)["data_offsets"][0], 10**12]),
        b"",
    ),
    "two tensors in one range": (
        lambda h: _last(h).update(data_offsets=_first(h)["data_offsets"]),
        b"",
    ),
    "an unknown dtype": (lambda h: _first(h).update(dtype="F128"), b""),
    "a dtype of the wrong size": (lambda h: _first(h).update(dtype="F16"), b""),
    "data after the last tensor": (lambda h: None, b"\0" * 64),
    "metadata that is not text": (lambda h: h.update(__metadata__={"format": 1}), b""),
}


@pytest.mark.parametrize("lie", list(LIES))
def test_a_lying_safetensors_header_is_refused_by_info_exactly_as_by_loading(
    tiny_bert: TinyFactory, tmp_path: Path, lie: str
) -> None:
    from safetensors.torch import load_file

    folder = _copy(tiny_bert(), tmp_path)
    change, tail = LIES[lie]
    _rewrite_header(folder / "model.safetensors", change, tail)
    try:
        load_file(folder / "model.safetensors")
        library_loads = True
    except Exception:
        library_loads = False
    assert not library_loads, "the safetensors library loads it: not a lie"
    with pytest.raises(ValueError):
        safetensors_shapes(folder / "model.safetensors")
    with pytest.raises(AttnvizError, match="cannot read weights from") as refused:
        count_parameters(folder)
    one_line(refused)
    with pytest.raises(AttnvizError, match="cannot read weights from"):
        load_encoder(folder)


def test_an_honest_header_in_another_order_is_still_counted(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    counted = count_parameters(folder)
    _rewrite_header(folder / "model.safetensors", lambda h: h.update(dict(reversed(h.items()))))
    assert count_parameters(folder) == counted


def test_weights_that_are_not_floating_point_are_not_counted(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(), tmp_path)

    def to_int(header: dict) -> None:
        entry = header["embeddings.word_embeddings.weight"]
        entry["dtype"] = "I32"  # the same bytes, read as integers

    _rewrite_header(folder / "model.safetensors", to_int)
    with pytest.raises(AttnvizError, match="not floating point"):
        count_parameters(folder)
    with pytest.raises(AttnvizError, match="not floating point"):
        load_encoder(folder)


# --- the command line, as a real process ------------------------------------------------------


def attnviz(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "attnviz", *args],
        capture_output=True,
        env={**os.environ, "COLUMNS": "100", "HF_HUB_OFFLINE": "1", "ATTNVIZ_NO_CACHE": "1"},
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode in (1, 2), err
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.slow  # subprocesses
def test_info_and_tokens_on_a_fifo_card_and_tokenizer_end_within_seconds(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _fifo(folder / "README.md")
    result = attnviz("info", "--model", str(folder), timeout=30)
    assert result.returncode == 0, result.stderr
    assert "not stated" in result.stdout.decode()
    _fifo(folder / "tokenizer.json")
    for command in (["info"], ["tokens", "Hello there"], ["show", "Hello there"]):
        err = one_error_line(attnviz(*command, "--model", str(folder), timeout=30))
        assert "tokenizer.json" in err and "regular file" in err


@pytest.mark.slow  # subprocesses measured from outside
@pytest.mark.parametrize("name", ["tokenizer.json", "config.json", "README.md"])
def test_a_2_gb_file_is_refused_by_its_size_in_bounded_memory(
    tiny_bert: TinyFactory, tmp_path: Path, name: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _sparse(folder / name)
    code = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True, stdin=subprocess.DEVNULL)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024\n"
        "sys.stdout.write(f'{r.returncode}\\n{peak}\\n' + r.stderr.decode(errors='replace'))\n"
    )
    wrapper = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            sys.executable,
            "-m",
            "attnviz",
            "info",
            "--model",
            str(folder),
        ],
        capture_output=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ATTNVIZ_NO_CACHE": "1"},
        check=True,
    )
    returncode, peak, err = wrapper.stdout.decode().split("\n", 2)
    assert int(peak) < 300, f"{peak} MB"  # reading it whole would take 2 GB or more
    if name == "README.md":  # the card is optional: read no further than its start
        assert returncode == "0", err
    else:
        assert returncode == "1" and err.count("\n") == 1, err
        assert "is 2.0 GB; a " in err and "attnviz reads at most" in err


@pytest.mark.slow  # subprocesses
def test_info_and_show_agree_on_a_lying_header(tiny_bert: TinyFactory, tmp_path: Path) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _rewrite_header(folder / "model.safetensors", LIES["a shape of a trillion numbers"][0])
    info = one_error_line(attnviz("info", "--model", str(folder)))
    show = one_error_line(attnviz("show", "Hello there", "--model", str(folder)))
    assert "cannot read weights from" in info and "cannot read weights from" in show
    assert "1,000,000" not in info


@pytest.mark.slow  # subprocess
def test_a_deep_tokenizer_json_is_one_line_from_the_command_line(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _deep(folder / "tokenizer.json")
    for command in (["info"], ["tokens", "Hello there"]):
        err = one_error_line(attnviz(*command, "--model", str(folder)))
        assert "unexpected" not in err and "tokenizer.json" in err

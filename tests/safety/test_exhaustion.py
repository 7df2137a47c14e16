"""Running out of memory (or stack) ends in one line that says what to shrink, never a traceback.

- Under a lowered address-space limit (RLIMIT_AS), the measures and `compare-measures`
  at a long input end in one `Error:` line, in bounded time: refused before any work by
  their estimate, or stopped by the allocation that fails.
- The estimate refuses what will not fit the attention budget (ATTNVIZ_ATTENTION_MB),
  naming the --max-tokens that fits, before torch is imported.
- torch's allocation failure, numpy's `_ArrayMemoryError`, MemoryError and RecursionError
  raised anywhere become one line: exit code 1 on the command line, AttnvizError in Python.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli.app import app
from attnviz.errors import AttnvizError

LONG = " ".join(["hello"] * 510)  # 512 pieces with [CLS] and [SEP], the model's limit
SHORT = "Vi João e Maria ontem. Eles estavam juntos."
ROOT = Path(__file__).resolve().parents[2]


def limited(args: list[str], gigabytes: float, env: dict[str, str] | None = None):
    """`attnviz ARGS` in a process whose address space is capped at `gigabytes`."""
    cap = int(gigabytes * 2**30)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    environment = {**os.environ, "COLUMNS": "100", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    environment.pop("ATTNVIZ_ATTENTION_MB", None)
    return subprocess.run(
        [sys.executable, "-m", "attnviz", *args, "--no-cache"],
        capture_output=True,
        text=True,
        env={**environment, "PYTHONPATH": str(ROOT), **(env or {})},
        preexec_fn=cap_memory,
        timeout=240,  # the bound: a measure left to run at 512 pieces took minutes
    )


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    assert "unexpected" not in lines[0] and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize(
    "args",
    [
        ["compare-measures", LONG, "--query", "hello"],
        ["show", LONG, "--measure", "value-zeroing"],
    ],
    ids=["compare-measures", "value-zeroing"],
)
def test_a_long_input_under_a_memory_cap_ends_in_one_line(args: list[str]) -> None:
    result = limited(args, 2.0)
    line = one_error_line(result.stderr)
    assert result.returncode == 2, result.stderr  # refused by its estimate, before any work
    assert "--max-tokens 256" in line and "value-zeroing" in line


@pytest.mark.slow  # a subprocess that fails to allocate
def test_an_allocation_that_fails_is_one_line() -> None:
    """1.5 GB holds torch and the model, not norm-res-ln's float64 arrays at 512 pieces."""
    result = limited(["show", LONG, "--measure", "norm-res-ln", "--layer", "0"], 1.5)
    if result.returncode == 0:  # a torch build that fits after all: a result, not a crash
        assert "layer 0" in result.stdout
        return
    line = one_error_line(result.stderr)
    assert result.returncode == 1
    assert "out of memory" in line and "--max-tokens" in line


def test_the_estimate_refuses_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNVIZ_ATTENTION_MB", "16")
    prepared = attnviz.prepare(" ".join(["hello"] * 200))
    with pytest.raises(attnviz.BadInput, match=r"max_tokens (\d+) with truncate=True") as refused:
        prepared.check(measure="norm")
    assert "16 MB" in str(refused.value) and "ATTNVIZ_ATTENTION_MB" in str(refused.value)
    fits = int(str(refused.value).split("max_tokens ")[1].split()[0])
    assert 1 <= fits < 202
    attnviz.prepare(" ".join(["hello"] * (fits - 2))).check(measure="norm")  # that one fits
    with pytest.raises(attnviz.BadInput, match="comparing the measures"):
        prepared.check(compared=True)


def test_the_command_line_refuses_by_the_estimate() -> None:
    runner = CliRunner()
    text = " ".join(["hello"] * 200)
    result = runner.invoke(
        app, ["show", text, "--measure", "alti"], env={"ATTNVIZ_ATTENTION_MB": "16"}
    )
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert "--max-tokens" in line and "--truncate" in line


def test_value_zeroing_is_bounded_by_its_work() -> None:
    """It runs every layer once per piece: past 256 pieces on the default model it is refused."""
    with pytest.raises(attnviz.BadInput, match="max_tokens 256"):
        attnviz.prepare(LONG).check(measure="value-zeroing")
    attnviz.prepare(" ".join(["hello"] * 254)).check(measure="value-zeroing")


ALLOCATION = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes."


def _numpy_exhaustion() -> None:
    np.empty(2**61, dtype=np.uint8)  # numpy's _ArrayMemoryError: no machine has 2 EB


@pytest.mark.slow  # the command line's first run loads the tokenizer
@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (RuntimeError(ALLOCATION), "out of memory"),
        (MemoryError(), "out of memory"),
        (RecursionError("maximum recursion depth exceeded"), "too deeply nested"),
        (None, "out of memory"),  # numpy's own
    ],
    ids=["torch", "MemoryError", "RecursionError", "numpy"],
)
def test_exhaustion_anywhere_is_one_line(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException | None, said: str
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        if raised is None:
            _numpy_exhaustion()
        raise raised  # type: ignore[misc]

    monkeypatch.setattr(attnviz.Analysis, "compare", fail)
    result = CliRunner().invoke(app, ["compare-measures", SHORT, "--query", "Maria"])
    assert result.exit_code == 1
    line = one_error_line(result.stderr)
    assert said in line
    if said == "out of memory":
        assert "--max-tokens" in line and "ATTNVIZ_ATTENTION_MB" in line


@pytest.mark.slow  # torch
def test_a_torch_allocation_failure_in_a_measure_is_an_attnviz_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from attnviz.measures import contributions

    def refuse(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    analysis = attnviz.analyse(SHORT)
    monkeypatch.setattr(contributions, "_norms", refuse)
    with pytest.raises(AttnvizError, match="out of memory: shorten the text") as failed:
        analysis.measure("norm")
    assert not isinstance(failed.value, attnviz.BadInput)  # a failure (exit 1), not bad input
    monkeypatch.setattr(contributions, "_norms", lambda *a, **k: _numpy_exhaustion())
    with pytest.raises(AttnvizError, match="out of memory"):
        analysis.measure("norm")


@pytest.mark.slow  # torch
def test_another_runtime_error_is_not_taken_for_exhaustion(monkeypatch: pytest.MonkeyPatch) -> None:
    from attnviz.measures import contributions

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(contributions, "_norms", broken)
    with pytest.raises(RuntimeError, match="shapes"):
        attnviz.analyse(SHORT).measure("norm")


@pytest.mark.slow  # torch
def test_an_allocation_failure_while_analysing_is_an_attnviz_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ATTNVIZ_ATTENTION_MB raised past the memory there is: the encoder's allocation fails."""
    import attnviz.pipeline

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError(ALLOCATION)

    monkeypatch.setattr(attnviz.pipeline, "compute", fail)
    with pytest.raises(AttnvizError, match="out of memory") as failed:
        attnviz.prepare(SHORT).analyse(cache=False)
    assert "ATTNVIZ_ATTENTION_MB" in str(failed.value)

"""One door to the model: `analyse` reads a model's config.json once (issue 30), with the
attention cache off, on its first run and on a cache hit; an encoder-decoder reads its
generation_config.json once too."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import attnviz
import attnviz.reading
from tests.model.test_encoder_decoder import write_seq2seq

CONFIGS = ("config.json", "generation_config.json")


def _count_config_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every bounded read of a config.json or generation_config.json from now on, by name
    (all of attnviz's JSON goes through `attnviz.reading.read_bounded`)."""
    reads: Counter[str] = Counter()
    original: Callable[..., bytes] = attnviz.reading.read_bounded

    def counting(path: str | os.PathLike[str], *args: object, **kwargs: object) -> bytes:
        if Path(path).name in CONFIGS:
            reads[Path(path).name] += 1
        return original(path, *args, **kwargs)

    monkeypatch.setattr(attnviz.reading, "read_bounded", counting)
    return reads


def _reads_per_run(
    monkeypatch: pytest.MonkeyPatch, run: Callable[[], np.ndarray], runs: int = 1
) -> list[dict[str, int]]:
    """The reads of each of `runs` calls of `run`, and that every call gave the same weights."""
    reads = _count_config_reads(monkeypatch)
    seen, first = [], None
    for _ in range(runs):
        reads.clear()
        weights = run()
        seen.append(dict(reads))
        if first is None:
            first = weights
        np.testing.assert_array_equal(weights, first)
    return seen


def test_the_embedded_encoder_reads_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTNVIZ_MODEL", raising=False)
    seen = _reads_per_run(
        monkeypatch, lambda: attnviz.analyse("The cat sat on the mat.", cache=False).attentions
    )
    assert seen == [{"config.json": 1}]


def test_the_embedded_encoder_reads_config_once_with_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ATTNVIZ_MODEL", raising=False)
    text = "The door reads config.json once, computed and cached."
    seen = _reads_per_run(monkeypatch, lambda: attnviz.analyse(text, cache=True).attentions, 2)
    assert seen == [{"config.json": 1}] * 2  # the first run, then the cache hit


def test_a_decoder_reads_config_once(monkeypatch: pytest.MonkeyPatch, tiny_decoder) -> None:
    folder = tiny_decoder("gpt2")
    seen = _reads_per_run(
        monkeypatch,
        lambda: (
            attnviz.analyse("The cat sat on the mat.", model=str(folder), cache=False).attentions
        ),
    )
    assert seen == [{"config.json": 1}]


def test_a_decoder_reads_config_once_with_the_cache(
    monkeypatch: pytest.MonkeyPatch, tiny_decoder
) -> None:
    folder = tiny_decoder("llama")
    text = "A decoder's door, computed and then cached."
    seen = _reads_per_run(
        monkeypatch,
        lambda: attnviz.analyse(text, model=str(folder), cache=True).attentions,
        2,
    )
    assert seen == [{"config.json": 1}] * 2


@pytest.mark.slow
@pytest.mark.parametrize("cache", [False, True])
def test_an_encoder_decoder_reads_each_config_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: bool
) -> None:
    folder = write_seq2seq(tmp_path / "t5", "t5")
    assert (folder / "generation_config.json").is_file()
    seen = _reads_per_run(
        monkeypatch,
        lambda: (
            attnviz.analyse(
                "The cat sat.", model=str(folder), target="Le chat.", cache=cache
            ).attentions
        ),
        2,
    )
    assert seen == [{"config.json": 1, "generation_config.json": 1}] * 2


@pytest.mark.slow
def test_an_encoder_decoder_without_a_target_reads_each_config_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = write_seq2seq(tmp_path / "bart", "bart")
    reads = _count_config_reads(monkeypatch)
    with pytest.raises(attnviz.BadInput, match="needs a target"):
        attnviz.analyse("The cat sat.", model=str(folder))
    assert dict(reads) == {"config.json": 1, "generation_config.json": 1}

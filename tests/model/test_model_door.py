"""One door to the model: `analyse` reads a model's config.json once (issue 30)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import attnviz
import attnviz.reading
from tests.model.test_encoder_decoder import write_seq2seq


def _count_config_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every bounded read of a file named config.json from now on (all of attnviz's JSON
    goes through `attnviz.reading.read_bounded`)."""
    reads: list[str] = []
    original: Callable[..., bytes] = attnviz.reading.read_bounded

    def counting(path: str | os.PathLike[str], *args: object, **kwargs: object) -> bytes:
        if Path(path).name == "config.json":
            reads.append(str(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(attnviz.reading, "read_bounded", counting)
    return reads


def test_the_embedded_encoder_reads_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTNVIZ_MODEL", raising=False)
    reads = _count_config_reads(monkeypatch)
    attnviz.analyse("The cat sat on the mat.", cache=False)
    assert len(reads) == 1, reads


def test_a_decoder_reads_config_once(monkeypatch: pytest.MonkeyPatch, tiny_decoder) -> None:
    folder = tiny_decoder("gpt2")
    reads = _count_config_reads(monkeypatch)
    attnviz.analyse("The cat sat on the mat.", model=str(folder), cache=False)
    assert len(reads) == 1, reads


@pytest.mark.slow
def test_an_encoder_decoder_reads_config_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = write_seq2seq(tmp_path / "t5", "t5")
    reads = _count_config_reads(monkeypatch)
    attnviz.analyse("The cat sat.", model=str(folder), target="Le chat.", cache=False)
    assert len(reads) == 1, reads

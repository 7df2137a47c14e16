"""Reading safetensors a slice of the file at a time, floats converted as they are read: the
tensors are the library's own, and a bfloat16 checkpoint computes as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.model import weights
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat."


@pytest.mark.parametrize("mapped", [1, 4096, 64 * 2**20])
def test_tensors_read_in_slices_are_the_librarys(
    mapped: int, tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from safetensors.torch import load_file

    folder = tiny_decoder("llama", dtype="bfloat16")
    path = folder / "model.safetensors"
    monkeypatch.setattr(weights, "MAPPED_BYTES", mapped)  # 1: one opening per tensor
    expected = load_file(path)
    read = weights.read_state_dict(folder)
    assert list(read) == list(expected)  # in file order, nothing lost
    for key, tensor in expected.items():
        assert read[key].dtype == torch.bfloat16
        assert torch.equal(read[key], tensor)
    wide = weights.read_state_dict(folder, torch.float32)
    for key, tensor in expected.items():
        assert wide[key].dtype == torch.float32
        assert torch.equal(wide[key], tensor.float())  # bfloat16 -> float32 is exact


def test_a_bfloat16_checkpoint_gives_the_same_attention(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Converted as read, one slice at a time, or all at once as before: the same numbers."""
    folder = str(tiny_decoder("llama", dtype="bfloat16"))
    sliced = attnviz.analyse(TEXT, model=folder, cache=False).attentions
    monkeypatch.setattr(weights, "MAPPED_BYTES", 1)
    one_by_one = attnviz.analyse(TEXT, model=folder, cache=False).attentions
    np.testing.assert_array_equal(sliced, one_by_one)
    original = weights.read_state_dict

    def read_then_convert(folder: Path, dtype: object = None) -> dict:
        return original(folder)  # bfloat16 kept; load_encoder converts afterwards, as it did

    monkeypatch.setattr(weights, "read_state_dict", read_then_convert)
    before = attnviz.analyse(TEXT, model=folder, cache=False).attentions
    np.testing.assert_array_equal(sliced, before)


def test_a_corrupt_file_is_still_one_line(tmp_path: Path, tiny_decoder: TinyFactory) -> None:
    import shutil

    folder = tmp_path / "cut"
    shutil.copytree(tiny_decoder("llama"), folder)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(attnviz.AttnvizError, match="corrupt or incomplete"):
        weights.read_state_dict(folder)

"""A decoder's cache entries from strangers: an entry that cannot be the model's is a miss.

A cache hit brings its own pieces (no tokenizer runs), so the entry's attentions and pieces
are checked against the model before use: no pieces at all, a claim of truncation nobody
asked for, or weight on later tokens (which a decoder never gives) is discarded with a
warning and computed again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.cache import keys, settings
from tests.conftest import TinyFactory

TEXT = "The cat sat. The dog ran."


def _entry(folder: str) -> Path:
    key = keys.cache_key(
        Path(folder), text=TEXT, pair=None, causal=False, dtype="float32", truncate=False, bos=True
    )
    return settings.cache_dir() / f"{key}.npz"


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


@pytest.mark.parametrize("how", ["no pieces", "non-causal", "truncated"])
def test_an_entry_that_cannot_be_the_decoders_is_computed_again(
    tiny_decoder: TinyFactory, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(tiny_decoder("llama"))
    truth = attnviz.analyse(TEXT, model=folder, cache=False).attentions
    attnviz.analyse(TEXT, model=folder)  # writes the entry
    path = _entry(folder)
    assert path.is_file()
    with np.load(path) as data:
        attentions, names = data["attentions"], set(data.files)
    if how == "no pieces":
        empty = {name: np.load(path)[name][:0] for name in names if name not in ("dropped",)}
        empty["attentions"] = attentions[:, :, :0, :0]
        _rewrite(path, **empty)
    elif how == "non-causal":
        uniform = np.full_like(attentions, 1 / attentions.shape[-1])
        _rewrite(path, attentions=uniform)
    else:
        assert "dropped" in names
        _rewrite(path, dropped=np.array(2**31))
    capsys.readouterr()
    again = attnviz.analyse(TEXT, model=folder)
    np.testing.assert_allclose(again.attentions, truth, atol=1e-6)
    assert again.pieces.dropped == 0
    assert "discarded, computing again" in capsys.readouterr().err

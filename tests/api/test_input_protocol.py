"""One input protocol (`check()`, `analyse()`) for a text and for arrays, and one preparation
(`attnviz.prepared.read_input`) that `attnviz.analyse` and the command line share."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz import prepared as prepared_module
from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.prepared import Prepared, read_input

EN = "The protocol test reads this sentence once, then from the cache."
AS_ANALYSE = {  # attnviz.analyse's defaults
    "pair": None,
    "model": None,
    "target": None,
    "generate": None,
    "stack": None,
    "truncate": False,
    "cache": True,
    "max_tokens": None,
    "bos": True,
    "engine": "auto",
    "mask": "none",
    "dtype": "float32",
}


def test_a_text_and_arrays_refuse_a_missing_layer_alike() -> None:
    text = attnviz.prepare(EN)
    whole = text.analyse()
    given = attnviz.from_attentions(whole.attentions, whole.tokens).prepared
    for source in (text, given):
        with pytest.raises(BadInput, match=r"layer 99"):
            source.check(layer=99)
        with pytest.raises(BadInput, match=r"head 99"):
            source.check(head=99)
        source.check(layer=-1, head=0, heads=[0, 1])  # what the model has passes


def test_arrays_refuse_what_needs_a_model_before_drawing() -> None:
    weights = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)
    given = attnviz.from_attentions(weights, ["a", "b", "c", "d"]).prepared
    with pytest.raises(BadInput, match="needs the model"):
        given.check(measure="norm")
    with pytest.raises(BadInput, match="needs the model"):
        given.check(compared=True)
    again = given.analyse()  # the arrays handed over, nothing computed
    assert isinstance(again, attnviz.Analysis)
    assert np.array_equal(again.attentions, weights)


def test_a_text_seen_before_is_prepared_from_the_cache_without_a_tokenizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = attnviz.analyse(EN)

    def no_tokenizer(*_: object, **__: object) -> None:
        raise AssertionError("the tokenizer was loaded for a text the cache holds")

    monkeypatch.setattr("attnviz.text.tokenize.load_tokenizer", no_tokenizer)
    source = read_input(EN, **AS_ANALYSE)  # type: ignore[arg-type]
    assert isinstance(source, Prepared) and source.found is not None
    assert np.array_equal(source.analyse().attentions, whole.attentions)
    one = source.analyse(layers=[1])  # only the layer asked for, from what the cache held
    assert one.layers == (1,) and np.array_equal(one.attentions[0], whole.attentions[1])
    with pytest.raises(BadInput, match="dtype"):
        source.analyse(dtype="float64")


def test_the_api_and_the_command_line_share_one_preparation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def counted(text: str, **options: object) -> object:
        calls.append(text)
        return read_input(text, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(prepared_module, "read_input", counted)
    attnviz.analyse(EN)
    result = CliRunner().invoke(app, ["show", EN, "--layer", "0"])
    assert result.exit_code == 0, result.output
    assert calls == [EN, EN]

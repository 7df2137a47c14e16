"""The attention sink: `exclude="first"` (alias "sink"), find's sink column and note, and
special tokens typed in the text, each checked against the attention array itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from tests.conftest import TinyFactory

TEXT = "Alice gave the book to Bob because she had finished reading it."


@pytest.fixture(scope="module")
def decoder(tiny_decoder: TinyFactory) -> attnviz.Analysis:
    """A Qwen2-style decoder whose tokenizer adds no start token: the first word is position 0."""
    return attnviz.analyse(TEXT, model=str(tiny_decoder("qwen2")))


def _renormalised(matrix: np.ndarray, kept: np.ndarray) -> np.ndarray:
    part = matrix[..., kept[:, None], kept]
    return part / part.sum(axis=-1, keepdims=True)


def test_excluding_the_first_token_drops_position_0_and_renormalises(
    decoder: attnviz.Analysis,
) -> None:
    assert decoder.tokens[0] != "<s>"  # no start token: the sink is the first word's piece
    view = decoder.view(1, 3, units="tokens", exclude="first")
    kept = np.arange(1, len(decoder.tokens))
    expected = _renormalised(decoder.attentions[1, 3], kept)
    assert view.labels == decoder.labels[1:]
    np.testing.assert_allclose(view.matrix, expected, atol=1e-6)
    same = decoder.view(1, 3, units="tokens", exclude="sink")
    np.testing.assert_array_equal(same.matrix, view.matrix)
    assert "without the first token" in view.title


def test_in_words_the_first_word_goes_whole(decoder: attnviz.Analysis) -> None:
    assert len(decoder.words[0].pieces) > 1  # the check means something only for a split word
    view = decoder.view(0, 0, units="words", exclude="first")
    assert view.labels == [w.label for w in decoder.words[1:]]
    whole = decoder.view(0, 0, units="words").matrix
    expected = _renormalised(whole, np.arange(1, len(whole)))
    np.testing.assert_allclose(view.matrix, expected, atol=1e-6)


def test_find_names_the_first_token_and_its_sink_share(decoder: attnviz.Analysis) -> None:
    links = decoder.find("she", "Alice")
    for link in links.links:
        view = decoder.view(link.layer, link.head)  # words
        q, k = view.labels.index("she"), 0
        column = view.matrix[k:, k]  # the queries that can see the first word
        assert link.sink == pytest.approx(float((column > 0.5).mean()))
        assert link.weight == pytest.approx(view.weight(q, k), abs=1e-6)
    assert links.note.startswith("'Alice' is the first token")
    assert "--exclude first" in links.note
    assert links.to_dict()["note"] == links.note
    assert "sink" in links.to_dict()["heads"][0]


def test_find_without_the_first_token_ranks_renormalised_rows(decoder: attnviz.Analysis) -> None:
    links = decoder.find("she", "gave", exclude="first")
    for link in links.links[:5]:
        view = decoder.view(link.layer, link.head, exclude="first")
        q, k = view.labels.index("she"), view.labels.index("gave")
        assert link.weight == pytest.approx(view.weight(q, k), abs=1e-6)
    assert links.note == ""  # "gave" is neither first nor parked on here
    with pytest.raises(attnviz.BadInput, match="'Alice'"):
        decoder.find("she", "Alice", exclude="first")


def test_a_sink_in_most_strong_heads_is_named_even_when_not_first(
    decoder: attnviz.Analysis,
) -> None:
    from attnviz.measures.find import HeadLink, sink_note

    parked = [HeadLink(0, h, 0.9, 1, "Bob", 0.9, 5, sink=0.8) for h in range(3)]
    link = HeadLink(0, 3, 0.1, 2, "Bob", 0.5, 0, sink=0.0)
    assert sink_note("Bob", False, [*parked, link]).startswith(
        "'Bob' is the attention sink of 3 of these 4 heads"
    )
    assert sink_note("Bob", False, [link, link, link, parked[0]]) == ""


def test_typed_special_tokens_count_as_special(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("qwen2"))
    analysis = attnviz.analyse("</s>" + TEXT, model=folder)
    assert analysis.tokens[0] == "</s>"
    view = analysis.view(0, 0, exclude="special")
    assert "</s>" not in view.labels and view.labels[0] == "Alice"
    args = ["find", "</s>" + TEXT, "--model", folder, "--from", "she", "--to", "Alice"]
    code = CliRunner().invoke(app, [*args, "--exclude", "special", "--json"])
    assert code.exit_code == 0, code.stderr
    record = json.loads(code.stdout)
    assert record["excluded"] == ["special"]
    assert "first token" not in record["note"]  # "</s>" is, and it was dropped


def test_the_command_line_takes_sink_and_shows_the_column(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("qwen2"))
    result = CliRunner().invoke(
        app, ["find", TEXT, "--model", folder, "--from", "she", "--to", "Alice"]
    )
    assert result.exit_code == 0, result.stderr
    assert "sink" in result.stdout and "first token" in " ".join(result.stdout.split())
    result = CliRunner().invoke(
        app, ["show", TEXT, "--model", folder, "--exclude", "sink", "--layer", "0"]
    )
    assert result.exit_code == 0, result.stderr
    assert "without the first token" in " ".join(result.stdout.split())


def test_explain_names_a_sink_by_its_small_value(decoder: attnviz.Analysis) -> None:
    import dataclasses

    from rich.console import Console

    x = decoder.explain("she", layer=1, head=2)
    T = len(x.weights)
    seen = np.flatnonzero(~x.hidden)  # the keys up to the query
    weights = np.zeros(T, dtype=np.float32)
    weights[seen] = 0.1 / (len(seen) - 1)
    weights[0] = 0.9  # most of the weight on the first token ...
    norms = np.full(T, 10.0, dtype=np.float32)
    norms[0] = 1.0  # ... whose transformed value is small: a sink
    sunk = dataclasses.replace(x, weights=weights, transformed_norms=norms)
    assert sunk.sink == 0 and sunk.others_median_norm == pytest.approx(10.0)
    assert dataclasses.replace(sunk, transformed_norms=np.full(T, 10.0)).sink is None
    assert dataclasses.replace(sunk, weights=np.full(T, 1 / T)).sink is None

    def text(explanation: object) -> str:
        console = Console(width=100, file=None, record=True, color_system=None)
        with console.capture() as capture:
            console.print(explanation)
        return " ".join(capture.get().split())

    assert "looks like an attention sink" in text(sunk)
    assert "--exclude first" in text(sunk)
    assert "sumidouro de atenção" in text(dataclasses.replace(sunk, lang="pt"))
    assert ("looks like an attention sink" in text(x)) == (x.sink is not None)

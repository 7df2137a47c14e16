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
    """A Qwen2-style decoder whose tokenizer adds no start token, read as typed (`bos=False`):
    the first word is position 0."""
    return attnviz.analyse(TEXT, model=str(tiny_decoder("qwen2")), bos=False)


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
        column = view.matrix[1:, k]  # the queries that can see the first word, but the
        # first itself: a decoder's first query sees nothing else, its weight there is forced
        assert link.sink == pytest.approx(float((column > 0.5).mean()))
        assert link.weight == pytest.approx(view.weight(q, k), abs=1e-6)
    assert links.note.startswith("'Alice' is the first token")
    assert "start token in front" in links.note and "--no-bos" in links.note
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
    analysis = attnviz.analyse("</s>" + TEXT, model=folder, bos=False)
    assert analysis.tokens[0] == "</s>"
    view = analysis.view(0, 0, exclude="special")
    assert "</s>" not in view.labels and view.labels[0] == "Alice"
    args = ["find", "</s>" + TEXT, "--model", folder, "--from", "she", "--to", "Alice"]
    code = CliRunner().invoke(app, [*args, "--exclude", "special", "--json", "--no-bos"])
    assert code.exit_code == 0, code.stderr
    record = json.loads(code.stdout)
    assert record["excluded"] == ["special"]
    assert "first token" not in record["note"]  # "</s>" is, and it was dropped


def test_the_command_line_takes_sink_and_shows_the_column(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("qwen2"))
    result = CliRunner().invoke(
        app, ["find", TEXT, "--model", folder, "--from", "she", "--to", "Alice", "--no-bos"]
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


def test_the_start_token_is_added_where_the_tokenizer_adds_none(
    tiny_decoder: TinyFactory, decoder: attnviz.Analysis
) -> None:
    folder = str(tiny_decoder("qwen2"))
    with_start = attnviz.analyse(TEXT, model=folder)
    assert with_start.tokens == ["<s>", *decoder.tokens]  # exactly one token more, in front
    assert with_start.pieces.ids[1:] == decoder.pieces.ids
    assert with_start.words[0].label == "<s>" and with_start.pieces.sequence_ids[0] is None
    # the start token changes what every later token computes: the arrays differ
    assert not np.allclose(with_start.attentions[:, :, 1:, 1:].sum(-1), 1.0, atol=1e-4)
    # a start token is special: excluding it gives back rows over the text alone
    assert with_start.view(0, 0, exclude="special").labels == decoder.view(0, 0).labels
    links = with_start.find("she", "Alice")
    assert "first token" not in links.note  # Alice is not first any more; <s> is


def test_a_tokenizer_that_adds_its_own_start_token_gets_no_second(
    tiny_decoder: TinyFactory,
) -> None:
    folder = str(tiny_decoder("llama"))  # its tokenizer puts <s> in front itself
    default = attnviz.analyse(TEXT, model=folder)
    typed = attnviz.analyse(TEXT, model=folder, bos=False)  # as typed: its <s> taken off
    assert default.tokens.count("<s>") == 1 and default.tokens[0] == "<s>"
    assert typed.tokens == default.tokens[1:]
    assert typed.pieces.ids == default.pieces.ids[1:]


def test_no_bos_on_the_command_line_and_the_cache_keep_the_two_apart(
    tiny_decoder: TinyFactory, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path))
    folder = str(tiny_decoder("qwen2"))
    runs: dict[tuple[str, ...], list[dict]] = {}
    for flags in ([], ["--no-bos"], [], ["--no-bos"]):  # the second pair from the cache
        args = ["show", TEXT, "--model", folder, "--json", "--layer", "0", "--units", "tokens"]
        result = CliRunner().invoke(app, [*args, *flags])
        assert result.exit_code == 0, result.stderr
        runs.setdefault(tuple(flags), []).append(json.loads(result.stdout))
    with_start, typed = runs[()], runs[("--no-bos",)]
    assert with_start[0] == with_start[1] and typed[0] == typed[1]
    assert with_start[0]["tokens"] == ["<s>", *typed[0]["tokens"]]
    assert len(with_start[0]["weights"]) == len(typed[0]["weights"]) + 1


def test_bos_is_checked_and_named_in_the_callers_words(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("qwen2"))
    with pytest.raises(attnviz.BadInput, match="bos"):
        attnviz.analyse(TEXT, model=folder, bos="no")  # type: ignore[arg-type]
    with pytest.raises(attnviz.BadInput, match=r"raise max_tokens \(bos=False reads"):
        attnviz.prepare(TEXT, model=folder, max_tokens=1)
    result = CliRunner().invoke(app, ["show", TEXT, "--model", folder, "--max-tokens", "1"])
    assert result.exit_code == 2 and "--no-bos" in result.stderr


@pytest.mark.parametrize(("family", "by"), [("qwen2", "attnviz"), ("llama", "tokenizer")])
def test_info_says_who_puts_the_start_token_in_front(
    tiny_decoder: TinyFactory, family: str, by: str
) -> None:
    folder = str(tiny_decoder(family))
    details = attnviz.model_info(folder)
    assert (details.start_token, details.start_by) == ("<s>", by)
    result = CliRunner().invoke(app, ["info", "--model", folder], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("start token"))
    assert "--no-bos" in line and ("puts it in front" in line)

"""`find`, `show --query` and `--exclude`: checked against the attention array itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.text.match import find_label, match_key
from attnviz.text.pieces import token_kinds
from tests.conftest import PT_SENTENCE, TinyFactory

EN = "John thought: the train was full, but he found a free seat."


@pytest.fixture(scope="module")
def en() -> attnviz.Analysis:
    return attnviz.analyse(EN)


@pytest.fixture(scope="module")
def pt() -> attnviz.Analysis:
    return attnviz.analyse(PT_SENTENCE)


def word_weights(a: attnviz.Analysis, source: int, target: int) -> np.ndarray:
    """(L, H): mean over the source word's pieces of the sum over the target word's pieces."""
    words = a.words
    rows = a.attentions[:, :, words[source].pieces, :]  # (L, H, s, T)
    return rows[..., words[target].pieces].sum(axis=-1).mean(axis=-1)


def cli(*args: str, columns: int = 100) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    return result.exit_code, result.stdout, result.stderr


# ---------------------------------------------------------------- matching words


def test_words_match_ignoring_case_and_accents() -> None:
    labels = ["[CLS]", "João", "pensou", "ele", "Ele", "[SEP]"]
    assert match_key("JOÃO") == match_key("joao") == "joao"
    assert find_label(labels, "joao") == 1
    assert find_label(labels, "JOAO") == 1
    assert find_label(labels, "ele#2") == 4
    with pytest.raises(BadInput, match=r"'pensou' once; use token pensou \(or pensou#1\)"):
        find_label(labels, "pensou#2")
    with pytest.raises(BadInput, match=r"2 times; use ele#1\.\.ele#2"):
        find_label(labels, "ele#3")


# ---------------------------------------------------------------- find


@pytest.mark.parametrize(("text", "source", "target"), [(EN, "he", "john"), (None, "ele", "joao")])
def test_find_ranks_every_head_by_the_weight_in_the_array(
    en: attnviz.Analysis, pt: attnviz.Analysis, text: str | None, source: str, target: str
) -> None:
    a = en if text == EN else pt
    links = a.find(source, target)
    labels = [w.label for w in a.words]
    q, k = links.source_index, links.target_index
    assert match_key(labels[q]) == match_key(source) and match_key(labels[k]) == match_key(target)
    expected = word_weights(a, q, k)  # (L, H)
    np.testing.assert_allclose(links.weights, expected, atol=1e-6)
    L, H = expected.shape
    assert len(links.links) == L * H
    got = [link.weight for link in links.links]
    assert got == sorted(got, reverse=True)
    best = links.links[0]
    assert expected[best.layer, best.head] == pytest.approx(expected.max(), abs=1e-6)
    view = a.view(best.layer, best.head)
    row = view.matrix[q]
    assert best.rank == 1 + int((row > row[k] + 1e-9).sum())
    assert best.top_key == labels[int(row.argmax())]
    others = [i for i in range(len(labels)) if i not in (q, k)]
    assert best.others_above == int((view.matrix[others, k] > row[k] + 1e-9).sum())
    for link in links.links:
        if link.rank > 1:
            assert link.top_key != labels[k] and link.top_weight > link.weight


def test_find_json_and_table(en: attnviz.Analysis) -> None:
    code, out, err = cli("find", EN, "--from", "HE", "--to", "john", "--top", "3", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert (record["source"], record["target"], record["excluded"]) == ("he", "John", [])
    expected = en.find("he", "John").best(3)
    assert [(h["layer"], h["head"]) for h in record["heads"]] == [
        (link.layer, link.head) for link in expected
    ]
    code, out, _ = cli("find", EN, "--from", "he", "--to", "John", "--top", "2")
    assert code == 0
    first = expected[0]
    assert f"{first.weight:.2f}" in out and "he → John" in out


def test_find_refuses_a_word_the_text_lacks() -> None:
    code, out, err = cli("find", EN, "--from", "she", "--to", "John")
    assert code == 2 and out == ""
    assert err.startswith("Error: --from 'she' is not a word of the text")
    assert err.count("\n") == 1


@pytest.mark.slow  # writes an image
def test_find_writes_a_layers_by_heads_heatmap(tmp_path: Path) -> None:
    out = tmp_path / "links.png"
    code, _, err = cli("find", EN, "--from", "he", "--to", "John", "--out", str(out))
    assert code == 0, err
    assert out.stat().st_size > 0


# ---------------------------------------------------------------- show --query


def test_row_is_the_views_row_sorted(en: attnviz.Analysis) -> None:
    view = en.view(3, 7)
    row = en.row("HE", 3, 7)
    i = view.labels.index("he")
    assert row.index == i and row.query == "he"
    np.testing.assert_allclose(row.weights, np.sort(view.matrix[i])[::-1])
    assert [view.labels[j] for j in row.indices] == row.keys
    assert row.weights.sum() == pytest.approx(1.0, abs=1e-5)
    assert row.weight("john") == pytest.approx(view.weight(i, view.labels.index("John")))


def test_show_query_prints_the_sorted_row(en: attnviz.Analysis) -> None:
    row = en.row("he", 3, 7)
    code, out, err = cli("show", EN, "--layer", "3", "--head", "7", "--query", "he")
    assert code == 0, err
    lines = out.splitlines()
    first = next(line for line in lines if row.keys[0] in line and "█" in line)
    assert f"{row.weights[0]:.2f}" in first
    code, out, _ = cli("show", EN, "--layer", "3", "--head", "7", "--query", "he", "--json")
    record = json.loads(out)
    assert record["query"] == "he"
    assert [k["token"] for k in record["keys"]] == row.keys
    assert [k["weight"] for k in record["keys"]] == pytest.approx(list(row.weights))


def test_show_query_refuses_an_unknown_word_before_computing() -> None:
    code, _, err = cli("show", EN, "--query", "she")
    assert code == 2 and "--query 'she' is not a word of the text" in err


@pytest.mark.slow  # writes an image
def test_show_query_out_writes_a_bar_chart(tmp_path: Path) -> None:
    out = tmp_path / "row.png"
    code, _, err = cli("show", EN, "--query", "he", "--out", str(out), "--annotate")
    assert code == 0, err
    assert out.stat().st_size > 0


# ---------------------------------------------------------------- --exclude


def test_exclude_drops_tokens_and_renormalises_rows(pt: attnviz.Analysis) -> None:
    full = pt.view(5, 5, units="tokens")
    kinds = token_kinds(pt.pieces)
    keep = ~(kinds.cls | kinds.sep | kinds.punct)
    view = pt.view(5, 5, units="tokens", exclude=["special", "punct"])
    expected = full.matrix[np.ix_(keep, keep)]
    expected = expected / expected.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(view.matrix, expected, atol=1e-6)
    assert view.tokens == [t for t, k in zip(full.tokens, keep, strict=True) if k]
    assert "without special tokens and punctuation" in view.title
    assert view.to_dict()["excluded"] == ["special", "punct"]
    words = pt.view(5, 5, exclude="special")
    assert "[CLS]" not in words.labels and "," in words.labels
    np.testing.assert_allclose(words.matrix.sum(axis=-1), 1.0, atol=1e-5)


def test_find_with_exclude_uses_renormalised_rows(pt: attnviz.Analysis) -> None:
    links = pt.find("ele", "João", exclude="special")
    for link in links.links[:5]:
        view = pt.view(link.layer, link.head, exclude="special")
        q, k = view.labels.index("ele"), view.labels.index("João")
        assert link.weight == pytest.approx(view.weight(q, k), abs=1e-6)


def test_rollout_sources_ignore_excluded_tokens(pt: attnviz.Analysis) -> None:
    rollout = pt.rollout(exclude="special")
    sources = rollout.sources(top=2)
    assert all(rollout.labels[j] not in ("[CLS]", "[SEP]") for row in sources for j, _ in row)
    code, out, err = cli("rollout", PT_SENTENCE, "--exclude", "special", "--json")
    assert code == 0, err
    assert json.loads(out)["excluded"] == ["special"]


def test_exclude_refuses_an_unknown_kind() -> None:
    code, _, err = cli("heads", EN, "--exclude", "stopwords")
    assert code == 2
    assert "cannot exclude 'stopwords': use 'special', 'punct' or 'first' (alias 'sink')" in err


def test_a_causal_model_refuses_a_link_to_a_later_word_both_ways_of_asking(
    tiny_decoder: TinyFactory,
) -> None:
    text = "The cat sat. The dog ran."
    folder = str(tiny_decoder("llama"))
    args = ["find", text, "--model", folder, "--from", "cat", "--to", "dog"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.stderr.startswith("Error: 'dog' comes after 'cat'")
    assert "--from dog --to cat" in result.stderr
    analysis = attnviz.analyse(text, model=folder)
    with pytest.raises(BadInput, match="comes after"):
        analysis.find("cat", "dog")
    back = analysis.find("dog", "cat")
    assert back.links[0].weight > 0

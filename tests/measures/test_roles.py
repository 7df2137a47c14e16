"""A head's role over labelled examples (`attnviz.head_roles`): the scores recomputed from the
analysed arrays, the baselines, the held-out halves, the Wilson interval and bad examples."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.measures.roles import Example, HeadRoles, held_out, wilson
from attnviz.roles import BadExamples
from attnviz.text.match import match_key

SETS = Path(__file__).resolve().parents[2] / "sample_sentences"


def shipped(name: str, n: int) -> list[dict]:
    lines = (SETS / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:n]]


def word_at(labels: list[str], word: str) -> int:
    """Independent of attnviz's matcher: the n-th label equal to `word` (case, accents off)."""
    bare, _, n = word.rpartition("#") if "#" in word else (word, "", "1")
    found = [i for i, label in enumerate(labels) if match_key(label) == match_key(bare)]
    return found[int(n) - 1]


def recompute(records: list[dict], model: str | None, causal: bool) -> tuple:
    """Hits (E, L, H), weights (E, L, H) and the baselines from each example analysed on its
    own: weight to a word the sum over its pieces, from a word the mean over its pieces."""
    hits, weights, nearest, first, chance = [], [], [], [], []
    for record in records:
        analysis = attnviz.analyse(record["text"], model=model, cache=False)
        A = analysis.attentions  # (L, H, T, T)
        words = analysis.pieces.words()
        labels = [w.label for w in words]
        special = [analysis.pieces.sequence_ids[w.pieces[0]] is None for w in words]
        q, k = word_at(labels, record["from"]), word_at(labels, record["to"])
        if "candidates" in record:
            cands = sorted(word_at(labels, c) for c in record["candidates"])
        else:
            cands = [
                i for i, w in enumerate(words)
                if not special[i] and i != q and any(ch.isalnum() for ch in w.label)
                and (i < q or not causal)
            ]  # fmt: skip
        row = A[:, :, words[q].pieces, :].mean(axis=2)  # (L, H, T): from the query word
        per_word = np.stack([row[:, :, words[c].pieces].sum(axis=-1) for c in cands], -1)
        at = cands.index(k)
        rival = np.delete(per_word, at, axis=-1).max(axis=-1)
        hits.append(per_word[..., at] > rival)
        weights.append(per_word[..., at])
        before = [c for c in cands if c < q]
        near = max(before) if before else min(c for c in cands if c > q)
        nearest.append(near == k)
        first.append(cands[0] == k)
        chance.append(1 / len(cands))
    baselines = {"nearest": np.mean(nearest), "first": np.mean(first), "random": np.mean(chance)}
    return np.stack(hits), np.stack(weights), baselines


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pronouns-en.jsonl", "objects-en.jsonl"])
def test_scores_equal_a_recomputation_from_the_analysed_arrays(name: str) -> None:
    records = shipped(name, 12)
    roles = attnviz.head_roles(records)
    hits, weights, baselines = recompute(records, None, causal=False)
    np.testing.assert_array_equal(roles.hits, hits)
    np.testing.assert_allclose(roles.weights, weights, atol=1e-5)
    record = roles.to_dict()
    for head in record["heads"]:
        assert head["correct"] == hits[:, head["layer"], head["head"]].sum()
        assert head["accuracy"] == pytest.approx(hits[:, head["layer"], head["head"]].mean())
        assert head["mean_weight"] == pytest.approx(
            weights[:, head["layer"], head["head"]].mean(), abs=1e-6
        )
    accuracies = [h["accuracy"] for h in record["heads"]]
    assert accuracies == sorted(accuracies, reverse=True)
    assert record["baselines"] == pytest.approx(baselines)
    # the head picked first, scored on held-out halves: even and odd examples
    even, odd = hits[0::2], hits[1::2]
    right = 0
    for pick, score in ((even, odd), (odd, even)):
        layer, head = np.unravel_index(np.argmax(pick.sum(axis=0)), pick.shape[1:])
        right += score[:, layer, head].sum()
    assert record["held_out"]["accuracy"] == pytest.approx(right / len(records))
    top = record["heads"][0]
    assert (record["held_out"]["layer"], record["held_out"]["head"]) == (top["layer"], top["head"])
    assert set(record) >= {"model", "examples", "units", "excluded", "heads", "baselines",
                           "held_out", "note"}  # fmt: skip


@pytest.mark.slow
def test_a_decoder_scores_only_earlier_words(tiny_decoder) -> None:
    folder = str(tiny_decoder("gpt2"))
    records = [
        {"text": "the cat saw the dog and it ran", "from": "it", "to": "cat"},
        {"text": "a bird ate seeds and then flew off", "from": "flew", "to": "ate"},
    ]
    roles = attnviz.head_roles(records, model=folder)
    hits, _weights, baselines = recompute(records, folder, causal=True)
    np.testing.assert_array_equal(roles.hits, hits)
    assert roles.baselines == pytest.approx(baselines)
    assert all(c < e.source for e in roles.examples for c in e.candidates)
    with pytest.raises(BadExamples, match="line 1: 'to' 'ran' comes after 'from' 'dog'"):
        attnviz.head_roles([{**records[0], "to": "ran", "from": "dog"}], model=folder)


def test_wilson_interval_matches_the_formula() -> None:
    low, high = wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert wilson(0, 20)[0] == 0 and wilson(20, 20)[1] == 1
    low, high = wilson(65, 100)
    assert low < 0.65 < high and high - low < 0.2


def test_held_out_picks_on_one_half_and_scores_on_the_other() -> None:
    hits = np.zeros((4, 1, 2), dtype=bool)  # examples 0, 2 (even) like head 0; 1, 3 head 1
    hits[0::2, 0, 0] = True
    hits[1::2, 0, 1] = True
    accuracy, picks = held_out(hits)
    assert accuracy == 0.0  # each half's pick fails on the other half
    assert [(p["picked_on"], p["head"]) for p in picks] == [("even", 0), ("odd", 1)]


def test_baselines_and_note_come_from_the_same_examples() -> None:
    examples = [
        Example(1, "Ann met Bob and he left", source=4, target=2, candidates=(1, 2)),
        Example(2, "Bob met Ann and she left", source=4, target=2, candidates=(1, 2)),
        Example(3, "Bob met Ann and he left", source=4, target=1, candidates=(1, 2)),
    ]
    hits = np.ones((3, 2, 2), dtype=bool)
    roles = HeadRoles(hits=hits, weights=np.full((3, 2, 2), 0.5), examples=examples, model="m")
    assert roles.baselines == pytest.approx({"nearest": 2 / 3, "first": 1 / 3, "random": 0.5})
    assert "No head beats the best baseline (nearest, 0.67)" in roles.note  # 3/3 low is 0.44
    assert "picked as the best on these same examples" in roles.note
    assert not math.isnan(roles.held_out["accuracy"])


BAD = [
    ("not json", "line 1: not JSON"),
    ('{"text": "Ann met Bob and he left", "from": "he"}', "line 1: 'to' must be a non-empty"),
    (
        '{"text": "Ann met Bob and he left", "from": "he", "to": "Tom"}',
        "line 1: to 'Tom' is not a word of the text",
    ),
    (
        '{"text": "he met Bob and he left", "from": "he", "to": "Bob"}',
        "line 1: from 'he' is ambiguous: the text has it 2 times; write he#1..he#2",
    ),
    (
        '{"text": "Ann met Bob and he left", "from": "he", "to": "Bob", "candidates": ["Ann", '
        '"left"]}',
        "line 1: 'to' 'Bob' is not among the candidates",
    ),
    (
        '{"text": "Ann met Bob", "from": "Bob", "to": "Ann", "candidates": "Ann"}',
        "line 1: 'candidates' must be a list of words",
    ),
]


@pytest.mark.parametrize(("line", "problem"), BAD)
def test_each_bad_example_is_one_line_naming_its_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(BadExamples) as caught:
        attnviz.head_roles(path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("set.jsonl: " + problem)


def test_every_problem_of_a_file_is_listed_before_the_model_runs(tmp_path: Path) -> None:
    good = '{"text": "Ann met Bob and he left", "from": "he", "to": "Bob"}'
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join([good, "{", good, '{"text": "x y", "from": "x", "to": "z"}']))
    with pytest.raises(BadExamples) as caught:
        attnviz.head_roles(path, progress=lambda n: pytest.fail("the model ran"))
    assert [p.split(":")[1].strip() for p in caught.value.problems] == ["line 2", "line 4"]


def test_a_tsv_file_reads_as_json_lines_do(tmp_path: Path) -> None:
    from attnviz.roles import read_examples

    path = tmp_path / "set.tsv"
    path.write_text("text\tfrom\tto\tcandidates\nAnn met Bob and he left\the\tBob\tAnn,Bob\n"
                    "The cat ate fish\tfish\tate\t\n", encoding="utf-8")  # fmt: skip
    examples, problems, name = read_examples(path)
    assert problems == [] and name == "set.tsv"
    assert [(e.line, e.source, e.target, e.candidates) for e in examples] == [
        (2, "he", "Bob", ("Ann", "Bob")), (3, "fish", "ate", None)]  # fmt: skip


@pytest.mark.parametrize("name", sorted(p.name for p in SETS.glob("*.jsonl")))
def test_shipped_sets_are_well_formed(name: str) -> None:
    from attnviz.roles import read_examples

    examples, problems, _ = read_examples(SETS / name)
    assert problems == []
    assert len(examples) >= (150 if name.startswith("pronouns") else 100)
    if name.startswith("pronouns"):  # the antecedent first in about half of them
        firsts = sum(e.candidates is not None and e.candidates[0] == e.target for e in examples)
        assert 0.35 <= firsts / len(examples) <= 0.65


def test_a_shipped_set_is_found_by_its_name_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnviz.roles import read_examples

    monkeypatch.chdir(tmp_path)
    for name in ("pronouns-pt.jsonl", "sample_sentences/pronouns-pt.jsonl"):
        examples, problems, _ = read_examples(name)
        assert problems == [] and len(examples) >= 150

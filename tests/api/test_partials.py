"""Corpus work in slices: partial_head_stats / partial_head_roles, their files and merge_partials.

The merge of every slice must equal one run over the whole input exactly (the JSON a user
reads, bit for bit), in whatever order the slices come; partials that do not belong together
are refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.partials import read
from attnviz.sharding import ExactSums, check_shard, exact, rounded, shard_blocks

# Sentences of many lengths, so that batches are padded and a block's order matters.
SENTENCES = [
    f"Sentence {n}: the cat sat on the mat" + ", and then it ran away quickly" * (n % 4) + "."
    for n in range(21)
]
EXAMPLES = Path(__file__).parents[2] / "sample_sentences" / "pronouns-en.jsonl"


def _json(result: object) -> str:
    records = result.records if isinstance(result, attnviz.HeadStats) else result.to_dict()
    return json.dumps(records)


@pytest.mark.slow
def test_three_slices_merged_in_any_order_equal_one_run_exactly(tmp_path: Path) -> None:
    whole = attnviz.head_stats(SENTENCES, batch_size=1, exclude="punct")
    parts = [
        attnviz.partial_head_stats(SENTENCES, shard=(i, 3), batch_size=1, exclude="punct")
        for i in (1, 2, 3)
    ]
    # Blocks of 8 sentences, block k in slice k mod 3 + 1: 8, 8 and the last 5.
    assert [p.sentences for p in parts] == [8, 8, 5]
    for i, part in enumerate(parts):
        part.to_file(tmp_path / f"part-{i}.json")
    files = [tmp_path / f"part-{i}.json" for i in (2, 0, 1)]
    merged = attnviz.merge_partials(files)
    assert _json(merged) == _json(whole)
    assert (merged.sentences, merged.queries, merged.title) == (
        whole.sentences,
        whole.queries,
        whole.title,
    )
    # The statistics are still the means Clark et al. define, whichever way they were summed.
    alone = attnviz.head_stats(SENTENCES, batch_size=21, exclude="punct")
    for a, b in zip(whole.records, alone.records, strict=True):
        assert a["entropy"] == pytest.approx(b["entropy"], abs=1e-6)


@pytest.mark.slow
def test_a_decoder_s_slices_merge_to_its_one_run(tiny_decoder) -> None:
    folder = str(tiny_decoder("llama"))
    texts = [f"a b c {'d ' * (n % 5)}e" for n in range(11)]
    whole = attnviz.head_stats(texts, model=folder, batch_size=1)
    parts = [attnviz.partial_head_stats(texts, model=folder, shard=(i, 2), batch_size=1)
             for i in (2, 1)]  # fmt: skip
    merged = attnviz.merge_partials(parts)
    assert merged.decoder and _json(merged) == _json(whole)
    assert merged.first_token == whole.first_token


@pytest.mark.slow
def test_roles_slices_merge_to_one_run_held_out_and_baselines_included(tmp_path: Path) -> None:
    examples = tmp_path / "pronouns.jsonl"  # 13 of the shipped examples: blocks of 8 and 5
    examples.write_text("".join(EXAMPLES.read_text().splitlines(keepends=True)[:13]))
    whole = attnviz.head_roles(examples, batch_size=1)
    parts = [attnviz.partial_head_roles(examples, shard=(i, 2), batch_size=1) for i in (1, 2)]
    for i, part in enumerate(parts):
        part.to_file(tmp_path / f"roles-{i}.json")
    merged = attnviz.merge_partials([tmp_path / "roles-1.json", tmp_path / "roles-0.json"])
    assert _json(merged) == _json(whole)
    assert merged.held_out == whole.held_out
    assert np.array_equal(merged.weights, whole.weights)
    assert [e.line for e in merged.examples] == [e.line for e in whole.examples]


@pytest.fixture(scope="module")
def halves(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("halves")
    paths = []
    for i in (1, 2):
        part = attnviz.partial_head_stats(SENTENCES[:20], shard=(i, 2), batch_size=1)
        part.to_file(folder / f"half-{i}.json")
        paths.append(folder / f"half-{i}.json")
    return paths


def _refusal(given: list) -> str:
    with pytest.raises(attnviz.BadInput) as raised:
        attnviz.merge_partials(given)
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.slow
def test_a_slice_missing_or_given_twice_is_refused(halves: list[Path]) -> None:
    assert "slice 2/2 missing" in _refusal(halves[:1])
    assert "slice 1/2 is given twice" in _refusal([halves[0], halves[1], halves[0]])


@pytest.mark.slow
def test_partials_of_other_options_or_inputs_do_not_belong_together(halves: list[Path]) -> None:
    other = attnviz.partial_head_stats(SENTENCES[:20], shard=(2, 2), batch_size=1, exclude="punct")
    assert 'run with exclude [] and with ["punct"]' in _refusal([halves[0], other])
    changed = attnviz.partial_head_stats(SENTENCES[1:21], shard=(2, 2), batch_size=1)
    assert "different inputs" in _refusal([halves[0], changed])
    thirds = attnviz.partial_head_stats(SENTENCES[:20], shard=(2, 3), batch_size=1)
    assert "3 slices" in _refusal([halves[0], thirds])


@pytest.mark.slow
def test_a_stranger_s_partial_file_is_refused_in_one_line(
    halves: list[Path], tmp_path: Path
) -> None:
    record = json.loads(halves[1].read_text())
    cases = {
        "not JSON": "{",
        "written by attnviz 0.0.1": json.dumps({**record, "attnviz": "0.0.1"}),
        "'sums'": json.dumps({**record, "sums": record["sums"][:-1]}),
        "hexadecimal": json.dumps({**record, "sums": ["zz", *record["sums"][1:]]}),
        "'shards'": json.dumps({**record, "shards": [3]}),
        "'queries'": json.dumps({**record, "queries": -1}),
        "not a partial file": json.dumps([1, 2]),
    }
    for expected, text in cases.items():
        path = tmp_path / "bad.json"
        path.write_text(text)
        message = _refusal([halves[0], path])
        assert expected in message and "bad.json" in message, (expected, message)


@pytest.mark.slow
def test_a_partial_round_trips_through_its_file(halves: list[Path]) -> None:
    part = read(halves[0])
    again = read(halves[0])
    assert part == again and part.shards == (1,) and part.of == 2
    assert part.sentences == 12  # blocks of 8 sentences: slice 1 of 2 holds 1-8 and 17-20


def test_shards_are_checked_and_blocks_are_dealt_round_robin() -> None:
    assert check_shard("2/4") == (2, 4) and check_shard((1, 1)) == (1, 1)
    for bad in ("0/4", "5/4", "2-4", (1, 0)):
        with pytest.raises(attnviz.BadInput):
            check_shard(bad)
    assert shard_blocks(21, 4, (2, 3)) == [range(4, 8), range(16, 20)]
    assert [i for r in shard_blocks(21, 4, (3, 3)) for i in r] == [8, 9, 10, 11, 20]


def test_exact_sums_do_not_depend_on_the_order_they_are_added_in() -> None:
    values = [1e16, 1.0, -1e16, 0.1, 1e-300, 3.0]
    forward, backward = ExactSums(1), ExactSums(1)
    for v in values:
        forward.add([v])
    for v in reversed(values):
        backward.add([v])
    assert forward.values == backward.values
    assert forward.floats() == [4.1]  # float addition left to right gives 3.1
    assert rounded(exact([0.1, -2.5e-310])) == [0.1, -2.5e-310]

"""The explorer's moves between heads, layers, queries and measures, without a terminal."""

from __future__ import annotations

from attnviz.explore.place import Place, move_head, move_layer, move_query, next_measure
from attnviz.explore.source import word_name


def test_heads_go_round_the_layer_and_leave_the_mean_at_either_end() -> None:
    assert move_head(Place(head=0), 1, 12).head == 1
    assert move_head(Place(head=11), 1, 12).head == 0
    assert move_head(Place(head=0), -1, 12).head == 11
    assert move_head(Place(head=None), 1, 12).head == 0
    assert move_head(Place(head=None), -1, 12).head == 11


def test_layers_stop_at_the_ends_and_queries_go_round() -> None:
    assert move_layer(Place(layer=0), -1, 6).layer == 0
    assert move_layer(Place(layer=5), 1, 6).layer == 5
    assert move_layer(Place(layer=2), 1, 6).layer == 3
    assert move_query(Place(query=16), 1, 17).query == 0
    assert move_query(Place(query=0), -1, 17).query == 16


def test_measures_cycle_back_to_the_weight_and_per_layer_ones_have_no_heads() -> None:
    seen = ["weight"]
    while len(seen) < 6:
        seen.append(next_measure(seen[-1]))
    assert seen == ["weight", "norm", "norm-res-ln", "alti", "value-zeroing", "weight"]
    assert next_measure("norm", per_layer=False) == "weight"
    assert not Place(measure="alti").has_heads
    assert not Place(rollout=True).has_heads
    assert Place(measure="norm").has_heads


def test_a_repeated_word_is_named_by_its_occurrence_as_find_and_explain_read_it() -> None:
    labels = ["[CLS]", "The", "cat", "saw", "the", "dog", "[SEP]"]
    assert word_name(labels, 1) == "The"
    assert word_name(labels, 4) == "the#2"  # case-folded, as the words match
    assert word_name(labels, 2) == "cat"

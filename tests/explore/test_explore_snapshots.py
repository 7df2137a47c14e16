"""The explorer's main screen at 80 × 24, as SVG snapshots (pytest-textual-snapshot):
in English with colour, in Portuguese, and without colour (NO_COLOR: the shades of `show`).
`pytest --snapshot-update` rewrites them after a change meant to be seen."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import attnviz
from attnviz.analysis import Analysis
from attnviz.explore.app import ExploreApp, PortugueseApp

pytestmark = pytest.mark.slow  # each starts a Textual app

TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
Compare = Callable[..., bool]


def toy() -> Analysis:
    """3 layers × 4 heads of seeded weights over TOKENS; no model behind them."""
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(3, 4, len(TOKENS), len(TOKENS))) * 2
    weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)  # rows sum to 1
    return attnviz.from_attentions(weights.astype(np.float32), TOKENS, model="toy")


def test_the_main_screen(snap_compare: Compare) -> None:
    assert snap_compare(ExploreApp(toy()), terminal_size=(80, 24), press=["right", "tab", "tab"])


def test_the_main_screen_in_portuguese(snap_compare: Compare) -> None:
    app = PortugueseApp(toy(), lang="pt")
    assert snap_compare(app, terminal_size=(80, 24), press=["a", "down"])


def test_the_main_screen_without_colour(
    snap_compare: Compare, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(ExploreApp(toy()), terminal_size=(80, 24), press=["tab"])

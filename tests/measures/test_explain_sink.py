"""`explain` on an attention sink says what its numbers show, and never contradicts itself."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

import attnviz


def printed(explanation: attnviz.Explanation) -> str:
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(explanation)
    return " ".join(console.file.getvalue().split())  # type: ignore[attr-defined]


def test_what_the_head_writes_is_measured_for_every_query() -> None:
    explanation = attnviz.analyse("The cat sat on the mat.").explain("cat", layer=2, head=3)
    assert explanation.share_norms is not None and explanation.head_share_norms is not None
    norm = np.linalg.norm(explanation.head_share)
    assert explanation.share_norms[explanation.query] == pytest.approx(norm, rel=1e-4)
    assert explanation.head_share_norms[explanation.head] == pytest.approx(norm, rel=1e-4)
    assert explanation.top_column is not None
    top = explanation.top_weight
    assert explanation.top_column[explanation.query] == pytest.approx(
        explanation.weights[top], abs=1e-5
    )


@pytest.mark.slow
def test_a_sink_is_not_called_both_the_agreed_top_and_a_key_that_adds_little() -> None:
    analysis = attnviz.analyse(
        "Pedro chegou atrasado porque ele perdeu o ônibus.", model="gemma-3-270m"
    )
    explanation = analysis.explain("ele")  # the last layer, head 0: it parks on <bos>
    assert explanation.sink == 0
    text = printed(explanation)
    assert "agree on the top key" not in text
    assert "adds little: read the contributions, not the weight" not in text
    assert "'<bos>' (0) looks like an attention sink: this head parks the query there" in text
    assert "The contributions say what the weight says" in text
    assert "of the queries that see '<bos>' (0) put over half their weight on it" in text
    assert "the head is parked there" in text

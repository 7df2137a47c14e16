"""A pooled view names what it draws: blocks of queries and of keys on its axes, and the
share of the queries' attention (or the largest weight) on its colour bar, in both languages,
in figures (SVG) and in the PNGs drawn straight to pixels."""

from __future__ import annotations

from pathlib import Path

import attnviz

TEXT = "John thought: the train was full, but he found a free seat. The cat sat on the mat."


def test_pooled_figures_name_blocks_and_the_share() -> None:
    long = attnviz.analyse_long(TEXT, pool=4)
    fig = long.view(2, lang="en").figure()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "blocks of queries" and ax.get_xlabel() == "blocks of keys"
    assert fig.axes[1].get_ylabel() == "share of the queries' attention (square-root scale)"
    grid = long.heads_view(2, lang="pt").figure()
    texts = {t.get_text() for t in grid.texts}
    assert "blocos de consultas" in texts and "blocos de chaves" in texts
    assert grid.axes[-1].get_ylabel().startswith("parcela da atenção das consultas")
    top = attnviz.analyse_long(TEXT, pool=4, pool_by="max").view(2).figure()
    assert top.axes[1].get_ylabel() == "largest weight in the block"
    whole = attnviz.analyse(TEXT).view(2).figure()
    assert whole.axes[0].get_ylabel() == "query"  # the whole view keeps its words


def test_pooled_svg_and_png_say_the_same(tmp_path: Path) -> None:
    view = attnviz.analyse_long(TEXT, pool=4).heads_view(1)
    view.save(tmp_path / "x.svg")
    svg = (tmp_path / "x.svg").read_text(encoding="utf-8")
    assert "blocks of queries" in svg and "share of the queries" in svg
    view.save(tmp_path / "x.png")  # drawn straight to pixels: it must not fail on the names
    assert (tmp_path / "x.png").stat().st_size > 1000

"""The explorer driven by Textual's pilot: keys pressed, then the title, the query's panel,
the status line and the files it wrote read back."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np
import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from typer.testing import CliRunner

import attnviz
from attnviz.analysis import Analysis
from attnviz.cli.app import app as cli
from attnviz.explore import terminal
from attnviz.explore.app import ExploreApp, PortugueseApp
from attnviz.explore.widgets import HeatmapPane, HelpScreen, PanelScreen, RowPane
from attnviz.measures.find import HeadLinks

TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"]
pytestmark = pytest.mark.slow  # each starts a Textual app: a second or two

SENTENCE = "John thought: the train was full, but he found a free seat."


def toy() -> Analysis:
    """3 layers × 4 heads of seeded weights over TOKENS; no model behind them."""
    rng = np.random.default_rng(7)
    scores = rng.normal(size=(3, 4, len(TOKENS), len(TOKENS))) * 2
    weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)  # rows sum to 1
    return attnviz.from_attentions(weights.astype(np.float32), TOKENS, model="toy")


def drive(app: ExploreApp, steps: Callable[[ExploreApp, Pilot[None]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await steps(app, pilot)

    asyncio.run(main())


def title(app: ExploreApp) -> str:
    return str(app.query_one("#title").render())


def status(app: ExploreApp) -> str:
    return str(app.query_one("#status").render())


def panel_rows(app: ExploreApp) -> list[tuple[str, float]]:
    """The side panel's rows, as it lists them: (key, weight), largest first."""
    bars = app.query_one("#row", RowPane).bars
    assert bars is not None
    return [(key, float(w)) for key, w in zip(bars.labels, bars.values, strict=True)]


def test_it_opens_on_layer_0_head_0_and_the_arrows_move_heads_and_layers() -> None:
    seen: list[str] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        for keys in ([], ["right"], ["down"], ["left", "left"], ["up", "up"], ["a"]):
            await pilot.press(*keys)
            seen.append(title(app))

    drive(ExploreApp(toy()), steps)
    assert seen == [
        "toy · layer 0 · head 0",
        "toy · layer 0 · head 1",
        "toy · layer 1 · head 1",
        "toy · layer 1 · head 3",  # round the layer's 4 heads
        "toy · layer 0 · head 3",  # the first layer is the end
        "toy · layer 0 · mean of 4 heads",
    ]


def test_tab_moves_the_query_and_the_panel_lists_its_keys_largest_first() -> None:
    analysis = toy()
    rows: list[list[tuple[str, float]]] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        rows.append(panel_rows(app))
        await pilot.press("tab", "tab")
        rows.append(panel_rows(app))
        await pilot.press("shift+tab")
        rows.append(panel_rows(app))
        assert app.query_one("#heatmap", HeatmapPane).heatmap.highlight == 1  # type: ignore[union-attr]

    drive(ExploreApp(analysis), steps)
    for query, shown in zip([0, 2, 1], rows, strict=True):
        row = analysis.view(0, 0).row(query)
        assert shown == [
            (k, pytest.approx(float(w))) for k, w in zip(row.keys, row.weights, strict=True)
        ]
        assert [w for _, w in shown] == sorted((w for _, w in shown), reverse=True)


def test_s_saves_the_view_as_a_png_and_says_where(tmp_path: Path) -> None:
    said: list[str] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("right", "s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        said.append(status(app))

    drive(ExploreApp(toy(), out=tmp_path), steps)
    saved = tmp_path / "attnviz-L0-H1.png"
    assert said == [f"saved {saved}"]
    assert saved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_question_mark_lists_every_key_and_escape_closes_it() -> None:
    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("right")
        assert title(app) == "toy · layer 0 · head 0"  # the help has the keys, not the view
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")

    app = ExploreApp(toy())
    drive(app, steps)
    assert app.return_code == 0


def test_x_u_and_r_redraw_without_special_tokens_in_pieces_and_as_a_rollout() -> None:
    titles: list[str] = []
    labels: list[list[str]] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        for key in ("x", "x", "u", "r"):
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.shown is not None
            titles.append(title(app))
            labels.append(app.shown.labels)

    drive(ExploreApp(toy()), steps)
    assert "without special tokens" in titles[0] and "[CLS]" not in labels[0]
    assert "[CLS]" in labels[1]
    assert labels[2] == TOKENS  # tokens
    assert titles[3] == "toy · rollout through layer 0"


def test_w_on_attention_given_as_arrays_says_it_needs_the_model() -> None:
    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("w")
        assert "needs the model" in status(app)
        assert title(app) == "toy · layer 0 · head 0"

    drive(ExploreApp(toy()), steps)


def test_f_ranks_the_heads_from_the_query_to_the_key_clicked() -> None:
    found: list[HeadLinks] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("tab", "tab")  # query 2: cat
        heatmap = app.query_one("#heatmap", HeatmapPane)
        line, lines = heatmap.row_line(2), heatmap.lines()
        assert line is not None and lines is not None
        segments = lines[line]
        left = len(segments[0].text)
        cell = (sum(len(s.text) for s in segments) - left) // len(TOKENS)
        await pilot.click("#heatmap", offset=(left + 6 * cell, line))
        assert status(app).startswith("cat → mat: ")
        await pilot.press("f")
        assert isinstance(app.screen, PanelScreen)
        found.append(app.screen.renderable)  # type: ignore[attr-defined]

    analysis = toy()
    drive(ExploreApp(analysis), steps)
    links = found[0]
    assert links.source == "cat" and links.target == "mat"
    np.testing.assert_allclose(links.weights, analysis.find("cat", "mat").weights)


def test_slash_reads_a_new_text_through_the_callback() -> None:
    asked: list[str] = []

    def retext(text: str) -> Analysis:
        asked.append(text)
        tokens = ["[CLS]", *text.split(), "[SEP]"]
        weights = np.full((3, 4, len(tokens), len(tokens)), 1 / len(tokens), np.float32)
        return attnviz.from_attentions(weights, tokens, model="toy")

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await pilot.press(*"a dog q", "enter")  # q types, not quits
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.shown is not None
        assert app.shown.labels == ["[CLS]", "a", "dog", "q", "[SEP]"]

    drive(ExploreApp(toy(), retext=retext), steps)
    assert asked == ["a dog q"]


def test_portuguese_titles_and_help() -> None:
    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        assert title(app) == "toy · camada 0 · cabeça 0"
        await pilot.press("question_mark")
        assert "próxima cabeça" in str(app.screen.query_one("Static").render())

    drive(PortugueseApp(toy(), lang="pt"), steps)


@pytest.mark.slow
def test_the_values_shown_are_those_of_show_json() -> None:
    """On the real model: layer 2, head 3, query `he`, as `attnviz show --json` prints them."""
    printed = CliRunner().invoke(cli, ["show", SENTENCE, "--layer", "2", "--head", "3", "--json"])
    assert printed.exit_code == 0, printed.output
    record = json.loads(printed.stdout)
    query = record["tokens"].index("he")
    analysis = attnviz.analyse(SENTENCE)
    matrices: list[np.ndarray] = []
    rows: list[list[tuple[str, float]]] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("down", "down", *["right"] * 3, *["tab"] * query)
        assert title(app) == "all-MiniLM-L6-v2 · layer 2 · head 3"
        assert app.shown is not None
        matrices.append(app.shown.matrix)
        rows.append(panel_rows(app))

    drive(ExploreApp(analysis), steps)
    weights = np.asarray(record["weights"])
    np.testing.assert_allclose(matrices[0], weights, rtol=0, atol=1e-6)
    expected = sorted(zip(record["tokens"], weights[query], strict=True), key=lambda kw: -kw[1])
    assert [k for k, _ in rows[0]] == [k for k, _ in expected]
    np.testing.assert_allclose([w for _, w in rows[0]], [w for _, w in expected], atol=1e-6)


def test_escape_cancels_what_runs_in_the_background_and_its_result_is_dropped() -> None:
    release = threading.Event()

    def retext(text: str) -> Analysis:
        release.wait(10)
        return toy()

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"slow", "enter")
        assert status(app).startswith("computing slow")
        await pilot.press("escape")
        assert status(app) == "cancelled"
        shown = app.analysis
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.analysis is shown and status(app) == "cancelled"

    drive(ExploreApp(toy(), retext=retext), steps)


def test_w_draws_the_norm_and_e_explains_the_query_on_the_real_model() -> None:
    analysis = attnviz.analyse(SENTENCE)
    panels: list[object] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("w")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert title(app).startswith("all-MiniLM-L6-v2 · layer 0 · head 0 · ‖α·f(x)‖")
        assert app.shown is not None
        np.testing.assert_allclose(app.shown.matrix, analysis.view(0, 0, measure="norm").matrix)
        await pilot.press("w")  # norm-res-ln: one matrix a layer
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "all heads together · ‖T_i(x_j)‖" in title(app)
        await pilot.press("right")
        assert "no heads" in status(app)
        await pilot.press("tab", "e")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PanelScreen)
        panels.append(app.screen.renderable)

    drive(ExploreApp(analysis), steps)
    explained = panels[0]
    assert (explained.layer, explained.head, explained.query) == (0, 0, 1)  # type: ignore[attr-defined]


def test_a_text_longer_than_the_screen_scrolls_with_the_query() -> None:
    tokens = ["[CLS]", *(f"w{i}" for i in range(40)), "[SEP]"]
    weights = np.full((2, 2, len(tokens), len(tokens)), 1 / len(tokens), np.float32)
    analysis = attnviz.from_attentions(weights, tokens, model="toy")

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        scroll = app.query_one("#map", VerticalScroll)
        assert scroll.scroll_y == 0
        await pilot.press(*["tab"] * 35)
        await pilot.pause()
        line = app.query_one("#heatmap", HeatmapPane).row_line(35)
        assert line is not None
        assert scroll.scroll_y <= line < scroll.scroll_y + scroll.size.height

    drive(ExploreApp(analysis), steps)


def test_analysis_explore_opens_where_it_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[ExploreApp] = []
    monkeypatch.setattr(ExploreApp, "run", lambda self, **_: opened.append(self))
    with pytest.raises(attnviz.BadInput, match="needs a terminal"):
        toy().explore()  # a pipe, a notebook's kernel: one line, and no screen left waiting
    assert opened == []
    monkeypatch.setattr(terminal, "on_a_terminal", lambda: True)
    toy().explore(layer=-1, head=None, units="tokens", exclude="special", lang="pt")
    (app,) = opened
    assert isinstance(app, PortugueseApp)
    assert (app.place.layer, app.place.head, app.place.units) == (2, None, "tokens")
    assert app.place.exclude == ("special",) and app.retext is None
    with pytest.raises(attnviz.BadInput, match="layer"):
        toy().explore(layer=3)  # refused before any screen


def test_a_click_on_a_key_in_the_panel_says_its_weight_and_f_starts_from_it() -> None:
    analysis = toy()
    row = analysis.view(0, 0).row(0)  # the panel's keys, largest first

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        panel = app.query_one("#row", RowPane)
        lines = panel.render_lines(panel.region.reset_offset)
        texts = ["".join(segment.text for segment in line) for line in lines]
        y = next(y for y, t in enumerate(texts) if t.lstrip().startswith(f"{row.indices[1]} "))
        await pilot.click("#row", offset=(2, y))
        assert status(app) == f"[CLS] → {row.keys[1]}: {row.weights[1]:.4f}"
        assert app.key == row.indices[1]

    drive(ExploreApp(analysis), steps)


def test_a_png_that_cannot_be_written_is_said_in_the_status_line(tmp_path: Path) -> None:
    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "missing" in status(app)  # the error, and the app still runs
        await pilot.press("right")
        assert title(app) == "toy · layer 0 · head 1"

    drive(ExploreApp(toy(), out=tmp_path / "missing"), steps)


def test_a_decoder_draws_its_future_masked_and_x_leaves_out_the_first_token(
    tiny_decoder: Callable[..., Path],
) -> None:
    analysis = attnviz.analyse("the cat sat on the mat", model=str(tiny_decoder("llama")))
    seen: list[tuple[str, list[str], bool]] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        for keys in ([], ["x"]):
            await pilot.press(*keys)
            heatmap = app.query_one("#heatmap", HeatmapPane).heatmap
            assert heatmap is not None and app.shown is not None
            masked = heatmap.masked is not None and bool(heatmap.masked[0, 1:].all())
            seen.append((title(app), app.shown.labels, masked))

    drive(ExploreApp(analysis), steps)
    (_, labels, masked), (excluded_title, excluded, still_masked) = seen
    assert masked and still_masked  # the first query sees only itself: the rest is masked
    assert labels[0] == "<s>" and excluded == labels[1:]
    assert "without special tokens and the first token" in excluded_title

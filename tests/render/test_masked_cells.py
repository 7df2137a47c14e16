"""Hidden cells look hidden: the keys a decoder's query cannot see (after it, outside a layer's
sliding window, an encoder's causal what-if) are marked masked in every view, drawn masked by
every renderer and listed in the data files.

The mask is checked against (k > q) | (q - k >= window), computed here independently of
attnviz, on a tiny Mistral whose window (4) is shorter than the sentence.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import analyse
from tests.conftest import TinyFactory

TEXT = "João said the bank refused the loan, and then the bank closed."
WINDOW = 4


@pytest.fixture(scope="module")
def windowed(tiny_decoder: TinyFactory):
    """An analysis on a tiny Mistral whose sliding window (4) is shorter than the text."""
    return analyse(TEXT, model=str(tiny_decoder("mistral", sliding_window=WINDOW)), cache=False)


def _expected(T: int, window: int | None) -> np.ndarray:
    """(T, T) bool over pieces: what a causal mask with `window` hides, by the definition."""
    hidden = np.zeros((T, T), dtype=bool)
    for q in range(T):
        for k in range(T):
            hidden[q, k] = k > q or (window is not None and q - k >= window)
    return hidden


def _words(hidden: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """A word pair is masked when every pair of its pieces is."""
    W = len(groups)
    out = np.zeros((W, W), dtype=bool)
    for a, qs in enumerate(groups):
        for b, ks in enumerate(groups):
            out[a, b] = all(hidden[q, k] for q in qs for k in ks)
    return out


@pytest.mark.slow
def test_view_mask_is_the_causal_window_mask_in_tokens_words_and_with_exclusion(windowed) -> None:
    A = windowed.attentions  # (L, H, T, T)
    T = A.shape[-1]
    hidden = _expected(T, WINDOW)
    assert hidden.any() and (np.arange(T)[:, None] - np.arange(T)[None, :] >= WINDOW).any()
    for head in (None, 3):
        view = windowed.view(layer=0, head=head, units="tokens")
        np.testing.assert_array_equal(view.masked, hidden)
        assert (view.matrix[hidden] == 0).all()  # the model's own zeros
    groups = [list(w.pieces) for w in windowed.words]
    words = windowed.view(layer=-1, units="words")
    np.testing.assert_array_equal(words.masked, _words(hidden, groups))
    assert words.masked.shape == words.matrix.shape
    # Exclusion drops the same rows and columns from the mask as from the weights.
    first = windowed.view(layer=0, units="tokens", exclude="first")
    np.testing.assert_array_equal(first.masked, hidden[1:, 1:])
    kept = [w for w in range(len(groups)) if w != 0]
    first_words = windowed.view(units="words", exclude="first")
    np.testing.assert_array_equal(first_words.masked, _words(hidden, groups)[np.ix_(kept, kept)])
    # Every panel of the heads and model views has its layer's mask.
    heads = windowed.heads(layer=1, units="tokens")
    assert heads.masked.shape == heads.matrices.shape
    assert all((m == hidden).all() for m in heads.masked)
    model = windowed.model_view(units="tokens")
    assert all((m == hidden).all() for m in model.masked)


@pytest.mark.slow
def test_rollout_mask_is_causal_with_the_chained_window(windowed) -> None:
    T = windowed.attentions.shape[-1]
    L = windowed.attentions.shape[0]
    rolled = windowed.rollout(units="tokens")
    # Two windowed layers of 4 reach 1 + 2·3 = 7 pieces back through the tokens in between.
    reach = 1 + L * (WINDOW - 1)
    np.testing.assert_array_equal(rolled.masked, _expected(T, reach))
    assert (rolled.matrix[rolled.masked] == 0).all()
    visible = ~rolled.masked
    assert (rolled.matrix[visible] > 0).any()


@pytest.mark.slow
def test_an_encoder_has_no_mask_and_its_causal_what_if_has_one(tiny_model: TinyFactory) -> None:
    folder = str(tiny_model("bert"))
    plain = analyse(TEXT, model=folder, cache=False).view(units="tokens")
    assert plain.masked is None
    what_if = analyse(TEXT, model=folder, cache=False, mask="causal").view(units="tokens")
    T = what_if.matrix.shape[0]
    np.testing.assert_array_equal(what_if.masked, _expected(T, None))


# ---------------------------------------------------------------- terminal


def _render(renderable, color_system: str | None) -> str:  # type: ignore[no-untyped-def]
    import io

    from rich.console import Console

    console = Console(
        width=120, file=io.StringIO(), color_system=color_system, force_terminal=bool(color_system)
    )
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _matrix() -> tuple[np.ndarray, np.ndarray]:
    """A 4 × 4 causal matrix with a real zero (row 2, key 1) that is visible."""
    values = np.array([[1.0, 0, 0, 0], [0.4, 0.6, 0, 0], [0.5, 0.0, 0.5, 0], [0.1, 0.2, 0.3, 0.4]])
    masked = np.triu(np.ones((4, 4), dtype=bool), 1)
    return values, masked


def test_terminal_heatmap_leaves_masked_cells_blank_and_real_zeros_coloured() -> None:
    from rich.segment import Segment

    from attnviz.render.terminal import Heatmap

    values, masked = _matrix()
    heat = Heatmap(values, ["a", "b", "c", "d"], masked=masked)
    import io

    from rich.console import Console

    console = Console(width=80, file=io.StringIO(), color_system="truecolor", force_terminal=True)
    lines = list(Segment.split_lines(console.render(heat, console.options)))
    rows = [
        line
        for line in lines
        if Segment.get_line_length(line)
        and "".join(s.text for s in line).lstrip().startswith(("0 a", "1 b", "2 c", "3 d"))
    ]
    assert len(rows) == 4
    for q, line in enumerate(rows):
        cells = [s for s in line if s.text.strip() == "" and s.text]
        # the row's cells after its label: one styled run per colour, masked cells unstyled
        body = "".join(s.text for s in line)
        assert body.startswith(f"{q} {'abcd'[q]} ")
        coloured = sum(len(s.text) for s in line if s.style and s.style.bgcolor)
        assert coloured == 3 * (q + 1)  # every visible cell (3 wide) has a colour, zeros too
        assert sum(len(s.text) for s in cells if not (s.style and s.style.bgcolor)) >= 3 * (3 - q)
    text = _render(heat, "truecolor")
    assert "masked (the model cannot see this key)" in text
    plain = _render(heat, None)
    grid = [row for row in plain.splitlines() if row[:1].isdigit()]
    # Without colour: the real zero (row 2, key 1) is a blank shade, masked cells a `·`.
    assert grid[2][4 + 3 : 4 + 6] == "   " and grid[2].rstrip().endswith("·")
    assert grid[0].split()[-3:] == ["·", "·", "·"] and "·" not in grid[3]
    assert Heatmap(values, ["a", "b", "c", "d"]).masked is None
    assert "masked" not in _render(Heatmap(values, ["a", "b", "c", "d"]), None)


def test_terminal_grid_leaves_masked_cells_blank() -> None:
    from attnviz.render.terminal import HeadGrid

    values, masked = _matrix()
    grid = HeadGrid(
        np.stack([values, values]),
        ["a", "b", "c", "d"],
        panel_titles=["h0", "h1"],
        masked=np.stack([masked, masked]),
    )
    plain = _render(grid, None).splitlines()
    start = next(i for i, row in enumerate(plain) if row.startswith("h0"))
    rows = [row[:8] for row in plain[start + 1 : start + 5]]  # 2 characters a key
    assert [row.count("·") for row in rows] == [6, 4, 2, 0]
    assert rows[2][2:4] == "  "  # the real zero: the blank shade, not the masked dot
    coloured = _render(grid, "truecolor")
    assert "masked (the model cannot see this key)" in coloured


def test_the_portuguese_legend_names_masked_cells() -> None:
    from attnviz.render.terminal import Heatmap

    values, masked = _matrix()
    text = _render(Heatmap(values, list("abcd"), masked=masked, lang="pt"), None)
    assert "mascarada (o modelo não vê esta chave)" in text


# ---------------------------------------------------------------- images


def test_annotate_writes_a_dash_exactly_in_masked_cells() -> None:
    from attnviz.render.figures import grid_figure, heatmap_figure

    values, masked = _matrix()
    fig = heatmap_figure(values, list("abcd"), title="t", annotate=True, masked=masked)
    texts = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
        for t in fig.axes[0].texts
    }
    for (q, k), text in texts.items():
        assert (text == "–") == masked[q, k], (q, k, text)
    assert texts[(2, 1)] == "0.00"  # a real zero the query could see keeps its number
    assert len(texts) == 16
    assert [t.get_text() for t in fig.texts] == ["masked"]  # the legend of the grey cells
    pt = heatmap_figure(values, list("abcd"), title="t", masked=masked, lang="pt")
    assert [t.get_text() for t in pt.texts] == ["mascarada"]
    assert heatmap_figure(values, list("abcd"), title="t").texts == []
    grid = grid_figure(
        np.stack([values]),
        list("abcd"),
        panel_titles=["h"],
        title="t",
        annotate=True,
        masked=masked[None],
    )
    dashes = [t.get_text() for ax in grid.axes for t in ax.texts if t.get_text() == "–"]
    assert len(dashes) == masked.sum()


def _pixels(path) -> np.ndarray:  # type: ignore[no-untyped-def]
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_images_draw_masked_cells_in_the_mask_grey_not_the_colormap_zero(
    theme: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from attnviz.render.figures import heatmap_figure
    from attnviz.render.layout import plan_grid
    from attnviz.render.saving import save_grid
    from attnviz.render.style import THEME_COLOURS

    grey = np.round(np.array(matplotlib.colors.to_rgb(THEME_COLOURS[theme]["masked"])) * 255)
    zero = np.round(np.array(matplotlib.colormaps["viridis"](0.0)[:3]) * 255)
    assert np.abs(grey - zero).max() > 60
    values, masked = _matrix()

    # One matrix (matplotlib): the pixel at each cell's centre.
    fig = heatmap_figure(values, list("abcd"), title="t", theme=theme, masked=masked)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    height = rgb.shape[0]
    for (q, k), hidden in np.ndenumerate(masked):
        x, y = fig.axes[0].transData.transform((k, q))
        pixel = rgb[int(height - y), int(x)]
        if hidden:
            np.testing.assert_allclose(pixel, grey, atol=2)
        elif values[q, k] == 0:
            np.testing.assert_allclose(pixel, zero, atol=2)  # the real zero keeps its colour

    # A grid drawn straight to pixels (PNG): the cell centres of each panel.
    grid, masks = np.stack([values, values]), np.stack([masked, masked])
    out = tmp_path / f"grid-{theme}.png"
    options = dict(panel_titles=["h0", "h1"], title="t", cmap="viridis", theme=theme)
    save_grid(grid, list("abcd"), out, dpi=100, masked=masks, **options)  # type: ignore[arg-type]
    plan = plan_grid(grid, list("abcd"), annotate=False, columns=None, masked=masks, **options)
    pixels = _pixels(out).astype(int)
    side = plan.g.side * 100 / 4  # pixels a cell
    for head in range(2):
        left, bottom = plan.panel(head)
        top = pixels.shape[0] - (bottom + plan.g.side) * 100
        for (q, k), hidden in np.ndenumerate(masked):
            pixel = pixels[int(top + (q + 0.5) * side), int(left * 100 + (k + 0.5) * side)]
            if hidden:
                np.testing.assert_allclose(pixel, grey, atol=2)
            elif values[q, k] == 0:
                np.testing.assert_allclose(pixel, zero, atol=2)


@pytest.mark.slow
def test_saved_views_of_a_decoder_have_grey_cells(windowed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    from attnviz.render.style import THEME_COLOURS

    grey = np.round(np.array(matplotlib.colors.to_rgb(THEME_COLOURS["light"]["masked"])) * 255)
    for view in ("show", "heads", "model"):
        out = windowed.save(tmp_path / f"{view}.png", view, units="tokens")
        pixels = _pixels(out).reshape(-1, 3).astype(int)
        assert (np.abs(pixels - grey).max(axis=1) <= 2).sum() > 1000, view


# ---------------------------------------------------------------- data


@pytest.mark.slow
def test_json_and_npz_keep_zeros_and_say_which_cells_were_masked(windowed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    view = windowed.view(units="tokens")
    record = view.to_dict()
    assert np.array(record["masked"]).shape == np.array(record["weights"]).shape
    np.testing.assert_array_equal(np.array(record["masked"]), view.masked)
    assert (np.array(record["weights"])[view.masked] == 0.0).all()
    assert windowed.rollout(units="tokens").to_dict()["masked"] is not None
    heads = windowed.heads(units="tokens").to_dict()
    assert np.array(heads["masked"]).shape == np.array(heads["weights"]).shape
    L, _, T, _ = windowed.attentions.shape

    def rebuilt(causal: bool, windows: list) -> np.ndarray:  # type: ignore[type-arg]
        q, k = np.arange(T)[:, None], np.arange(T)[None, :]
        return np.stack(
            [causal & ((k > q) | ((w or 0) > 0) & (q - k >= (w or 1))) for w in windows]
        )

    data = json.loads(windowed.save(tmp_path / "a.json").read_text())
    assert data["causal"] is True and data["windows"] == [WINDOW] * L
    hidden = rebuilt(data["causal"], data["windows"])  # (L, T, T)
    A = np.array(data["attentions"])  # (L, H, T, T)
    assert (A[np.broadcast_to(hidden[:, None], A.shape)] == 0.0).all()
    np.testing.assert_array_equal(hidden[0], _expected(T, WINDOW))
    npz = np.load(windowed.save(tmp_path / "a.npz"))
    assert bool(npz["causal"]) and npz["windows"].tolist() == [WINDOW] * L
    np.testing.assert_array_equal(rebuilt(bool(npz["causal"]), npz["windows"].tolist()), hidden)


@pytest.mark.slow
def test_an_encoder_data_file_has_no_windows(tiny_model: TinyFactory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    analysis = analyse(TEXT, model=str(tiny_model("bert")), cache=False)
    data = json.loads(analysis.save(tmp_path / "e.json").read_text())
    assert data["causal"] is False and data["windows"] == [None] * analysis.attentions.shape[0]
    assert analysis.view().to_dict()["masked"] is None


# ---------------------------------------------------------------- the page


@pytest.mark.slow
def test_page_greys_and_unlists_what_the_query_cannot_see(windowed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.render.test_html import CHROMIUM, Page, _browser

    sync_playwright = _browser()
    out = windowed.save(tmp_path / "decoder.html", "heads", units="tokens", layer=0)
    T = windowed.attentions.shape[-1]
    hidden = _expected(T, WINDOW)
    mean = windowed.view(layer=0, units="tokens").matrix
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        view = Page(browser, out)
        page = view.page
        for query in (2, T - 1):  # the future, then the keys outside the window
            page.hover(f'.av-left .av-tok[data-index="{query}"]')
            keys = page.eval_on_selector_all(
                ".av-right .av-tok",
                "els => els.map(e => [e.dataset.masked === 'true',"
                " e.querySelector('.av-w').textContent])",
            )
            for k, (masked, text) in enumerate(keys):
                assert masked == hidden[query, k], (query, k)
                if masked:
                    assert text == ""  # unlisted, not 0.0000
                else:
                    assert float(text) == pytest.approx(mean[query, k], abs=1e-4)
        # The matrix: cells after the diagonal and outside the window in the masked grey.
        page.click('button[data-view="matrix"]')
        page.select_option("select.av-layer", "0")
        width = page.eval_on_selector("canvas.av-heat", "c => c.width")
        cell = max(1, min(28, 640 // T))
        margin = width - 4 - T * cell
        colours = page.eval_on_selector(
            "canvas.av-heat",
            f"""c => {{
                const ctx = c.getContext('2d'), out = [];
                for (let i = 0; i < {T}; i++) for (let j = 0; j < {T}; j++) {{
                  const x = {margin} + j * {cell} + {cell // 2};
                  const y = {margin} + i * {cell} + {cell // 2};
                  out.push(Array.from(ctx.getImageData(x, y, 1, 1).data.slice(0, 3)));
                }}
                return out;
            }}""",
        )
        grey = page.eval_on_selector(
            ".attnviz", "e => getComputedStyle(e).getPropertyValue('--av-masked').trim()"
        )
        rgb = [int(grey[i : i + 2], 16) for i in (1, 3, 5)]
        is_grey = np.array([c == rgb for c in colours]).reshape(T, T)
        np.testing.assert_array_equal(is_grey, hidden)
        # The tooltip of a masked cell says so instead of a weight.
        box = page.locator("canvas.av-heat").bounding_box()
        height = page.eval_on_selector("canvas.av-heat", "c => c.height")
        x = box["x"] + (margin + (T - 1) * cell + cell / 2) * box["width"] / width
        y = box["y"] + (margin + 0 * cell + cell / 2) * box["height"] / height
        page.mouse.move(x, y)
        tip = page.locator(".av-tip")
        assert tip.get_attribute("data-masked") == "true"
        assert "masked (the model cannot see this key)" in tip.text_content()
        page.click('button[data-view="model"]')
        assert page.locator("canvas.av-thumb").count() == windowed.attentions[:, :].shape[0] * 8
        assert view.errors == [] and view.requests == []
        view.close()
        browser.close()


@pytest.mark.slow
def test_an_encoder_page_has_no_mask(tiny_model: TinyFactory) -> None:
    from tests.render.test_html import _spec

    analysis = analyse(TEXT, model=str(tiny_model("bert")), cache=False)
    assert _spec(analysis.html())["masked"] is None


@pytest.mark.slow
def test_a_query_row_lists_masked_keys_last_without_a_number(windowed) -> None:
    view = windowed.view(layer=0, units="tokens")
    T = view.matrix.shape[0]
    query = 2
    row = view.row(query)
    hidden = _expected(T, WINDOW)[query]
    assert row.masked is not None
    assert [bool(hidden[j]) for j in row.indices] == list(row.masked)
    assert list(row.masked) == sorted(row.masked)  # every visible key first
    record = row.to_dict()
    assert [key["masked"] for key in record["keys"]] == list(row.masked)
    text = _render(row, None)
    masked_lines = [line for line in text.splitlines() if line.rstrip().endswith("–")]
    assert len(masked_lines) == hidden.sum()
    assert "masked (the model cannot see this key)" in text


def test_words_mask_merges_runs_and_reordered_pieces_alike() -> None:
    from attnviz.measures.select import hidden_keys, merge_masked

    hidden = hidden_keys(7, True, 3)
    assert hidden is not None and hidden_keys(7, False, 3) is None
    np.testing.assert_array_equal(hidden, _expected(7, 3))
    runs = [[0], [1, 2], [3], [4, 5, 6]]
    np.testing.assert_array_equal(merge_masked(hidden, runs), _words(hidden, runs))
    shuffled = [[0, 3], [1], [2, 6], [4, 5]]  # words whose pieces are not runs
    np.testing.assert_array_equal(merge_masked(hidden, shuffled), _words(hidden, shuffled))
    stacked = merge_masked(np.stack([hidden, ~hidden]), runs)  # (2, W, W): leading axes kept
    np.testing.assert_array_equal(stacked[1], _words(~hidden, runs))


@pytest.mark.slow
def test_a_views_notebook_cell_carries_its_mask(windowed) -> None:
    import base64
    import zlib

    from tests.render.test_html import _spec

    view = windowed.view(layer=0, units="words")
    spec = _spec(view._repr_html_())
    N = view.matrix.shape[0]
    packed = np.frombuffer(zlib.decompress(base64.b64decode(spec["masked"]["data"])), np.uint8)
    bits = np.unpackbits(packed)[: N * N].reshape(N, N).astype(bool)
    np.testing.assert_array_equal(bits, view.masked)
    model = windowed.model_view(units="tokens")
    spec = _spec(model._repr_html_())
    T = windowed.attentions.shape[-1]
    L = windowed.attentions.shape[0]
    packed = np.frombuffer(zlib.decompress(base64.b64decode(spec["masked"]["data"])), np.uint8)
    bits = np.unpackbits(packed)[: L * T * T].reshape(L, T, T).astype(bool)
    assert all((layer == _expected(T, WINDOW)).all() for layer in bits)

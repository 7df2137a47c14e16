"""Tests for the images of attnviz.render (style, layout, figures, saving, raster, png):
figures that read well and files that open."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from attnviz.errors import AttnvizError, BadInput
from attnviz.output import IMAGE_SUFFIXES, check_colormap
from attnviz.render.figures import grid_figure, heatmap_figure
from attnviz.render.saving import save_figure, save_grid
from attnviz.render.style import DEFAULT_CMAP, THEMES

TOKENS = ["[CLS]", "the", "cat", "<s>", "R&D", "sat", "[SEP]"]


def softmax_rows(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(size=shape) * 2
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def heatmap(**kwargs: object) -> Figure:
    n = len(TOKENS)
    options: dict = {"title": "bert-base · layer 2 · head 5", **kwargs}
    return heatmap_figure(softmax_rows((n, n)), TOKENS, **options)


def grid(heads: int = 12, **kwargs: object) -> Figure:
    n = len(TOKENS)
    titles = [f"head {h}" for h in range(heads)]
    options: dict = {"panel_titles": titles, "title": "bert-base · layer 2", **kwargs}
    return grid_figure(softmax_rows((heads, n, n)), TOKENS, **options)


def tick_texts(labels: list) -> list[str]:
    return [label.get_text() for label in labels]


def panels(fig: Figure) -> list[Axes]:
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def colorbars(fig: Figure) -> list[Axes]:
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def luminance(colour: object) -> float:
    r, g, b = to_rgb(colour)  # type: ignore[arg-type]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# ---------------------------------------------------------------- files that open


@pytest.mark.slow  # 12-panel grids in 3 formats
@pytest.mark.parametrize("make", [heatmap, grid], ids=["heatmap", "grid"])
@pytest.mark.parametrize("suffix", IMAGE_SUFFIXES)
def test_each_format_writes_a_file_that_opens(tmp_path: Path, make, suffix: str) -> None:
    path = tmp_path / f"attention{suffix}"
    save_figure(make(), path, dpi=100)
    data = path.read_bytes()
    if suffix == ".png":
        with Image.open(path) as image:
            width, height = image.size
        assert 300 < width < 5000 and 300 < height < 5000
    elif suffix == ".svg":
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
    else:
        assert data.startswith(b"%PDF")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left


def test_suffix_is_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "ATTENTION.PNG"
    save_figure(heatmap(), path, dpi=50)
    with Image.open(path) as image:
        assert image.format == "PNG"


def test_dpi_scales_the_pixel_size(tmp_path: Path) -> None:
    save_figure(heatmap(), tmp_path / "low.png", dpi=100)
    save_figure(heatmap(), tmp_path / "high.png", dpi=200)
    with Image.open(tmp_path / "low.png") as low, Image.open(tmp_path / "high.png") as high:
        assert high.width / low.width == pytest.approx(2.0, rel=0.05)
        assert high.height / low.height == pytest.approx(2.0, rel=0.05)


def test_svg_keeps_labels_as_searchable_text(tmp_path: Path) -> None:
    path = tmp_path / "attention.svg"
    save_figure(heatmap(), path)
    root = ET.parse(path).getroot()
    texts = {"".join(node.itertext()).strip() for node in root.iter() if node.tag.endswith("text")}
    assert {"cat", "<s>", "R&D", "key", "query", "bert-base · layer 2 · head 5"} <= texts


@pytest.mark.slow  # a 12-panel grid to PDF
def test_saving_leaves_matplotlib_settings_alone(tmp_path: Path) -> None:
    before = dict(matplotlib.rcParams)
    save_figure(heatmap(theme="dark"), tmp_path / "a.svg")
    save_figure(grid(), tmp_path / "a.pdf")
    assert dict(matplotlib.rcParams) == before


@pytest.mark.slow  # 4 vector files
def test_vector_files_are_reproducible(tmp_path: Path) -> None:
    for suffix in (".svg", ".pdf"):
        save_figure(heatmap(), tmp_path / f"one{suffix}")
        save_figure(heatmap(), tmp_path / f"two{suffix}")
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"two{suffix}").read_bytes()


@pytest.mark.slow  # subprocess
def test_rendering_touches_neither_pyplot_nor_torch(tmp_path: Path) -> None:
    script = (
        "import sys, numpy as np\n"
        "from pathlib import Path\n"
        "from attnviz.render.figures import heatmap_figure\n"
        "from attnviz.render.saving import save_figure\n"
        "fig = heatmap_figure(np.eye(3), ['a', 'b', 'c'], title='t')\n"
        f"save_figure(fig, Path({str(tmp_path / 'x.png')!r}))\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "x.png").is_file()


# ---------------------------------------------------------------- what the figure shows


def test_heatmap_has_title_axis_names_and_token_ticks() -> None:
    fig = heatmap()
    ax = panels(fig)[0]
    assert ax.get_title() == "bert-base · layer 2 · head 5"
    assert ax.get_xlabel() == "key"
    assert ax.get_ylabel() == "query"
    assert tick_texts(ax.get_xticklabels()) == TOKENS
    assert tick_texts(ax.get_yticklabels()) == TOKENS
    assert all(60 <= label.get_rotation() <= 90 for label in ax.get_xticklabels())
    assert len(colorbars(fig)) == 1
    assert colorbars(fig)[0].get_ylabel() == "attention weight"


def test_heatmap_rows_are_queries_and_columns_keys() -> None:
    matrix = np.zeros((2, 3))
    matrix[0, 2] = 1.0  # query "q0" attends to key "k2"
    fig = heatmap_figure(matrix, ["q0", "q1"], ["k0", "k1", "k2"], title="t")
    ax = panels(fig)[0]
    assert tick_texts(ax.get_yticklabels()) == ["q0", "q1"]
    assert tick_texts(ax.get_xticklabels()) == ["k0", "k1", "k2"]
    shown = ax.get_images()[0].get_array()
    assert shown is not None
    assert shown.shape == (2, 3)
    assert shown[0, 2] == 1.0


def test_colour_scale_starts_at_zero_and_honours_vmax() -> None:
    matrix = softmax_rows((5, 5))
    image = panels(heatmap_figure(matrix, list("abcde"), title="t"))[0].get_images()[0]
    assert image.get_clim() == pytest.approx((0.0, matrix.max()))
    image = panels(heatmap_figure(matrix, list("abcde"), title="t", vmax=1.0))[0].get_images()[0]
    assert image.get_clim() == (0.0, 1.0)


@pytest.mark.parametrize("vmax", [0.0, -1.0, float("nan")])
def test_non_positive_vmax_is_bad_input(vmax: float) -> None:
    with pytest.raises(BadInput, match="above 0"):
        heatmap(vmax=vmax)


def test_figure_grows_with_the_number_of_tokens() -> None:
    small = heatmap_figure(softmax_rows((8, 8)), [f"t{i}" for i in range(8)], title="t")
    large = heatmap_figure(softmax_rows((40, 40)), [f"t{i}" for i in range(40)], title="t")
    assert large.get_figwidth() > 1.5 * small.get_figwidth()
    assert large.get_figheight() > 1.5 * small.get_figheight()


def test_sixty_tokens_are_all_labelled() -> None:
    labels = [f"w{i}" for i in range(60)]
    ax = panels(heatmap_figure(softmax_rows((60, 60)), labels, title="t"))[0]
    assert tick_texts(ax.get_xticklabels()) == labels
    assert ax.get_xlabel() == "key"


@pytest.mark.slow  # 300- and 512-token images
@pytest.mark.parametrize("count", [300, 512])
def test_long_input_shows_sparse_readable_ticks(tmp_path: Path, count: int) -> None:
    labels = [f"w{i}" for i in range(count)]
    fig = heatmap_figure(softmax_rows((count, count)), labels, title="long")
    ax = panels(fig)[0]
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        texts = tick_texts(ticks)
        assert 10 <= len(texts) <= 60
        assert texts[0] == "w0"
        step = int(texts[1][1:])
        assert texts == labels[::step]
        assert min(float(t.get_fontsize()) for t in ticks) >= 8
    assert "token labelled" in ax.get_xlabel()
    assert max(fig.get_size_inches()) < 20
    save_figure(fig, tmp_path / "long.png", dpi=50)
    assert (tmp_path / "long.png").stat().st_size > 0


def test_sparse_axis_name_uses_a_proper_ordinal() -> None:
    labels = [f"w{i}" for i in range(61)]
    ax = panels(heatmap_figure(softmax_rows((61, 61)), labels, title="t"))[0]
    assert ax.get_xlabel() == "key (every 2nd token labelled)"


def test_long_labels_are_shortened_and_control_characters_shown() -> None:
    labels = ["x" * 40, "a\nb", "ok"]
    ax = panels(heatmap_figure(np.eye(3), labels, title="t"))[0]
    first, second, third = tick_texts(ax.get_xticklabels())
    assert first.endswith("…") and len(first) <= 20
    assert second == "a\\nb"
    assert third == "ok"


def test_labels_that_look_like_tex_are_drawn_literally(tmp_path: Path) -> None:
    labels = ["$x$", "$\\frac{$", "$", "50%"]  # the second crashes mathtext
    fig = heatmap_figure(np.eye(4), labels, title="cost in $ and $x$")
    assert tick_texts(panels(fig)[0].get_xticklabels()) == labels
    save_figure(fig, tmp_path / "tex.png", dpi=50)


def test_mismatched_labels_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="labels"):
        heatmap_figure(np.eye(3), ["a", "b"], title="t")
    with pytest.raises(ValueError, match="expected"):
        heatmap_figure(np.ones(3), ["a", "b", "c"], title="t")


def test_nan_cells_do_not_break_the_scale(tmp_path: Path) -> None:
    matrix = np.array([[0.5, np.nan], [0.25, 0.75]])
    fig = heatmap_figure(matrix, ["a", "b"], title="t", annotate=True)
    assert panels(fig)[0].get_images()[0].get_clim() == (0.0, 0.75)
    save_figure(fig, tmp_path / "nan.png", dpi=50)


# ---------------------------------------------------------------- annotation


def cell_texts(ax: Axes) -> list:
    """The values written on cells (placed in data units, unlike the titles of panels)."""
    on_cells = [t for t in ax.texts if t.get_transform() is ax.transData]
    return [t for t in on_cells if t.get_text().replace(".", "").isdigit()]


@dataclass
class Panel:
    """One heatmap of a grid as the reader sees it: a frame with a title over it, the
    labels beside it and the colours in it. A row of panels is drawn on one Axes (one
    image for the row), so a panel is found by its frame, in that Axes' data units."""

    ax: Axes
    title: str
    x0: float  # x of the panel's first column of cells
    size: int  # cells a side
    row: int
    col: int

    def _inside(self, x: float) -> bool:
        return self.x0 - 0.5 <= x <= self.x0 + self.size - 0.5

    def key_labels(self) -> list[str]:
        ticks = zip(self.ax.get_xticks(), self.ax.get_xticklabels(), strict=True)
        return [label.get_text() for x, label in ticks if self._inside(x)]

    def query_labels(self) -> list[str]:
        return tick_texts(self.ax.get_yticklabels()) if self.col == 0 else []

    def cell_texts(self) -> list:
        return [t for t in cell_texts(self.ax) if self._inside(t.get_position()[0])]

    def colour(self, row: int, col: int) -> np.ndarray:
        """The RGBA colour (0..1) drawn for cell (row, col)."""
        image = self.ax.get_images()[0]
        pixels = np.asarray(image.get_array())
        left, right, _, _ = image.get_extent()
        x = int((self.x0 + col - left) / (right - left) * pixels.shape[1])
        return pixels[row, x] / 255


def grid_panels(fig: Figure) -> list[Panel]:
    """The panels of a grid figure, row by row from the top, left to right."""
    found = []
    rows = sorted(panels(fig), key=lambda ax: -ax.get_position().y0)
    for row, ax in enumerate(rows):
        frames = sorted(
            (p for p in ax.patches if isinstance(p, Rectangle)), key=lambda p: p.get_x()
        )
        titles = sorted(
            (t for t in ax.texts if t.get_transform() is not ax.transData),
            key=lambda t: t.get_position()[0],
        )
        assert len(frames) == len(titles)
        for col, (frame, title) in enumerate(zip(frames, titles, strict=True)):
            x0, size = frame.get_x() + 0.5, round(frame.get_width())
            assert x0 - 0.5 <= title.get_position()[0] <= x0 + size - 0.5  # over its panel
            found.append(Panel(ax, title.get_text(), x0, size, row, col))
    return found


def test_annotate_writes_each_value_with_contrasting_colour() -> None:
    matrix = np.array([[0.0, 1.0], [0.5, 0.123]])
    ax = panels(heatmap_figure(matrix, ["a", "b"], title="t", annotate=True))[0]
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t for t in cell_texts(ax)}
    assert {key: t.get_text() for key, t in texts.items()} == {
        (0, 0): "0.00",
        (0, 1): "1.00",
        (1, 0): "0.50",
        (1, 1): "0.12",
    }
    # viridis: 0 is dark purple (white text), 1 is yellow (black text)
    assert luminance(texts[(0, 0)].get_color()) > 0.9
    assert luminance(texts[(0, 1)].get_color()) < 0.1


def test_annotate_is_skipped_when_cells_are_small() -> None:
    labels = [f"t{i}" for i in range(30)]
    ax = panels(heatmap_figure(softmax_rows((30, 30)), labels, title="t", annotate=True))[0]
    assert cell_texts(ax) == []
    assert cell_texts(panels(heatmap(annotate=False))[0]) == []


def test_grid_annotates_small_inputs_only() -> None:
    small = grid_figure(
        softmax_rows((4, 3, 3)), list("abc"), panel_titles=list("ABCD"), title="t", annotate=True
    )
    assert len(grid_panels(small)) == 4
    assert all(len(p.cell_texts()) == 9 for p in grid_panels(small))
    large = grid(heads=4, annotate=True)  # 7 tokens: still small
    assert all(len(p.cell_texts()) == 49 for p in grid_panels(large))
    labels = [f"t{i}" for i in range(12)]
    too_big = grid_figure(
        softmax_rows((4, 12, 12)), labels, panel_titles=list("ABCD"), title="t", annotate=True
    )
    assert all(p.cell_texts() == [] for p in grid_panels(too_big))


# ---------------------------------------------------------------- grid


def test_grid_shares_one_colour_scale_and_one_colour_bar() -> None:
    matrices = softmax_rows((4, 5, 5))
    matrices[2] *= 0.1  # a head with much weaker weights must not get its own scale
    fig = grid_figure(
        matrices, list("abcde"), panel_titles=["h0", "h1", "h2", "h3"], title="layer 0"
    )
    (bar,) = colorbars(fig)
    assert bar.get_ylim() == pytest.approx((0.0, matrices.max()))
    colormap = matplotlib.colormaps[DEFAULT_CMAP]
    for head, panel in enumerate(grid_panels(fig)):
        for row, col in [(0, 0), (1, 3), (4, 4), (2, 1)]:
            expected = colormap(matrices[head, row, col] / matrices.max())
            assert panel.colour(row, col) == pytest.approx(expected, abs=2 / 255)


def test_grid_is_near_square_with_titles_and_suptitle() -> None:
    fig = grid(heads=12)
    shown = grid_panels(fig)
    assert len(shown) == 12
    assert ({p.row for p in shown}, {p.col for p in shown}) == ({0, 1, 2}, {0, 1, 2, 3})
    assert [p.title for p in shown] == [f"head {h}" for h in range(12)]
    assert fig.get_suptitle() == "bert-base · layer 2"


def test_grid_labels_tokens_on_outer_panels_only() -> None:
    fig = grid(heads=10)  # 3 x 4 with two panels in the last row
    shown = grid_panels(fig)
    assert len(shown) == 10
    for index, panel in enumerate(shown):
        col = index % 4
        y_texts = panel.query_labels()
        x_texts = panel.key_labels()
        assert (y_texts == TOKENS) == (col == 0), index
        assert (x_texts == TOKENS) == (index + 4 >= 10), index
        if col != 0:
            assert not any(y_texts)
        if index + 4 < 10:
            assert not any(x_texts)


def test_grid_of_one_head() -> None:
    fig = grid(heads=1)
    assert len(panels(fig)) == 1
    assert tick_texts(panels(fig)[0].get_xticklabels()) == TOKENS


@pytest.mark.slow  # 12 panels of 200 tokens
def test_grid_of_long_inputs_keeps_few_labels(tmp_path: Path) -> None:
    labels = [f"w{i}" for i in range(200)]
    fig = grid_figure(
        softmax_rows((12, 200, 200)), labels, panel_titles=[str(h) for h in range(12)], title="t"
    )
    for panel in grid_panels(fig):
        assert len(panel.key_labels()) <= 30
    save_figure(fig, tmp_path / "grid.png", dpi=40)


def test_grid_rejects_mismatched_titles() -> None:
    with pytest.raises(ValueError, match="panel titles"):
        grid_figure(softmax_rows((3, 4, 4)), list("abcd"), panel_titles=["a"], title="t")


# ---------------------------------------------------------------- theme and transparency


def test_dark_theme_has_dark_background_and_light_text() -> None:
    fig = heatmap(theme="dark")
    ax = panels(fig)[0]
    assert luminance(fig.get_facecolor()) < 0.2
    assert luminance(ax.title.get_color()) > 0.8
    assert luminance(ax.xaxis.label.get_color()) > 0.8
    assert all(luminance(t.get_color()) > 0.8 for t in ax.get_xticklabels())
    light = heatmap(theme="light")
    assert luminance(light.get_facecolor()) > 0.95
    assert luminance(panels(light)[0].title.get_color()) < 0.3


def test_dark_grid_has_light_suptitle() -> None:
    fig = grid(heads=2, theme="dark")
    assert luminance(fig.get_facecolor()) < 0.2
    (suptitle,) = [t for t in fig.texts if t.get_text() == "bert-base · layer 2"]
    assert luminance(suptitle.get_color()) > 0.8


def test_dark_png_background_is_dark(tmp_path: Path) -> None:
    save_figure(heatmap(theme="dark"), tmp_path / "dark.png", dpi=50)
    with Image.open(tmp_path / "dark.png") as image:
        corner = image.convert("RGB").getpixel((0, 0))
    assert isinstance(corner, tuple) and max(corner) < 60


def test_unknown_theme_is_bad_input() -> None:
    with pytest.raises(BadInput, match="light, dark"):
        heatmap(theme="solarized")


def test_transparent_png_has_transparent_pixels(tmp_path: Path) -> None:
    save_figure(heatmap(), tmp_path / "clear.png", dpi=50, transparent=True)
    save_figure(heatmap(), tmp_path / "solid.png", dpi=50)
    with Image.open(tmp_path / "clear.png") as clear, Image.open(tmp_path / "solid.png") as solid:
        assert clear.mode == "RGBA"
        clear_alpha = np.asarray(clear)[..., 3]
        solid_alpha = np.asarray(solid.convert("RGBA"))[..., 3]
    assert clear_alpha.min() == 0
    assert clear_alpha.max() == 255  # the heatmap itself stays opaque
    assert solid_alpha.min() == 255


# ---------------------------------------------------------------- unicode


@pytest.mark.slow  # font fallback, 5 image files
def test_unicode_labels_render_without_warnings(tmp_path: Path) -> None:
    labels = ["猫", "は", "😀", "🇵🇹", "مرحبا", "naïve", "Ж"]
    n = len(labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = heatmap_figure(softmax_rows((n, n)), labels, title="多言語 😀", annotate=True)
        for suffix in IMAGE_SUFFIXES:
            save_figure(
                heatmap_figure(softmax_rows((n, n)), labels, title="猫"), tmp_path / f"u{suffix}"
            )
        save_figure(fig, tmp_path / "annotated.png", dpi=50)
        g = grid_figure(softmax_rows((2, n, n)), labels, panel_titles=["頭 0", "頭 1"], title="😀")
        save_figure(g, tmp_path / "grid.png", dpi=50)
    assert "猫" in (tmp_path / "u.svg").read_text(encoding="utf-8")


def test_unicode_labels_do_not_log_font_complaints(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="matplotlib"):
        save_figure(heatmap_figure(np.eye(2), ["猫", "😀"], title="t"), tmp_path / "u.png")
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["attention.jpg", "attention.txt", "attention"])
def test_unknown_suffix_is_bad_input_and_writes_nothing(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInput) as caught:
        save_figure(heatmap(), tmp_path / name)
    message = str(caught.value)
    assert all(suffix in message for suffix in IMAGE_SUFFIXES)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dpi", [0, -100])
def test_non_positive_dpi_is_bad_input(tmp_path: Path, dpi: int) -> None:
    with pytest.raises(BadInput, match="dpi"):
        save_figure(heatmap(), tmp_path / "a.png", dpi=dpi)
    assert list(tmp_path.iterdir()) == []


def test_known_colormaps_pass() -> None:
    for name in (DEFAULT_CMAP, "magma", "Blues", "Greys", "viridis_r"):
        check_colormap(name)


@pytest.mark.parametrize(("typo", "suggestion"), [("viridsi", "viridis"), ("blues", "Blues")])
def test_unknown_colormap_suggests_a_close_match(typo: str, suggestion: str) -> None:
    with pytest.raises(BadInput) as caught:
        check_colormap(typo)
    message = str(caught.value)
    assert f"'{typo}'" in message
    assert suggestion in message.split(":")[0]
    assert "viridis" in message and "\n" not in message


def test_figures_check_the_colormap() -> None:
    with pytest.raises(BadInput, match="colormap"):
        heatmap(cmap="nope")
    with pytest.raises(BadInput, match="colormap"):
        grid(cmap="nope")


def test_missing_folder_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(AttnvizError, match="does not exist"):
        save_figure(heatmap(), tmp_path / "missing" / "a.png")
    assert list(tmp_path.iterdir()) == []


def test_failure_while_saving_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    fig = heatmap()

    def broken_savefig(handle, **kwargs: object) -> None:
        handle.write(b"half a png")
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(fig, "savefig", broken_savefig)
    with pytest.raises(RuntimeError, match="renderer crashed"):
        save_figure(fig, tmp_path / "a.png")
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_an_existing_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(b"previous")
    fig = heatmap()

    def broken_savefig(handle, **kwargs: object) -> None:
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(fig, "savefig", broken_savefig)
    with pytest.raises(RuntimeError):
        save_figure(fig, path)
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"]


# ---------------------------------------------------------------- long inputs, big grids


def tick_label_problems(fig: Figure, min_pt: float) -> list[str]:
    """Neighbouring tick labels that overlap as drawn (after the layout), or are too small.

    Neighbouring key labels are parallel strips rotated by the same angle, so they clear
    each other when the tick spacing times sin(angle) is at least the text height; query
    labels are horizontal, so the spacing itself must be.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing glyphs; the product silences them on save
        canvas.draw()
    renderer = canvas.get_renderer()
    problems = []
    for n, ax in enumerate(panels(fig)):
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = [t for t in axis.get_ticklabels() if t.get_text()]
            if len(labels) < 2:
                continue
            where = [
                ax.transData.transform((p, p))[0 if name == "x" else 1] for p in axis.get_ticklocs()
            ]
            spacing = float(np.min(np.abs(np.diff(where))))  # display pixels between ticks
            angle = math.radians(labels[0].get_rotation()) if name == "x" else math.pi / 2
            props = labels[0].get_fontproperties()
            _, height, _ = renderer.get_text_width_height_descent("Ágy", props, ismath=False)
            if spacing * math.sin(angle) < height:
                problems.append(f"panel {n} {name}: {spacing:.1f} px apart, text {height:.1f} px")
            if min(t.get_fontsize() for t in labels) < min_pt:
                problems.append(f"panel {n} {name}: labels smaller than {min_pt} pt")
    return problems


@pytest.fixture(scope="module")
def long_labels() -> list[str]:
    """512 labels like a long text's pieces, CJK and ones cut to 20 characters among them."""
    words = ["[CLS]", "João", "pens", "##ou", ":", "東京大学", "x" * 30, "é", "👍🏽", "مرحبا"]
    return [words[i % len(words)] for i in range(512)]


@pytest.mark.slow  # up to 512-token images
@pytest.mark.parametrize("count", [60, 61, 100, 300, 512])
def test_long_heatmap_tick_labels_do_not_overlap(long_labels: list[str], count: int) -> None:
    fig = heatmap_figure(softmax_rows((count, count)), long_labels[:count], title="long")
    assert not tick_label_problems(fig, min_pt=8)
    assert max(fig.get_size_inches()) <= 20


@pytest.mark.slow  # a 512-token image
def test_512_token_heatmap_saves_a_capped_readable_png(
    tmp_path: Path, long_labels: list[str]
) -> None:
    fig = heatmap_figure(softmax_rows((512, 512)), long_labels, title="512 tokens")
    save_figure(fig, tmp_path / "long.png", dpi=200)
    with Image.open(tmp_path / "long.png") as image:
        width, height = image.size
    assert 2000 < max(width, height) <= 30 * 200  # big enough to read, not gigantic
    assert (tmp_path / "long.png").stat().st_size < 8 * 2**20


@pytest.mark.slow  # 12-panel grids up to 512 tokens
@pytest.mark.parametrize("count", [8, 60, 200, 512])
def test_head_grid_tick_labels_do_not_overlap(long_labels: list[str], count: int) -> None:
    titles = [f"head {h}" for h in range(12)]
    fig = grid_figure(
        softmax_rows((12, count, count)), long_labels[:count], panel_titles=titles, title="t"
    )
    assert not tick_label_problems(fig, min_pt=7)
    assert max(fig.get_size_inches()) <= 30


@pytest.mark.slow  # 12 panels of 512 tokens
def test_12_heads_of_512_tokens_save_a_capped_png(tmp_path: Path, long_labels: list[str]) -> None:
    titles = [f"head {h}" for h in range(12)]
    fig = grid_figure(softmax_rows((12, 512, 512)), long_labels, panel_titles=titles, title="t")
    save_figure(fig, tmp_path / "grid.png", dpi=200)
    with Image.open(tmp_path / "grid.png") as image:
        assert max(image.size) <= 30 * 200
    assert (tmp_path / "grid.png").stat().st_size < 16 * 2**20


@pytest.mark.slow  # 72 panels
def test_a_model_view_of_72_panels_shrinks_them_to_keep_the_figure_in_bounds(
    long_labels: list[str],
) -> None:
    fig = grid_figure(
        softmax_rows((72, 64, 64)),
        long_labels[:64],
        panel_titles=[f"L{h // 12} H{h % 12}" for h in range(72)],
        title="every layer",
        columns=12,
    )
    assert max(fig.get_size_inches()) <= 30
    rows = {round(ax.get_position().y0, 3) for ax in panels(fig)}
    assert len(rows) == 6  # one row of 12 panels per layer
    assert not tick_label_problems(fig, min_pt=7)


def test_a_long_title_wraps_instead_of_widening_the_image(tmp_path: Path) -> None:
    title = "a-model-with-a-very-long-name/" * 30 + " · layer 3 · head 5"
    labels = ["a-label-cut-at-twenty-characters", "b", "c"]  # a wide left margin
    save_figure(heatmap_figure(np.eye(3), labels, title=title), tmp_path / "t.png", dpi=100)
    save_figure(heatmap_figure(np.eye(3), labels, title="short"), tmp_path / "s.png", dpi=100)
    with Image.open(tmp_path / "t.png") as wrapped, Image.open(tmp_path / "s.png") as short:
        assert wrapped.width <= short.width * 1.1
    ax = panels(heatmap_figure(np.eye(3), list("abc"), title=title))[0]
    assert 2 <= ax.get_title().count("\n") + 1 <= 3
    assert ax.get_title().endswith("…")


@pytest.mark.slow  # 3 image files
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_odd_characters_in_labels_and_titles_save_in_every_format(
    tmp_path: Path, suffix: str
) -> None:
    # U+FEFF (a byte-order mark) crashed the PDF writer, U+FFFE made the SVG invalid XML,
    # a lone surrogate (an undecodable byte) crashed FreeType
    odd = ["\ufeffbom", "non\ufffechar", "caf\udcff", "\u202eevil", "tab\t"]
    fig = grid_figure(softmax_rows((2, 5, 5)), odd, panel_titles=odd[:2], title="".join(odd))
    save_figure(fig, tmp_path / f"odd{suffix}")
    if suffix == ".svg":
        text = ET.parse(tmp_path / "odd.svg").getroot().itertext()
        drawn = "".join(text)
        # the one rule (attnviz.render.cells.visible), the terminal's: shown, never obeyed
        assert "bom" in drawn and "U+FFFE" in drawn and "U+DCFF" in drawn and "\\t" in drawn
        assert "\u202e" not in drawn and "U+202E" in drawn and "U+FEFF" in drawn
    fig = heatmap_figure(softmax_rows((5, 5)), odd, title="".join(odd))
    save_figure(fig, tmp_path / f"odd{suffix}")


def text_outside_the_image(fig: Figure) -> list[str]:
    """Sides of the figure that something drawn crosses: the layout is computed, not
    cropped to fit, so the extent of everything drawn must lie inside the image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())  # inches
    width, height = fig.get_size_inches()
    tolerance = 0.01
    sides = {
        "left": drawn.x0 < -tolerance,
        "bottom": drawn.y0 < -tolerance,
        "right": drawn.x1 > width + tolerance,
        "top": drawn.y1 > height + tolerance,
    }
    return [side for side, crossed in sides.items() if crossed]


@pytest.mark.slow  # many figures drawn and measured, in every theme
@pytest.mark.parametrize(
    "labels",
    [TOKENS, ["a-very-long-first-key-label", "b", "c"], ["猫", "は", "😀", "Ж"], ["x" * 40] * 5],
    ids=["tokens", "long-first", "unicode", "long"],
)
def test_nothing_is_cut_off_at_the_edges(labels: list[str]) -> None:
    n = len(labels)
    title = "a title that is rather long for a small heatmap · layer 11 · head 11"
    for theme in THEMES:
        assert not text_outside_the_image(
            heatmap_figure(softmax_rows((n, n)), labels, title=title, theme=theme, annotate=True)
        )
    titles = [f"L{h} H{h}" for h in range(5)]
    assert not text_outside_the_image(
        grid_figure(softmax_rows((5, n, n)), labels, panel_titles=titles, title=title)
    )
    assert not text_outside_the_image(
        heatmap_figure(softmax_rows((n, n)) * 1e-4, labels, title="tiny weights")
    )


# ---------------------------------------------------------------- grids drawn straight to pixels


def grid_pngs(tmp_path: Path, heads: int = 4, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
    """The same grid as PNG through a Figure and through save_grid's pixels, as arrays."""
    n = len(TOKENS)
    matrices = softmax_rows((heads, n, n))
    options: dict = {
        "panel_titles": [f"head {h}" for h in range(heads)],
        "title": "bert-base · layer 2",
        **kwargs,
    }
    transparent = bool(options.pop("transparent", False))
    figure_png, pixels_png = tmp_path / "figure.png", tmp_path / "pixels.png"
    save_figure(
        grid_figure(matrices, TOKENS, **options), figure_png, dpi=100, transparent=transparent
    )
    save_grid(matrices, TOKENS, pixels_png, **options, dpi=100, transparent=transparent)
    with Image.open(figure_png) as a, Image.open(pixels_png) as b:
        assert a.mode == b.mode
        return np.asarray(a, dtype=float), np.asarray(b, dtype=float)


@pytest.mark.parametrize(
    "options",
    [{}, {"theme": "dark"}, {"annotate": True}, {"cmap": "magma", "columns": 1}],
    ids=["light", "dark", "annotated", "one-column"],
)
def test_grid_png_pixels_match_the_figure(tmp_path: Path, options: dict) -> None:
    """save_grid draws a PNG without a Figure; it must be the picture the Figure draws:
    the same size, the same cells and frames, text anti-aliased a little differently."""
    figure, pixels = grid_pngs(tmp_path, **options)
    assert figure.shape == pixels.shape
    differing = np.abs(figure - pixels).max(axis=2) > 32
    assert np.abs(figure - pixels).mean() < 4
    assert differing.mean() < 0.04  # glyph edges only


def test_grid_png_keeps_transparency(tmp_path: Path) -> None:
    figure, pixels = grid_pngs(tmp_path, transparent=True)
    assert figure.shape == pixels.shape and pixels.shape[2] == 4
    assert pixels[..., 3].min() == 0 and pixels[..., 3].max() == 255
    assert np.abs(figure[..., 3] - pixels[..., 3]).mean() < 4


def test_grid_svg_keeps_text_as_text(tmp_path: Path) -> None:
    n = len(TOKENS)
    path = tmp_path / "grid.svg"
    save_grid(softmax_rows((2, n, n)), TOKENS, path, panel_titles=["h0", "h1"], title="t")
    assert "R&amp;D" in path.read_text(encoding="utf-8")


def test_grid_png_refuses_too_many_pixels_before_drawing(tmp_path: Path) -> None:
    n = len(TOKENS)
    with pytest.raises(BadInput, match=r"at dpi 5000, .*: use dpi \d+ or less"):  # Python words
        save_grid(
            softmax_rows((2, n, n)),
            TOKENS,
            tmp_path / "big.png",
            panel_titles=["h0", "h1"],
            title="t",
            dpi=5000,
        )
    assert not (tmp_path / "big.png").exists()


@pytest.mark.slow  # subprocess
def test_grid_png_needs_no_figure_api(tmp_path: Path) -> None:
    script = (
        "import sys, numpy as np, warnings\n"
        "from pathlib import Path\n"
        "from attnviz.render.saving import save_grid\n"
        "warnings.simplefilter('error')\n"
        "save_grid(np.full((2, 3, 3), 1 / 3), ['猫', '😀', 'c'], "
        f"Path({str(tmp_path / 'x.png')!r}), panel_titles=['頭 0', 'b'], title='😀 t')\n"
        "for name in ('matplotlib.figure', 'matplotlib.axes', 'matplotlib.backends.backend_agg',"
        " 'matplotlib.pyplot', 'torch'):\n"
        "    assert name not in sys.modules, name\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "x.png").is_file()


@pytest.mark.parametrize("channels", [3, 4])
def test_png_encoder_is_lossless(channels: int) -> None:
    import io

    from attnviz.render.png import encode_png

    pixels = np.random.default_rng(0).integers(0, 256, (37, 53, channels), dtype=np.uint8)
    pixels[10:20] = pixels[10]  # repeated rows, as a heatmap's cells make
    buffer = io.BytesIO()
    encode_png(pixels, buffer, 150)
    with Image.open(io.BytesIO(buffer.getvalue())) as image:
        assert image.mode == ("RGB" if channels == 3 else "RGBA")
        assert round(image.info["dpi"][0]) == 150
        assert np.array_equal(np.asarray(image), pixels)

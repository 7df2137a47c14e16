"""A grid of heatmaps drawn straight to pixels with numpy, for PNG files.

A grid's geometry is fixed to the inch before anything is drawn
(`attnviz.render.layout.plan_grid`), so a PNG needs no Figure: the panels are the
colormap's colours repeated to their cells' pixels (the 7 × 7 matrix goes through the
colormap, never a 2,000-pixel resampling of it), the frames, ticks and colour bar are
filled rectangles, and the text is drawn by matplotlib's own FreeType fonts (with the
same fallbacks) and blended in. Building the Figure instead imports matplotlib's Figure
API (about as long as `import matplotlib` itself) and lays out hundreds of artists; that
path remains for SVG and PDF, whose text stays text.

The picture is the one `grid_figure` draws, to a pixel or so: same layout, fonts, colours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import matplotlib
import numpy as np
from matplotlib.colors import to_rgb, to_rgba

from attnviz import lexicon
from attnviz.render.labels import axis_name
from attnviz.render.layout import (
    GRID_TICK_PT,
    KEY_ROTATION,
    MASKED_KEY_PT,
    MASKED_SWATCH_IN,
    MASKED_TEXT,
    PAD_IN,
    GridPlan,
    bar_ticks,
    masked_key_in,
)
from attnviz.render.style import (
    THEME_COLOURS,
    colour_norm,
    contrast_text,
    font_family,
    font_properties,
    ft_font,
    hinting,
)


@dataclass(frozen=True)
class _Glyphs:
    """One line of text drawn by FreeType: its coverage, and where the pen started."""

    alpha: np.ndarray  # (h, w) float32, 0..1
    left: float  # the bitmap's left edge, right of the pen, in pixels
    top: float  # the bitmap's top edge, above the baseline, in pixels


class _Canvas:
    """An RGB (or RGBA, when transparent) image of `width_in` × `height_in` at `dpi`.
    Positions are in inches from the bottom left, as in a Figure."""

    def __init__(
        self, width_in: float, height_in: float, dpi: float, face: str, transparent: bool
    ) -> None:
        self.dpi = dpi
        self.width, self.height = int(width_in * dpi), int(height_in * dpi)  # as Agg sizes it
        self.channels = 4 if transparent else 3
        self.pixels = np.empty((self.height, self.width, self.channels), dtype=np.uint8)
        if self.height:  # one row filled, then copied down: far faster than a broadcast
            self.pixels[0] = 0 if transparent else _bytes(face)
            self.pixels[1:] = self.pixels[0]
        self.face = np.array(to_rgb(face), dtype=np.float32)

    def ink(self, colour: str) -> np.ndarray:
        """`colour` as this canvas's bytes: RGB, or opaque RGBA."""
        return np.append(_bytes(colour), np.uint8(255))[: self.channels]

    def px(self, x_in: float) -> float:
        return x_in * self.dpi

    def row(self, y_in: float) -> float:
        """The pixel row (from the top) of height `y_in` (from the bottom)."""
        return self.height - y_in * self.dpi

    def fill(self, x0: float, r0: float, x1: float, r1: float, colour: np.ndarray) -> None:
        """Fill the pixels between columns x0..x1 and rows r0..r1 (rounded) with `colour`."""
        c0, c1 = max(0, round(x0)), min(self.width, round(x1))
        q0, q1 = max(0, round(r0)), min(self.height, round(r1))
        if c1 > c0 and q1 > q0:
            self.pixels[q0:q1, c0:c1] = colour

    def band_x(self, x: float, r0: float, r1: float, width: float, colour: np.ndarray) -> None:
        """A vertical line `width` pixels wide on column x, snapped as Agg snaps strokes."""
        w = max(1, round(width))
        c0 = math.floor(x + 0.5) - w // 2
        self.fill(c0, r0, c0 + w, r1, colour)

    def band_y(self, r: float, x0: float, x1: float, width: float, colour: np.ndarray) -> None:
        """A horizontal line `width` pixels wide on row r, snapped as Agg snaps strokes."""
        w = max(1, round(width))
        q0 = math.floor(r + 0.5) - w // 2
        self.fill(x0, q0, x1, q0 + w, colour)

    def blend(self, alpha: np.ndarray, top: int, left: int, rgb: np.ndarray) -> None:
        """Paint `rgb` over the canvas with coverage `alpha`, its top left at (top, left)."""
        h, w = alpha.shape
        q0, c0 = max(0, top), max(0, left)
        q1, c1 = min(self.height, top + h), min(self.width, left + w)
        if q1 <= q0 or c1 <= c0:
            return
        a = alpha[q0 - top : q1 - top, c0 - left : c1 - left, None]
        region = self.pixels[q0:q1, c0:c1].astype(np.float32) / 255
        if self.channels == 3:
            out = region + (rgb - region) * a
        else:
            below = region[..., 3:]
            cover = a + below * (1 - a)
            colour = (rgb * a + region[..., :3] * below * (1 - a)) / np.maximum(cover, 1e-6)
            out = np.concatenate([colour, cover], axis=2)
        self.pixels[q0:q1, c0:c1] = np.round(out * 255).astype(np.uint8)


def _bytes(colour: str) -> np.ndarray:
    return np.round(np.array(to_rgb(colour)) * 255).astype(np.uint8)


class _Writer:
    """Text drawn on a canvas the way matplotlib's Text lays it out: aligned on its box
    (the width, and a line at least as tall as "lp"), then turned about the anchor."""

    def __init__(self, canvas: _Canvas) -> None:
        self.canvas = canvas
        self.antialiased = bool(matplotlib.rcParams["text.antialiased"])
        self.flags = hinting()

    @cache  # noqa: B019 (one writer per image)
    def _glyphs(self, text: str, size: float, family: tuple[str, ...], angle: float) -> _Glyphs:
        ft = ft_font(font_properties(size, list(family) or None), self.canvas.dpi)
        ft.set_text(text, angle, flags=self.flags)
        ft.draw_glyphs_to_bitmap(antialiased=self.antialiased)
        alpha = np.asarray(ft.get_image(), dtype=np.float32) / 255
        _, height = ft.get_width_height()
        y_max = (height - ft.get_descent()) / 64
        return _Glyphs(alpha, ft.get_bitmap_offset()[0] / 64, y_max + 1)

    @cache  # noqa: B019
    def _box(self, text: str, size: float, family: tuple[str, ...]) -> tuple[float, float, float]:
        """Width, line height and descent in pixels, as matplotlib's Text lays out a line."""
        ft = ft_font(font_properties(size, list(family) or None), self.canvas.dpi)
        ft.set_text("lp", 0.0, flags=self.flags)
        lp_h, lp_d = ft.get_width_height()[1] / 64, ft.get_descent() / 64
        ft.set_text(text, 0.0, flags=self.flags)
        w, h = (v / 64 for v in ft.get_width_height())
        return w, max(h, lp_h), max(ft.get_descent() / 64, lp_d)

    def text(
        self,
        text: str,
        x_in: float,
        y_in: float,
        *,
        size: float,
        colour: str,
        family: tuple[str, ...] = (),
        ha: str = "left",
        va: str = "baseline",
        rotation: float = 0.0,
        anchor: bool = True,
    ) -> None:
        """One line of `text` at (x_in, y_in). `anchor`: aligned before turning (matplotlib's
        rotation_mode="anchor"); otherwise the turned box is aligned (its default)."""
        if not text:
            return
        w, h, d = self._box(text, size, family)
        theta = math.radians(rotation)
        cos, sin = math.cos(theta), math.sin(theta)
        if anchor or rotation == 0:
            u = {"left": 0.0, "center": -w / 2, "right": -w}[ha]
            v = {
                "baseline": 0.0,
                "top": -(h - d),
                "bottom": d,
                "center": d - h / 2,
                "center_baseline": -(h - d) / 2,
            }[va]
            pen_x, pen_y = u * cos - v * sin, u * sin + v * cos  # from the anchor, y up
        else:  # turn the box (corners from the pen at 0, 0), then align what it covers
            corners = [(0.0, -d), (w, -d), (w, h - d), (0.0, h - d)]
            xs = [cx * cos - cy * sin for cx, cy in corners]
            ys = [cx * sin + cy * cos for cx, cy in corners]
            pen_x = {"left": -min(xs), "center": -(min(xs) + max(xs)) / 2, "right": -max(xs)}[ha]
            pen_y = {
                "bottom": -min(ys),
                "center": -(min(ys) + max(ys)) / 2,
                "top": -max(ys),
                "baseline": 0.0,
                "center_baseline": -(min(ys) + max(ys)) / 2,
            }[va]
        glyphs = self._glyphs(text, size, family, float(rotation))
        canvas = self.canvas
        left = round(canvas.px(x_in) + pen_x + glyphs.left)
        top = round(canvas.row(y_in) - pen_y - glyphs.top)
        canvas.blend(glyphs.alpha, top, left, np.array(to_rgb(colour), dtype=np.float32))

    def lines(
        self,
        text: str,
        x_in: float,
        y_top_in: float,
        *,
        size: float,
        colour: str,
        family: tuple[str, ...],
    ) -> None:
        """Several lines, centred on x_in, the first one's box top at y_top_in (a title)."""
        _, lp_h, lp_d = self._box("lp", size, family)
        y = y_top_in * self.canvas.dpi  # the baseline, in pixels from the bottom
        for i, line in enumerate(text.split("\n")):  # spaced as matplotlib's Text spaces them
            _, h, d = self._box(line or " ", size, family)
            y -= (h - d) if i == 0 else max((lp_h - lp_d) * 1.2, (h - d) * 1.2)
            self.text(
                line,
                x_in,
                y / self.canvas.dpi,
                size=size,
                colour=colour,
                family=family,
                ha="center",
            )
            y -= d


def grid_pixels(plan: GridPlan, dpi: float, *, transparent: bool = False) -> np.ndarray:
    """The grid of `plan` as (height, width, 3) RGB pixels, or RGBA when `transparent`."""
    rc = matplotlib.rcParams
    theme = THEME_COLOURS[plan.theme]
    canvas = _Canvas(plan.fig_w, plan.fig_h, dpi, theme["face"], transparent)
    fg, fg_bytes = theme["text"], canvas.ink(theme["text"])
    writer = _Writer(canvas)
    family = tuple(font_family())
    values, g = plan.values, plan.g
    heads, n, m = values.shape  # n queries (rows), m keys (columns)
    points = dpi / 72  # pixels in a point

    # The colours of every cell, blended with the background where a colour is not opaque.
    colormap = matplotlib.colormaps[plan.cmap]
    norm = colour_norm(plan.top, plan.scale)
    rgba = plan.colours(colormap, norm)  # (H, T, T, 4): the theme's grey where masked
    if canvas.channels == 3:
        alpha = rgba[..., 3:].astype(np.float32) / 255
        mixed = rgba[..., :3] * alpha + canvas.face * 255 * (1 - alpha)
        cells = np.round(mixed).astype(np.uint8)
    else:
        cells = rgba

    line_px = rc["axes.linewidth"] * points
    tick_len, tick_w = rc["xtick.major.size"] * points, rc["xtick.major.width"] * points
    tick_gap = (rc["xtick.major.size"] + rc["xtick.major.pad"]) * points
    positions = list(range(0, n, g.step))
    shown = {i: plan.tokens[i] for i in positions}
    key_positions = list(range(0, m, g.keys_step))
    key_shown = {i: plan.columns[i] for i in key_positions}
    title_pad = rc["axes.titlepad"] / 72
    for head in range(heads):
        left_in, bottom_in = plan.panel(head)
        x0, x1 = canvas.px(left_in), canvas.px(left_in + g.side)
        r0, r1 = canvas.row(bottom_in + g.side), canvas.row(bottom_in)
        # Each cell covers the pixels whose centres fall in it, as nearest-neighbour does.
        cols = np.diff(np.round(np.linspace(x0, x1, m + 1)).astype(int))
        rows = np.diff(np.round(np.linspace(r0, r1, n + 1)).astype(int))
        block = np.repeat(np.repeat(cells[head], rows, axis=0), cols, axis=1)
        c0, q0 = round(x0), round(r0)
        canvas.pixels[q0 : q0 + block.shape[0], c0 : c0 + block.shape[1]] = block
        # The frame, centred on the panel's edges.
        canvas.band_y(r0, x0 - line_px / 2, x1 + line_px / 2, line_px, fg_bytes)
        canvas.band_y(r1, x0 - line_px / 2, x1 + line_px / 2, line_px, fg_bytes)
        canvas.band_x(x0, r0 - line_px / 2, r1 + line_px / 2, line_px, fg_bytes)
        canvas.band_x(x1, r0 - line_px / 2, r1 + line_px / 2, line_px, fg_bytes)
        cell_w, cell_h = (x1 - x0) / m, (r1 - r0) / n
        writer.text(
            plan.titles[head],
            left_in + g.side / 2,
            bottom_in + g.side + title_pad,
            size=9,
            colour=fg,
            family=family,
            ha="center",
        )
        if head % plan.n_cols == 0:  # queries left of the row
            for i in positions:
                y = r0 + (i + 0.5) * cell_h
                canvas.band_y(y, x0 - tick_len, x0, tick_w, fg_bytes)
                writer.text(
                    shown[i],
                    left_in - tick_gap / dpi,
                    (canvas.height - y) / dpi,
                    size=GRID_TICK_PT,
                    colour=fg,
                    family=family,
                    ha="right",
                    va="center_baseline",
                )
        if head + plan.n_cols >= heads:  # keys under a panel with none below it
            for i in key_positions:
                x = x0 + (i + 0.5) * cell_w
                canvas.band_x(x, r1, r1 + tick_len, tick_w, fg_bytes)
                writer.text(
                    key_shown[i],
                    x / dpi,
                    bottom_in - tick_gap / dpi,
                    size=GRID_TICK_PT,
                    colour=fg,
                    family=family,
                    ha="right",
                    va="top",
                    rotation=KEY_ROTATION,
                )
        if plan.write_values:
            hidden = plan.masked[head] if plan.masked is not None else None
            on_masked = contrast_text(to_rgba(theme["masked"]))
            for (row, col), value in np.ndenumerate(values[head]):
                if hidden is not None and hidden[row, col]:
                    writer.text(
                        MASKED_TEXT,
                        (x0 + (col + 0.5) * cell_w) / dpi,
                        (canvas.height - r0 - (row + 0.5) * cell_h) / dpi,
                        size=6.0,
                        colour=on_masked,
                        family=family,
                        ha="center",
                        va="center",
                    )
                    continue
                if not math.isfinite(value):
                    continue
                writer.text(
                    f"{value:.2f}",
                    (x0 + (col + 0.5) * cell_w) / dpi,
                    (canvas.height - r0 - (row + 0.5) * cell_h) / dpi,
                    size=6.0,
                    colour=contrast_text(colormap(norm(value))),
                    family=family,
                    ha="center",
                    va="center",
                )

    _colour_bar(canvas, writer, plan, colormap, fg)  # named in plan.lang
    if plan.masked is not None and plan.masked.any():  # what the grey cells mean
        text = lexicon.label(plan.lang, "masked_short")
        swatch, right, bottom = masked_key_in(text, plan.fig_w)
        x0, r1 = canvas.px(swatch), canvas.row(bottom)
        x1, r0 = canvas.px(swatch + MASKED_SWATCH_IN), canvas.row(bottom + MASKED_SWATCH_IN)
        canvas.fill(x0, r0, x1, r1, fg_bytes)
        edge = max(1.0, 0.5 * points)
        canvas.fill(x0 + edge, r0 + edge, x1 - edge, r1 - edge, canvas.ink(theme["masked"]))
        writer.text(text, right, bottom, size=MASKED_KEY_PT, colour=fg, family=family,
                    ha="right", va="bottom")  # fmt: skip
    grid_h = plan.grid_h
    middle_x = g.left + (plan.fig_w - g.left - g.right) / 2
    key = axis_name(plan.axes[1], g.keys_step, plan.lang)
    query = axis_name(plan.axes[0], g.step, plan.lang)
    writer.text(key, middle_x, PAD_IN, size=10.0, colour=fg, ha="center", va="bottom")
    writer.text(
        query,
        PAD_IN,
        g.bottom + grid_h / 2,
        size=10.0,
        colour=fg,
        ha="left",
        va="center",
        rotation=90,
        anchor=False,  # as a Figure's supylabel: the turned box is aligned
    )
    writer.lines(g.title, plan.fig_w / 2, plan.fig_h - PAD_IN, size=13.0, colour=fg, family=family)
    return canvas.pixels


def _colour_bar(
    canvas: _Canvas, writer: _Writer, plan: GridPlan, colormap: object, fg: str
) -> None:
    """The colour bar right of the grid: every level of the colormap from 0 (bottom) to the
    top of the scale, an outline, ticks and their labels on the right, and its name."""
    rc = matplotlib.rcParams
    dpi = canvas.dpi
    points = dpi / 72
    fg_bytes = canvas.ink(fg)
    left_in, bottom_in, width_in, height_in = plan.bar
    x0, x1 = canvas.px(left_in), canvas.px(left_in + width_in)
    r0, r1 = canvas.row(bottom_in + height_in), canvas.row(bottom_in)
    q0, q1, c0, c1 = round(r0), round(r1), round(x0), round(x1)
    levels = getattr(colormap, "N", 256)
    lut = colormap(np.linspace(0, 1, levels), bytes=True)  # type: ignore[operator]
    share = (q1 - 0.5 - np.arange(q0, q1)) / max(1, q1 - q0)  # each row's height in the bar
    shade = np.asarray(colour_norm(plan.top, plan.scale)(share * plan.top))  # its colour's place
    colours = lut[np.clip((shade * levels).astype(int), 0, levels - 1)]
    if canvas.channels == 3:
        colours = colours[:, :3]
    canvas.pixels[q0:q1, c0:c1] = colours[:, None, :]
    line_px = rc["axes.linewidth"] * points
    canvas.band_y(r0, x0 - line_px / 2, x1 + line_px / 2, line_px, fg_bytes)
    canvas.band_y(r1, x0 - line_px / 2, x1 + line_px / 2, line_px, fg_bytes)
    canvas.band_x(x0, r0 - line_px / 2, r1 + line_px / 2, line_px, fg_bytes)
    canvas.band_x(x1, r0 - line_px / 2, r1 + line_px / 2, line_px, fg_bytes)

    ticks, texts, offset = bar_ticks(plan.top, height_in)
    size = font_properties(rc["ytick.labelsize"]).get_size_in_points()
    tick_len, tick_w = rc["ytick.major.size"] * points, rc["ytick.major.width"] * points
    label_x = left_in + width_in + (rc["ytick.major.size"] + rc["ytick.major.pad"]) / 72
    widest = 0.0
    for tick, text in zip(ticks, texts, strict=True):
        if tick > plan.top * (1 + 1e-9):
            continue
        y_in = bottom_in + height_in * tick / plan.top
        canvas.band_y(canvas.row(y_in), x1, x1 + tick_len, tick_w, fg_bytes)
        writer.text(text, label_x, y_in, size=size, colour=fg, va="center_baseline")
        widest = max(widest, writer._box(text, size, ())[0] / dpi)
    if offset:
        writer.text(offset, left_in + width_in, bottom_in + height_in + 0.05, size=size, colour=fg)
    name_size = font_properties(rc["axes.labelsize"]).get_size_in_points()
    writer.text(
        lexicon.label(plan.lang, plan.axes[2]),
        label_x + widest + rc["axes.labelpad"] / 72,
        bottom_in + height_in / 2,
        size=name_size,
        colour=fg,
        ha="center",
        va="top",
        rotation=90,
    )

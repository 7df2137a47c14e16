"""Figures and grids written as PNG, SVG or PDF files, all or nothing.

A figure made here is closed after it is written. A grid's PNG is drawn straight to
pixels (`attnviz.render.raster`) from its plan, without the Figure API; its SVG and PDF
go through `attnviz.render.figures.grid_figure` and keep their text as text.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.output import IMAGE_SUFFIXES, atomic_write
from attnviz.render.layout import AXES, crop_options, plan_grid
from attnviz.render.png import encode_png
from attnviz.render.style import DEFAULT_CMAP, quiet_fonts

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _image_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in IMAGE_SUFFIXES:
        shown = repr(path.suffix) if path.suffix else "no extension"
        raise BadInput(
            f"cannot save an image as {path.name} ({shown}): "
            f"end the file name with {', '.join(IMAGE_SUFFIXES)}"
        )
    return suffix[1:]


def _release(fig: Figure) -> None:
    """Close the figure. Figures made here are not registered anywhere, so only one that
    pyplot made (and registered) needs closing; pyplot is never imported for this."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)


def _check_pixels(fig: Figure, dpi: float) -> None:
    """Refuse an image too big to draw in bounded memory, before it is drawn."""
    width_in, height_in = (float(v) for v in fig.get_size_inches())
    try:
        _check_size(width_in, height_in, dpi)
    except BadInput:
        _release(fig)
        raise


def _check_size(width_in: float, height_in: float, dpi: float) -> None:
    from attnviz.limits import MAX_IMAGE_PIXELS

    pixels = width_in * dpi * height_in * dpi
    if pixels > MAX_IMAGE_PIXELS:
        fits = max(1, int((MAX_IMAGE_PIXELS / (width_in * height_in)) ** 0.5))
        raise BadInput(
            f"the image would be {width_in * dpi:,.0f} × {height_in * dpi:,.0f} pixels at "
            f"{{dpi}} {dpi}, more than attnviz draws ({MAX_IMAGE_PIXELS // 10**6} million): use "
            f"{{dpi}} {fits} or less, or show fewer heads",
            param="dpi",
        )


_Z_RLE = 3  # zlib's Z_RLE strategy


def _check_dpi(dpi: object) -> None:
    if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not dpi > 0:
        raise BadInput(
            f"{{dpi}} must be a positive number, got {dpi}: try 200 for slides", param="dpi"
        )


def save_grid(
    matrices: np.ndarray,
    labels: Sequence[str],
    path: Path,
    *,
    panel_titles: Sequence[str],
    title: str,
    cmap: str = DEFAULT_CMAP,
    theme: str = "light",
    annotate: bool = False,
    columns: int | None = None,
    dpi: int = 200,
    transparent: bool = False,
    lang: str = "en",
    masked: np.ndarray | None = None,
    key_labels: Sequence[str] | None = None,
    axes: tuple[str, str, str] = AXES,
    scale: str = "linear",
) -> None:
    """Write the grid that `grid_figure` draws to `path` (PNG, SVG or PDF), all or nothing.

    A PNG is drawn straight to pixels (attnviz.render.raster) from the same layout, without
    building a Figure; SVG and PDF go through `grid_figure` and keep their text as text."""
    path = Path(path)
    fmt = _image_format(path)
    _check_dpi(dpi)
    options: dict[str, Any] = {
        "panel_titles": panel_titles,
        "title": title,
        "cmap": cmap,
        "theme": theme,
        "annotate": annotate,
        "columns": columns,
        "lang": lang,
        "masked": masked,
        "key_labels": key_labels,
        "axes": axes,
        "scale": scale,
    }
    if fmt != "png":
        from attnviz.render.figures import grid_figure

        save_figure(
            grid_figure(matrices, labels, **options), path, dpi=dpi, transparent=transparent
        )
        return
    from attnviz.render.raster import grid_pixels

    plan = plan_grid(matrices, labels, **options)
    _check_size(plan.fig_w, plan.fig_h, dpi)
    with quiet_fonts():
        pixels = grid_pixels(plan, dpi, transparent=transparent)
    with atomic_write(path, "wb") as handle:
        encode_png(pixels, handle, dpi)


def save_figure(fig: Figure, path: Path, *, dpi: int = 200, transparent: bool = False) -> None:
    """Write `fig` to `path` as PNG, SVG or PDF (chosen by the suffix), all or nothing.

    SVG keeps text as text (searchable, editable in slide software); PDF embeds
    TrueType fonts (no Type 3 fonts, which some publishers reject). SVG and PDF
    carry no creation date, so the same figure gives the same bytes. The figure
    is closed afterwards, also when writing fails.
    """
    import matplotlib

    path = Path(path)
    fmt = _image_format(path)
    _check_dpi(dpi)
    _check_pixels(fig, dpi)  # SVG and PDF embed the heatmaps as images at this dpi too
    metadata: dict[str, str | None] = {}
    if fmt == "svg":
        metadata = {"Date": None}
    elif fmt == "pdf":
        metadata = {"CreationDate": None}
    # Text stays text in SVG; PDF embeds TrueType; SVG ids do not change between runs.
    rc_vector = matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "attnviz", "pdf.fonttype": 42}
    )
    options: dict[str, Any] = {
        "dpi": dpi,
        "transparent": transparent,
        "facecolor": "none" if transparent else fig.get_facecolor(),
    }
    try:
        with quiet_fonts(), rc_vector, atomic_write(path, "wb") as handle:
            if fmt == "png" and fig.get_layout_engine() is None:
                _write_png(fig, handle, options)
            else:
                fig.savefig(handle, format=fmt, **crop_options(fig), **options, metadata=metadata)
    finally:
        _release(fig)


def _write_png(fig: Figure, handle: IO[bytes], options: dict[str, Any]) -> None:
    """`fig` as PNG: drawn by Agg, encoded by Pillow as RGB unless transparent, with
    zlib's run-length strategy, which suits heatmaps (rows of equal pixels): about half
    the time of matplotlib's RGBA at the default setting, for files of similar size."""
    from PIL import Image

    raw = io.BytesIO()
    fig.savefig(raw, format="rgba", **options)
    data = np.frombuffer(raw.getbuffer(), dtype=np.uint8)  # the pixels, not a copy
    dpi = options["dpi"]
    width = int(fig.get_figwidth() * dpi)  # as Agg sizes its canvas
    height = data.size // (4 * width)
    image = Image.frombuffer("RGBA", (width, height), data, "raw", "RGBA", 0, 1)
    if not options["transparent"]:
        image = image.convert("RGB")
    image.save(handle, format="png", dpi=(dpi, dpi), compress_type=_Z_RLE)

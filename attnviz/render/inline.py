"""A matplotlib Figure that a notebook shows as an image, with no `%matplotlib inline`.

Every figure attnviz draws is an `InlineFigure`: a plain `matplotlib.figure.Figure`
(everything that takes a Figure takes it) that also answers a notebook's `_repr_png_`,
so a cell ending in `a.figure("heads", layer=0)` or `view.figure()` shows the picture in
a fresh kernel instead of `<Figure size 1245x966 with 4 Axes>`. It is made without
pyplot, so it is registered nowhere and nothing has to close it; where matplotlib's
inline backend is on, the notebook draws it through that backend instead (one image,
never two).

This module imports matplotlib's Figure API; the renderers import it inside the
functions that build figures.
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

from attnviz.render.layout import crop_options
from attnviz.render.style import quiet_fonts

__all__ = ["NOTEBOOK_DPI", "InlineFigure", "figure_png"]

NOTEBOOK_DPI = 100  # a notebook's image: the size matplotlib's inline backend gives


def figure_png(fig: Figure, *, dpi: int = NOTEBOOK_DPI) -> bytes:
    """`fig` as PNG bytes, for a notebook's rich display."""
    buffer = io.BytesIO()
    with quiet_fonts():
        fig.savefig(buffer, format="png", dpi=dpi, **crop_options(fig))
    return buffer.getvalue()


class InlineFigure(Figure):
    """A matplotlib Figure that shows itself in a notebook (`_repr_png_`)."""

    def _repr_png_(self) -> bytes:
        return figure_png(self)

"""What a result that draws itself shares: a terminal, a notebook and an image file.

`Drawn` is the base of the views, a query's row, a head ranking and a comparison;
`save_image` is the one save path (the output checked, then the image written all or
nothing), used by `Drawn.save` and `HeadStats.save`. The renderers are imported
inside the methods, only when drawing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from attnviz.output import IMAGE_SUFFIXES, ImageStyle, as_path, check_output

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["Drawn", "DrawnView", "save_image", "write_figure"]


def save_image(
    path: str | Path, style: ImageStyle, write: Callable[[Path, ImageStyle], None]
) -> Path:
    """Write an image (.png, .svg or .pdf, by the suffix) to `path`, all or nothing.

    The path and `style` are checked before any drawing; `write(path, style)` draws it
    (`write_figure`, or a renderer that draws straight to pixels).
    """
    path = as_path(path)
    check_output(path, IMAGE_SUFFIXES, style)
    write(path, style)
    return path


def write_figure(figure: Figure, path: Path, style: ImageStyle) -> None:
    """Write a matplotlib figure to `path` atomically, at the style's dpi and transparency."""
    from attnviz.render.saving import save_figure

    save_figure(figure, path, dpi=style.dpi, transparent=style.transparent)


class Drawn:
    """Drawing in a terminal (`rich.print`), a notebook (`_repr_html_`: what the terminal
    prints, as HTML) and an image file (`figure`, `save`).

    A view (`DrawnView`: a heatmap first of all) also gives a notebook its image; a
    table (a row's keys, a head ranking, a comparison) gives only its HTML, and a cell
    ending in its `figure()` shows the picture.
    """

    title: str
    default_cmap: ClassVar[str] = "viridis"  # what `save` draws in unless told

    def _renderable(self) -> Any:
        raise NotImplementedError

    def figure(
        self, *, cmap: str = "viridis", theme: str = "light", annotate: bool = False
    ) -> Figure:
        """The result as a matplotlib Figure (not registered with pyplot)."""
        raise NotImplementedError

    def save(
        self,
        path: str | Path,
        *,
        dpi: int = 200,
        cmap: str | None = None,
        theme: str = "light",
        transparent: bool = False,
        annotate: bool = False,
    ) -> Path:
        """Write the result as an image (.png, .svg or .pdf, by the suffix), all or nothing;
        `cmap` None is the result's own colours (`default_cmap`)."""
        style = ImageStyle(dpi, cmap or self.default_cmap, theme, transparent, annotate)
        return save_image(path, style, self._write)

    def _write(self, path: Path, style: ImageStyle) -> None:
        figure = self.figure(cmap=style.cmap, theme=style.theme, annotate=style.annotate)
        write_figure(figure, path, style)

    def __repr__(self) -> str:
        values: Any = getattr(self, "matrix", getattr(self, "matrices", None))
        shape = "" if values is None else ": " + "×".join(str(n) for n in np.shape(values))
        return f"<{type(self).__name__} {self.title!r}{shape}>"

    def _repr_html_(self) -> str:
        """A notebook cell that ends in a result shows what `rich.print` prints, as HTML."""
        from attnviz.render.notebook import rich_html

        return rich_html(self._renderable())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._renderable()


class DrawnView(Drawn):
    """A view (a heatmap, a grid of them): what `Drawn` draws, and a notebook's image too."""

    def _repr_png_(self) -> bytes:
        """A notebook shows the view as HTML (`_repr_html_`) and as an image, for a notebook
        (or a viewer) that runs no script."""
        from attnviz.render.inline import figure_png

        return figure_png(self.figure())

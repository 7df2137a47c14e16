"""How an image looks: themes, colour scales and fonts.

Colours and fonts are set on each artist (no global style is changed): the themes'
background and text colours, the font family with fallbacks for glyphs the default font
lacks, and the FreeType fonts and hinting with which text is measured and drawn the way
matplotlib's Agg renderer draws it. Only matplotlib's core is imported here (no Figure API).
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib import font_manager
from matplotlib.font_manager import FontProperties

from attnviz.errors import BadInput

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Normalize
    from matplotlib.ft2font import FT2Font

DEFAULT_CMAP = "viridis"
THEMES: tuple[str, ...] = ("light", "dark")

# Background and text colours of each theme.
# "masked": the neutral grey of a cell the model could not see (a decoder's future keys),
# distinct from every colormap's zero and from the page's background.
THEME_COLOURS = {
    "light": {"face": "#ffffff", "text": "#222222", "masked": "#d9d9d9"},
    "dark": {"face": "#161a1f", "text": "#e8e8e8", "masked": "#4a4f57"},
}


# Fonts tried, in this order, for glyphs missing from the default font. Only
# those installed are used; colour-bitmap emoji fonts are left out because
# FreeType cannot scale them.
_FALLBACK_FONTS = (
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
    "Noto Sans Devanagari",
    "Noto Sans Thai",
    "Noto Emoji",
    "Noto Sans Symbols 2",
    "Arial Unicode MS",
    "Microsoft YaHei",
    "Yu Gothic",
    "Malgun Gothic",
    "Segoe UI Symbol",
    "Segoe UI Emoji",
    "Hiragino Sans",
    "PingFang SC",
    "Apple SD Gothic Neo",
)


def check_theme(theme: str) -> None:
    if theme not in THEMES:
        raise BadInput(f"unknown theme {theme!r}: use one of {', '.join(THEMES)}")


@contextlib.contextmanager
def quiet_fonts() -> Iterator[None]:
    """Silence matplotlib's per-glyph, font-lookup and layout complaints for odd labels."""
    logger = logging.getLogger("matplotlib.font_manager")
    level = logger.level
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*Glyph .* missing from")
        warnings.filterwarnings("ignore", message=r"(?s).*Matplotlib currently does not support")
        # Extreme labels can leave no room to lay out; the image is still written.
        warnings.filterwarnings("ignore", message=r"constrained_layout not applied")
        logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            logger.setLevel(level)


@cache
def _installed_fallbacks() -> tuple[str, ...]:
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return tuple(name for name in _FALLBACK_FONTS if name in installed)


def font_family() -> list[str]:
    """The user's font family followed by the installed fallback fonts, for labels."""
    base = matplotlib.rcParams["font.family"]
    return [*([base] if isinstance(base, str) else base), *_installed_fallbacks()]


def font_properties(size: float | str, family: list[str] | None = None) -> FontProperties:
    return FontProperties(family=family, size=size)


def hinting() -> Any:
    """The glyph-loading flag for rcParams["text.hinting"], as matplotlib's Agg backend
    chooses it (without importing that backend)."""
    from matplotlib import ft2font

    name = {
        "default": "DEFAULT",
        "no_autohint": "NO_AUTOHINT",
        "force_autohint": "FORCE_AUTOHINT",
        "no_hinting": "NO_HINTING",
        True: "FORCE_AUTOHINT",
        False: "NO_HINTING",
        "either": "DEFAULT",
        "native": "NO_AUTOHINT",
        "auto": "FORCE_AUTOHINT",
        "none": "NO_HINTING",
    }.get(matplotlib.rcParams["text.hinting"], "FORCE_AUTOHINT")
    flags = getattr(ft2font, "LoadFlags", None)  # matplotlib >= 3.10
    return getattr(flags, name) if flags is not None else getattr(ft2font, f"LOAD_{name}")


def ft_font(font: FontProperties, dpi: float) -> FT2Font:
    """The FreeType font (with its fallbacks) for `font`, cleared and sized for `dpi`, as
    matplotlib's Agg renderer prepares it."""
    ft = font_manager.get_font(font_manager.fontManager._find_fonts_by_props(font))
    ft.clear()
    ft.set_size(font.get_size_in_points(), dpi)
    return ft


SCALES = ("linear", "sqrt")  # how values map to colours: a pooled view's shares are "sqrt"


def colour_norm(top: float, scale: str = "linear") -> Normalize:
    """Values 0..`top` to colours: linearly, or ("sqrt") by their square root, which lifts
    the small shares of a pooled view (1/n spread evenly over n blocks) off the floor."""
    from matplotlib.colors import Normalize, PowerNorm

    if scale == "sqrt":
        return PowerNorm(gamma=0.5, vmin=0.0, vmax=top)
    return Normalize(vmin=0.0, vmax=top)


def colour_max(values: np.ndarray, vmax: float | None) -> float:
    if vmax is not None:
        if not math.isfinite(vmax) or vmax <= 0:
            raise BadInput(f"colour scale maximum {vmax} is not positive: give a value above 0")
        return float(vmax)
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    return top if top > 0 else 1.0


def contrast_text(rgba: tuple[float, float, float, float]) -> str:
    """Black or white, whichever reads better on a cell of colour rgba (WCAG luminance)."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.179 else "#ffffff"


def style_axes(ax: Axes, fg: str) -> None:
    ax.tick_params(colors=fg, which="both")
    for spine in ax.spines.values():
        spine.set_edgecolor(fg)

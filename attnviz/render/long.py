"""The distance profile of every head: a terminal table and a matplotlib figure.

Takes plain arrays and labels (attnviz.measures.long builds them): `profile` (L, H, bins)
is the mean weight of a (query, key) pair at each distance bin, `sink` (L, H) the share of
queries putting over half their weight on position 0, `kinds` one word per head. The
figure is one heatmap, heads (rows, layer by layer) × distance bins (columns), each row
scaled to its own largest bin so that a head's shape shows whatever its level; matplotlib
is imported inside the function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["profile_figure", "profile_table"]


def _shares(profile: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Each bin's share of a row's weight: mean weight × pairs per query, rows sum to ~1."""
    mass = profile * widths  # (..., bins)
    total = mass.sum(axis=-1, keepdims=True)
    return np.divide(mass, total, out=np.zeros_like(mass), where=total > 0)


def profile_table(
    title: str,
    profile: np.ndarray,
    bin_labels: Sequence[str],
    widths: np.ndarray,
    sink: np.ndarray,
    kinds: Sequence[Sequence[str]],
    layers: Sequence[int],
) -> Any:
    """A rich Table: one row per head of `layers`, the share of its weight at each distance
    (shaded by size), its sink share and its kind."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left", pad_edge=False, box=None)
    table.add_column("layer", justify="right")
    table.add_column("head", justify="right")
    for name in bin_labels:
        table.add_column(name, justify="right")
    table.add_column("sink", justify="right")
    table.add_column("kind")
    shares = _shares(profile, widths)  # (L, H, bins)
    for layer in layers:
        for head in range(profile.shape[1]):
            cells = []
            for value in shares[layer, head]:
                shade = "bold" if value >= 0.5 else "" if value >= 0.1 else "dim"
                cells.append(Text(f"{value:.2f}", style=shade))
            table.add_row(
                str(layer),
                str(head),
                *cells,
                f"{sink[layer, head]:.0%}",
                kinds[layer][head],
            )
    return table


def profile_figure(
    title: str,
    profile: np.ndarray,
    bin_labels: Sequence[str],
    widths: np.ndarray,
    *,
    cmap: str = "viridis",
) -> Figure:
    """Heads (rows: L0 H0, L0 H1, ...) × distance bins, the share of each head's weight."""
    from attnviz.render.inline import InlineFigure

    L, H, B = profile.shape
    shares = _shares(profile, widths).reshape(L * H, B)  # (L·H, bins)
    height = min(30.0, 1.5 + 0.12 * L * H)
    figure = InlineFigure(figsize=(2 + 0.45 * B, height))
    axes = figure.add_subplot()
    image = axes.imshow(shares, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="none")
    axes.set_xticks(range(B), list(bin_labels), rotation=90, fontsize=7)
    step = max(1, H * max(1, L // 30))
    axes.set_yticks(range(0, L * H, step), [f"L{r // H} H{r % H}" for r in range(0, L * H, step)])
    axes.tick_params(axis="y", labelsize=6)
    axes.set_xlabel("query − key distance (pieces)")
    axes.set_title(title, fontsize=9, loc="left")
    figure.colorbar(image, ax=axes, label="share of the head's weight", fraction=0.04)
    figure.tight_layout()
    return figure

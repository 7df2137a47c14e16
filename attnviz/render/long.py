"""The distance profile of every head (a terminal table and a matplotlib figure), and the
pooled page of a long input (`long_page`, drawn by `web/long.js`).

Takes plain arrays and labels (attnviz.measures.long builds them): `profile` (L, H, bins)
is the mean weight of a (query, key) pair at each distance bin, `sink` (L, H) the share of
queries putting over half their weight on position 0, `kinds` one word per head. The
figure is one heatmap, heads (rows, layer by layer) × distance bins (columns), each row
scaled to its own largest bin so that a head's shape shows whatever its level; matplotlib
is imported inside the function.

The page holds the pooled array (L, H, n, n), each matrix quantised against its own largest
block (16 bits up to LONG_PAGE_U16 blocks in all, else 8), deflated and base64-encoded;
`check_long_page` refuses, before any work, more than LONG_PAGE_BLOCKS blocks, naming the
smallest `pool` that fits. The page speaks `lang` ("en" or "pt"): its words are the
lexicon's `long_` labels, carried in its data (`long_texts`); the data's own keys (a head's
kind, "mean" or "max") stay in English.
"""

from __future__ import annotations

import base64
import math
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import BadInput
from attnviz.lexicon import LABELS, label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "LONG_PAGE_BLOCKS",
    "LONG_PAGE_U16",
    "check_long_page",
    "long_page",
    "long_page_title",
    "long_profile_title",
    "long_texts",
    "profile_figure",
    "profile_table",
]

LONG_PAGE_BLOCKS = 3_000_000  # pooled blocks (L·H·n·n) a page holds: a few MB
LONG_PAGE_U16 = 1_000_000  # up to this many blocks, 16 bits a block; above, 8


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
    lang: str = "en",
    width: int = 80,
) -> Any:
    """A rich Table: one row per head of `layers`, the share of its weight at each distance
    in % (shaded by size), its sink share and its kind; its headers and kinds in `lang`.
    Made to fit `width` columns: past it, each distance column is headed by the bin's
    first distance alone (1k for 1,025 and up), and a caption says so."""
    from rich.table import Table
    from rich.text import Text

    from attnviz.render.cells import title_width, visible

    _check_lang(lang)
    shown_kinds = [label(lang, f"long_kind_{kind}") for x in layers for kind in kinds[x]]
    fixed = [label(lang, "col_layer"), label(lang, "col_head"), label(lang, "long_col_sink")]
    fixed_width = sum(len(name) for name in fixed) + max(map(len, shown_kinds), default=4)
    needed = fixed_width + sum(max(len(name), 3) for name in bin_labels)
    needed += len(bin_labels) + len(fixed)  # a space between columns
    headers = list(bin_labels) if needed <= width else [_first_distance(n) for n in bin_labels]
    table = Table(
        title=Text(visible(title, newlines=True), "table.title"),  # Text: never markup
        title_justify="left",
        pad_edge=False,
        box=None,
        padding=(0, 1, 0, 0),
        min_width=min(title_width(title), width),  # the title on one line when it fits
        caption=label(lang, "distance_percent" if needed <= width else "distance_short_bins"),
        caption_justify="left",
    )
    table.add_column(fixed[0], justify="right", no_wrap=True)
    table.add_column(fixed[1], justify="right", no_wrap=True)
    for name in headers:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column(fixed[2], justify="right", no_wrap=True)
    table.add_column(label(lang, "long_col_kind"), no_wrap=True)
    shares = _shares(profile, widths)  # (L, H, bins)
    for layer in layers:
        for head in range(profile.shape[1]):
            cells = []
            for value in shares[layer, head]:
                shade = "bold" if value >= 0.5 else "" if value >= 0.1 else "dim"
                percent = round(float(value) * 100)
                cells.append(Text(str(percent) if percent else "·", style=shade))
            table.add_row(
                str(layer),
                str(head),
                *cells,
                f"{sink[layer, head]:.0%}",
                label(lang, f"long_kind_{kinds[layer][head]}"),
            )
    return table


def _first_distance(name: str) -> str:
    """A bin's label ("513–1024") as its first distance, in at most 3 characters ("513";
    "1k" for 1,025)."""
    first = int(name.partition("–")[0])
    return str(first) if first < 1000 else f"{first // 1000}k"


def profile_figure(
    title: str,
    profile: np.ndarray,
    bin_labels: Sequence[str],
    widths: np.ndarray,
    *,
    cmap: str = "viridis",
    lang: str = "en",
) -> Figure:
    """Heads (rows: L0 H0, L0 H1, ...) × distance bins, the share of each head's weight;
    its labels in `lang`."""
    from attnviz.render.cells import visible
    from attnviz.render.inline import InlineFigure

    _check_lang(lang)
    L, H, B = profile.shape
    shares = _shares(profile, widths).reshape(L * H, B)  # (L·H, bins)
    height = min(30.0, 1.5 + 0.12 * L * H)
    figure = InlineFigure(figsize=(2 + 0.45 * B, height))
    axes = figure.add_subplot()
    image = axes.imshow(shares, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="none")
    axes.set_xticks(range(B), list(bin_labels), rotation=90, fontsize=7)
    step = max(1, H * max(1, L // 30))
    rows = range(0, L * H, step)
    axes.set_yticks(rows, [label(lang, "long_panel", layer=r // H, head=r % H) for r in rows])
    axes.tick_params(axis="y", labelsize=6)
    axes.set_xlabel(label(lang, "distance_axis"))
    axes.set_title(visible(title), fontsize=9, loc="left", parse_math=False)
    figure.colorbar(image, ax=axes, label=label(lang, "distance_bar"), fraction=0.04)
    figure.tight_layout()
    return figure


def check_long_page(T: int, layers: int, heads: int, pool: int) -> None:
    """Refuse a page of T pieces in blocks of `pool` over more than LONG_PAGE_BLOCKS blocks,
    naming the smallest `pool` whose page fits."""
    n = -(-T // pool)
    blocks = layers * heads * n * n
    if blocks <= LONG_PAGE_BLOCKS:
        return
    side = math.isqrt(LONG_PAGE_BLOCKS // (layers * heads))  # the most blocks a side
    fits = -(-T // max(side, 1))
    raise BadInput(
        f"a page of {layers} layers × {heads} heads at {T:,} pieces in blocks of {pool} holds "
        f"{blocks:,} blocks, more than a page takes ({LONG_PAGE_BLOCKS:,}): use {{pool}} "
        f"{fits} or more, or draw an image (.png)",
        param="pool",
    )


def _encode_pooled(pooled: np.ndarray) -> dict[str, object]:
    """(L, H, n, n) as integers against each matrix's largest block, deflated, base64."""
    L, H = pooled.shape[:2]
    values = np.clip(np.nan_to_num(pooled.astype(np.float64)), 0.0, None)  # (L, H, n, n)
    scales = values.reshape(L, H, -1).max(axis=-1)  # (L, H): each matrix's largest block
    safe = np.where(scales > 0, scales, 1.0)[:, :, None, None]  # (L, H, 1, 1)
    if values.size <= LONG_PAGE_U16:
        dtype, top = "u16", 65535
        q = np.round(values / safe * top).astype("<u2")  # (L, H, n, n)
        raw = np.ascontiguousarray(q.reshape(-1).view(np.uint8).reshape(-1, 2).T).tobytes()
    else:
        dtype, top = "u8", 255
        raw = np.round(values / safe * top).astype(np.uint8).tobytes()
    return {
        "dtype": dtype,
        "compression": "deflate",
        "data": base64.b64encode(zlib.compress(raw, 6)).decode("ascii"),
        "scales": [float(x) for x in scales.reshape(-1)],
    }


def _check_lang(lang: str) -> None:
    """`lang` is resolved by the caller (`attnviz.language.resolve_lang`): a slip is a bug."""
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {', '.join(LABELS)}, got {lang!r}")


def long_texts(lang: str) -> dict[str, str]:
    """The pooled page's strings in `lang` (resolved), keyed without their `long_` prefix;
    web/long.js fills their `{placeholders}` itself."""
    _check_lang(lang)
    return {key[5:]: text for key, text in LABELS[lang].items() if key.startswith("long_")}


def long_profile_title(model: str, T: int, lang: str = "en") -> str:
    """The distance profiles' title in `lang`: "MODEL · 8,192 pieces · share of each head's
    weight by distance"."""
    _check_lang(lang)
    return label(lang, "distance_title", model=model, pieces=f"{T:,}")


def pooled_title(model: str, T: int, what: str, pool: int, pool_by: str, lang: str = "en") -> str:
    """A pooled view's title in `lang`: "MODEL · 8,192 pieces · WHAT · blocks of 128 pieces,
    mean"."""
    _check_lang(lang)
    how = label(lang, f"long_by_{pool_by}")
    return label(lang, "pooled_title", model=model, pieces=f"{T:,}", what=what, pool=pool,
                 how=how)  # fmt: skip


def long_page_title(
    model: str, T: int, layers: int, heads: int, pool: int, pool_by: str, lang: str = "en"
) -> str:
    """The pooled page's title in `lang`: "MODEL · 8,192 pieces · 30 layers × 9 heads ·
    blocks of 128 pieces, mean"."""
    _check_lang(lang)
    how = label(lang, f"long_by_{pool_by}")
    return label(lang, "long_title", model=model, pieces=f"{T:,}", layers=layers, heads=heads,
                 pool=pool, how=how)  # fmt: skip


def long_page(
    pooled: np.ndarray,
    labels: Sequence[str],
    *,
    T: int,
    pool: int,
    pool_by: str,
    causal: bool,
    bin_labels: Sequence[str],
    profile: np.ndarray,
    widths: np.ndarray,
    sink: np.ndarray,
    kinds: Sequence[Sequence[str]],
    title: str,
    view: str = "matrix",
    layer: int | None = None,
    head: int | None = None,
    theme: str = "auto",
    lang: str = "en",
    windows: Sequence[int | None] | None = None,
) -> str:
    """A whole offline HTML document of a long input's pooled attention (`web/long.js`):
    `pooled` (L, H, n, n) over blocks named `labels`; `profile` (L, H, bins) each head's mean
    weight per distance bin (of `widths` distances), `sink` (L, H) and `kinds` its sink share
    and kind; it opens on
    `view` ("matrix": one head, or the head mean when `head` is None; "heads": a layer's
    heads; "model": every layer and head) at `layer`; its controls, captions, hover texts
    and head kinds in `lang` ("en" or "pt", resolved: `attnviz.language.resolve_lang`).
    `windows` (a decoder's sliding window of each layer, in pieces, None where a layer sees
    every earlier piece): a block whose every key is that far or farther behind every query
    of its block is drawn masked, as the blocks after the queries are."""
    from attnviz.render.cells import visible
    from attnviz.render.html import document, embed

    L, H, n, n2 = pooled.shape
    if n != n2 or len(labels) != n:
        raise ValueError(f"pooled {pooled.shape} does not fit {len(labels)} block labels")
    if view not in ("matrix", "heads", "model"):
        raise ValueError(f"view must be matrix, heads or model, got {view!r}")
    _check_lang(lang)
    if windows is not None and (
        len(windows) != L or any(w is not None and (type(w) is not int or w < 1) for w in windows)
    ):
        raise ValueError(f"windows must be {L} positive ints or None, got {windows!r}")
    spec = {
        "layers": L,
        "heads": H,
        "n": n,
        "T": T,
        **_encode_pooled(pooled),
        "labels": list(labels),
        "pool": pool,
        "poolBy": pool_by,
        "causal": causal,
        "windows": None if windows is None else list(windows),
        "bins": list(bin_labels),
        "shares": np.round(_shares(profile.astype(np.float64), widths), 4).tolist(),
        "sink": np.round(sink.astype(np.float64), 4).tolist(),
        "kinds": [list(k) for k in kinds],
        "title": visible(title),
        "view": view,
        "layer": layer,
        "head": head,
        "theme": theme,
        "lang": lang,
        "text": long_texts(lang),
    }
    body = embed(
        "attnvizLong", spec, ("long.js",), ("attnviz.css", "long.css"), lang=lang,
        classes="attnviz av-long",
    )  # fmt: skip
    return document(title, theme, body, lang)

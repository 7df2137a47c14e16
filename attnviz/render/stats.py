"""Head statistics and rollout sources in the terminal, as rich renderables.

- `StatsTable`: one row per head (layer, head, entropy, the six shares, label),
  two decimals and short headers so that it fits 80 columns.
- `SourcesTable`: for each token, the input tokens it draws most from with their
  shares (attention rollout), wrapped to the terminal width.

Labels are made safe for one-line layout and shortened the same way as the
heatmaps in `attnviz.render.terminal`, by `attnviz.render.cells`. No torch, no matplotlib.
A record is a plain mapping (`attnviz.HeadRecord`): layer, head, label and the statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from attnviz import lexicon
from attnviz.render.cells import (
    MAX_LABEL_CELLS,
    clean_labels,
    emit,
    pad,
    result_table,
    title_lines,
    title_width,
    truncate,
    visible,
    wrap_items,
)

__all__ = ["STATS_HEADERS", "SourcesTable", "StatsTable", "head_label", "stats_headers"]

# Column headers of StatsTable (73 columns wide in all); explained in its caption. On a
# terminal narrower than that, the first three shrink to L, H, ent (64 columns).
STATS_HEADERS: dict[str, str] = {
    "layer": "layer",
    "head": "head",
    "entropy": "entropy",
    "cls": "CLS",
    "sep": "SEP",
    "first": "first",
    "punct": "punct",
    "self": "self",
    "prev": "prev",
    "next": "next",
    "label": "label",
}
# The headers that are words, by their key in attnviz.lexicon (CLS and SEP are names).
_HEADER_KEYS = {
    "layer": "col_layer",
    "head": "col_head",
    "entropy": "stats_entropy",
    "first": "stats_first",
    "punct": "stats_punct",
    "self": "stats_self",
    "prev": "stats_prev",
    "next": "stats_next",
    "label": "stats_label",
}
_NOT_SHARES = ("layer", "head", "label")  # the columns of STATS_HEADERS that are no statistic
_COMPACT_HEADERS = {"layer": "L", "head": "H", "entropy": "ent"}
# Below 64 columns: short labels (`prev`: attnviz.lexicon's head_label_short_*), then shares
# without their leading zero (.95), then the label and the share columns are dropped from the
# right, so no value is ever cut.


def head_label(lang: str, label: str, short: bool = False) -> str:
    """A head's label ("previous-token") as the table writes it in `lang`, or its short form
    ("prev"); a label attnviz did not give is written as it is."""
    words = lexicon.LABELS[lang]
    if short and f"head_label_short_{label}" in words:
        return words[f"head_label_short_{label}"]
    return words.get(f"head_label_{label}", label)


def stats_headers(lang: str, compact: bool = False) -> dict[str, str]:
    """STATS_HEADERS in `lang`; `compact`: layer, head and entropy as L, H, ent."""
    headers = dict(STATS_HEADERS)
    for column, key in _HEADER_KEYS.items():
        headers[column] = lexicon.label(lang, key)
    if compact:
        for column in _COMPACT_HEADERS:
            headers[column] = lexicon.label(lang, f"stats_compact_{column}")
    return headers


_DROP_ORDER = ("label", "next", "prev", "self", "punct", "sep", "first", "cls")
_UNLIMITED = 10_000  # a width to measure a table's natural width with
_BOLD = Style(bold=True)
_DIM = Style(dim=True)
_ARROW = " ← "
_MIN_ITEMS_W = 24  # narrower than this beside the label, sources go on the lines below


class StatsTable:
    """Head statistics as a table: one row per record, in the order given.

    `statistics`: the columns after layer and head, entropy first (default: those the
    records hold, in the order of STATS_HEADERS). `label_shares` maps a label to the share
    that names it (`attnviz.measures.stats.LABEL_SHARES`): that share is bold in the rows
    with that label. 73 columns wide; narrower terminals get the
    short headers L, H, ent (64 columns), then short labels (`prev`) and shares without
    their leading zero (`.95`), then fewer columns (the caption names those left out):
    layer and head always show, and no value is cut.
    """

    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        title: str | None = None,
        *,
        statistics: Sequence[str] | None = None,
        label_shares: Mapping[str, str] | None = None,
        first_token: str | None = None,
        lang: str = "en",
    ) -> None:
        self.records = list(records)
        self.title = title
        self.lang = lang  # the language of its headers and caption: "en" or "pt"
        if statistics is None:
            held = self.records[0] if self.records else {}
            statistics = [key for key in STATS_HEADERS if key in held and key not in _NOT_SHARES]
        self.shares = tuple(statistics)[1:]  # an encoder's six, a decoder's four
        self.label_shares = dict(label_shares or {})
        if "first" in self.shares:
            first = (
                lexicon.label(lang, "stats_first_token", token=visible(first_token))
                if first_token
                else ""
            )
            self.caption = lexicon.label(lang, "stats_decoder_caption", first=first)
        else:
            self.caption = lexicon.label(lang, "stats_caption")

    def _table(
        self,
        compact: bool = False,
        short: bool = False,
        dropped: tuple[str, ...] = (),
    ) -> Table:
        headers = stats_headers(self.lang, compact)
        shares = [key for key in self.shares if key not in dropped]
        caption = self.caption
        if short:
            caption += lexicon.label(self.lang, "stats_short")
        dropped = tuple(key for key in dropped if key == "label" or key in self.shares)
        if dropped:
            names = ", ".join(headers[key] for key in dropped)
            caption += lexicon.label(self.lang, "stats_not_shown", names=names)
        table = result_table(self.title, caption)
        for key in ("layer", "head", "entropy", *shares):
            table.add_column(Text(headers[key]), justify="right", no_wrap=True)
        if "label" not in dropped:
            table.add_column(Text(headers["label"]), no_wrap=True)
        for record in self.records:
            named = self.label_shares.get(record["label"])
            cells: list[Text | str] = [str(record["layer"]), str(record["head"])]
            cells.append(f"{record['entropy']:.2f}")
            for key in shares:
                value: float = record[key]
                shown = f"{value:.2f}"
                if short and shown.startswith("0."):
                    shown = shown[1:]
                cells.append(Text(shown, style=_BOLD if key == named else ""))
            if "label" not in dropped:
                label = head_label(self.lang, str(record["label"]), short)
                cells.append(Text(visible(label)))
            table.add_row(*cells)
        return table

    def _variants(self) -> list[Table]:
        """The table from widest to narrowest: shorter headers, labels and values, then
        fewer columns."""
        tables = [self._table(), self._table(compact=True), self._table(True, True)]
        for n in range(1, len(_DROP_ORDER) + 1):
            tables.append(self._table(True, True, _DROP_ORDER[:n]))
        return tables

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self._table())

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.update_width(_UNLIMITED)
        variants = self._variants()
        for table in variants:
            if Measurement.get(console, wide, table).maximum <= options.max_width:
                yield table
                return
        yield variants[-1]


class SourcesTable:
    """For each token, the inputs it draws most from: `3 cheio ← 7 cheio 0.41  0 [CLS] 0.22`.

    labels: one per token (row of the rollout); sources: for each token a list of
    (input index, share), as `attnviz.measures.rollout.top_sources` returns. The sources wrap
    beside the label, or, on a narrow terminal, on indented lines below it. No line
    is wider than the console.
    """

    def __init__(
        self,
        labels: Sequence[str],
        sources: Sequence[Sequence[tuple[int, float]]],
        title: str | None = None,
        lang: str = "en",
    ) -> None:
        if len(labels) != len(sources):
            raise ValueError(f"{len(labels)} labels for {len(sources)} rows of sources")
        self.labels = clean_labels(labels)
        self.sources = [list(row) for row in sources]
        self.title = title
        self.lang = lang  # the language of its header: "en" or "pt"
        for row in self.sources:
            for j, _ in row:
                if not 0 <= j < len(self.labels):
                    raise ValueError(f"source index {j} is outside 0..{len(self.labels) - 1}")

    @property
    def _index_w(self) -> int:
        return len(str(max(len(self.labels) - 1, 0)))

    @property
    def _label_w(self) -> int:
        return min(MAX_LABEL_CELLS, max((cell_len(label) for label in self.labels), default=0))

    def _items(self, row: Sequence[tuple[int, float]]) -> list[str]:
        return [
            f"{str(j).rjust(self._index_w)} {truncate(self.labels[j], MAX_LABEL_CELLS)} {s:.2f}"
            for j, s in row
        ]

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        left = self._index_w + 1 + self._label_w + cell_len(_ARROW)
        widest = max((cell_len("  ".join(self._items(row))) for row in self.sources), default=0)
        maximum = max(left + widest, title_width(self.title))
        return Measurement(min(_MIN_ITEMS_W, maximum), maximum).clamp(max_width=options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        lines = title_lines(self.title, console, options)
        index_w, label_w = self._index_w, self._label_w
        left_w = index_w + 1 + label_w + cell_len(_ARROW)
        beside = width - left_w >= _MIN_ITEMS_W
        header = lexicon.label(self.lang, "sources_header")
        lines.append([Segment(truncate(header, width), _DIM)])
        for i, (label, row) in enumerate(zip(self.labels, self.sources, strict=True)):
            left = f"{str(i).rjust(index_w)} {pad(truncate(label, label_w), label_w)}"
            items = self._items(row)
            if beside:
                wrapped = wrap_items(items, width - left_w) or [""]
                lines.append([Segment(left + _ARROW, _BOLD), Segment(wrapped[0])])
                lines += [[Segment(" " * left_w + more)] for more in wrapped[1:]]
            else:
                indent = "    "
                lines.append([Segment(truncate(left.rstrip() + " ←", width), _BOLD)])
                wrapped = wrap_items(items, max(1, width - len(indent)))
                lines += [[Segment(indent + more)] for more in wrapped]
        yield from emit(lines, width)

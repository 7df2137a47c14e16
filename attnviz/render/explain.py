"""`attnviz explain` in the terminal: the steps of one head's attention for one query.

`ExplanationView(explanation, lang)` is a rich renderable: eight numbered steps in
the order the lessons teach them, each a short paragraph on the model's own
numbers, with two tables (scores → weights, and weights next to contributions)
whose bars show each row against the column's largest value. Labels are `Text`
(so `[CLS]` is never read as markup), made safe for one line and cut to
`MAX_LABEL_CELLS`; every line fits the console width (80 columns included).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from attnviz.i18n import quoted, text
from attnviz.language import resolve_lang
from attnviz.render.cells import MAX_LABEL_CELLS, truncate, visible
from attnviz.render.explain_input import Explained

__all__ = ["BAR_CELLS", "ExplanationView", "bar", "shown_rows"]

BAR_CELLS = 8  # width of a bar at the column's largest value
_EIGHTHS = " ▏▎▍▌▋▊▉"  # partial blocks, 0/8 .. 7/8 of a cell
_HEADING = "bold underline"
_WEIGHT = "cyan"
_CONTRIBUTION = "magenta"
_QUERY = "bold reverse"
_QUERY_MARK = "▶ "
_MINUS_INFINITY = "−∞"
_PREVIEW = 4  # numbers of q shown before the ellipsis
_TOP = 3  # keys listed when weight and contribution rank them differently
# On a sink, the head's output for the query is "small" under this share of the median over
# the head's other queries.
SMALL_SHARE = 0.5
SINK_SHARE = 0.5  # ... and parked when over half its queries put over half their weight there
_INDENT = "  "
_FORMULA = "bold"
_UNBOUNDED = 10_000  # a width no table reaches: to measure a table's natural width


@dataclass(frozen=True)
class _Column:
    """One column of numbers (or bars) for a table of keys."""

    header: str
    cells: list[str]
    footer: str = ""
    justify: JustifyMethod = "right"
    style: str | None = None

    @property
    def width(self) -> int:
        """Cells the widest entry needs."""
        return max(cell_len(self.header), cell_len(self.footer), *map(cell_len, self.cells))


def bar(fraction: float, cells: int = BAR_CELLS) -> str:
    """A horizontal bar of `fraction` (0..1) × `cells` cells, in eighths of a cell."""
    eighths = round(max(0.0, min(1.0, fraction)) * cells * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(cells)


def _num(value: float, decimals: int = 2) -> str:
    """A number with a plain minus and no `-0.00`."""
    out = f"{value:.{decimals}f}"
    return out[1:] if out.startswith("-") and float(out) == 0 else out


def _preview(vector: np.ndarray) -> str:
    """The first numbers of a vector and its last: `0.12, -0.50, 1.03, 0.07, …, -0.91`."""
    shown = [_num(v) for v in vector[:_PREVIEW]]
    if len(vector) > _PREVIEW + 1:
        shown += ["…", _num(vector[-1])]
    elif len(vector) == _PREVIEW + 1:
        shown.append(_num(vector[-1]))
    return ", ".join(shown)


def _clean(label: str) -> str:
    return truncate(visible(label), MAX_LABEL_CELLS)


def shown_rows(explanation: Explained, limit: int) -> list[int]:
    """Every key when there are at most `limit`; else the query and the keys with the
    largest weights and the largest contributions (half `limit` each), in text order."""
    T = explanation.num_pieces
    if limit >= T:
        return list(range(T))
    half = max(1, limit // 2)
    by_weight = np.argsort(-explanation.weights, kind="stable")[:half]  # (half,)
    by_contribution = np.argsort(-explanation.contributions, kind="stable")[:half]  # (half,)
    return sorted({explanation.query, *by_weight.tolist(), *by_contribution.tolist()})


class ExplanationView:
    """The eight steps of one head's attention for one query (a rich renderable).

    `max_rows` bounds the rows of each table: longer texts show the keys that matter
    most (largest weights and contributions) and say how many were left out.
    """

    def __init__(self, explanation: Explained, lang: str, *, max_rows: int = 32) -> None:
        self.x = explanation
        self.lang = resolve_lang(lang)
        self.rows = shown_rows(explanation, max_rows)

    def _t(self, key: str, **values: object) -> str:
        return text(self.lang, key, **values)

    def _name(self, j: int, *, index: bool = True) -> str:
        """A piece in a sentence: '[SEP]' (27), or '##m' of 'trem' (7)."""
        label, word = _clean(self.x.labels[j]), _clean(self.x.words[j])
        name = quoted(label)
        if word != label:
            name = self._t("piece_of", label=name, word=quoted(word))
        return f"{name} ({j})" if index else name

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        steps = (
            self._header,
            self._pieces,
            self._projections,
            self._scores,
            self._contributions,
            self._join,
        )
        for step in steps:
            yield from step(console, options)

    # -- the parts, in order ------------------------------------------------

    def _header(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        name = visible(x.model)
        model = self._t("causal_model", model=name) if x.causal else name
        label = self._name(x.query, index=False)
        title = self._t("title", head=x.head, layer=x.layer, label=label, index=x.query)
        yield Text(title, style=_HEADING)
        if x.decoder:
            kv = x.num_kv_heads or x.num_heads
            line = self._t(
                "model_line_decoder", model=model, layers=x.num_layers, heads=x.num_heads, kv=kv
            )
        else:
            line = self._t("model_line", model=model, layers=x.num_layers, heads=x.num_heads)
        yield Text(line, style="dim")

    def _step(self, key: str) -> Iterator[RenderableType]:
        yield Text("")
        yield Text(self._t(key), style=_HEADING)

    def _formula(self, key: str, **values: object) -> Text:
        """A formula on its own indented line, so that wrapping never splits it mid-way."""
        return Text(_INDENT + self._t(key, **values), style=_FORMULA)

    def _pieces(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        T, C = x.num_pieces, x.hidden_size
        yield from self._step("step1")
        yield Text(self._t("step1_body", T=T, C=C))
        yield self._formula("f_step1", T=T, C=C)
        if not x.decoder:
            if x.layer == 0:
                yield Text(self._t("step1_first_layer"))
            else:
                yield Text(self._t("step1_later_layer", layer=x.layer, previous=x.layer - 1))
        elif x.layer > 0:
            yield Text(self._t("step1_later_layer_decoder", layer=x.layer, norm=x.norm))
        else:
            key = "step1_first_layer_rotary" if x.angles is not None else "step1_first_layer_gpt2"
            yield Text(self._t(key, norm=x.norm))
        label = quoted(_clean(x.labels[x.query]))
        yield Text(self._t("step1_query", index=x.query, label=label))
        if len(x.word_pieces) > 1:
            n = x.word_pieces.index(x.query) + 1
            yield Text(
                self._t(
                    "step1_word" if n == 1 else "step1_word_nth",
                    word=quoted(_clean(x.words[x.query])),
                    count=len(x.word_pieces),
                    pieces=", ".join(_clean(x.labels[p]) for p in x.word_pieces),
                    n=n,
                    label=label,
                )
            )
        yield from self._piece_list(options.max_width)

    def _piece_list(self, width: int) -> Iterator[Text]:
        """`pieces: 0 [CLS]  1 João ...` wrapped to `width`, the query highlighted.

        A long text lists the pieces the tables show, with `…` for the ones left out.
        """
        line = Text(self._t("pieces_heading"), style="dim")
        previous = -1
        for i in self.rows:
            label = self.x.labels[i]
            item = truncate(f"{i} {_clean(label)}", width)
            if i > previous + 1:
                item = "…  " + item
            previous = i
            if line.cell_len and line.cell_len + 2 + cell_len(item) > width:
                yield line
                line = Text()
            if line.cell_len:
                line.append("  ")
            line.append(item, style=_QUERY if i == self.x.query else None)
        yield line

    def _projections(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        T, C, h, dk = x.num_pieces, x.hidden_size, x.num_heads, x.head_size
        cols = x.head_columns
        yield from self._step("step2")
        if not x.decoder:
            yield Text(self._t("step2_body", T=T, C=C))
            yield self._formula("f_step2")
            yield Text(self._t("step2_split", C=C, h=h, head=x.head, first=cols[0], last=cols[-1]))
            yield self._formula("f_step2_split", C=C, h=h, dk=dk, T=T)
        else:
            n_kv = x.num_kv_heads or h
            qw, kvw = h * dk, n_kv * dk
            yield Text(self._t("step2_body_decoder", T=T, C=C, qw=qw, kvw=kvw))
            yield self._formula("f_step2" if x.qkv_bias else "f_step2_no_bias")
            yield Text(
                self._t(
                    "step2_split_decoder", dk=dk, h=h, head=x.head, first=cols[0], last=cols[-1]
                )
            )
            yield self._formula("f_step2_split_decoder", T=T, qw=qw, kvw=kvw, h=h, n_kv=n_kv, dk=dk)
            if x.groups > 1:
                kv_cols = x.kv_columns
                yield Text(
                    self._t(
                        "step2_groups",
                        n_kv=n_kv,
                        g=x.groups,
                        head=x.head,
                        kv=x.kv_head,
                        first=kv_cols[0],
                        last=kv_cols[-1],
                    )
                )
        yield Text(self._t("step2_q", head=x.head, index=x.query))
        q = x.q if x.q_unrotated is None else x.q_unrotated
        q = q if x.q_unnormed is None else x.q_unnormed  # the projection, before any step
        yield self._formula("f_step2_q", values=_preview(q), norm=_num(float(np.linalg.norm(q))))
        if x.q_unnormed is not None:
            yield from self._qk_norm()
        if x.angles is not None:
            yield from self._rotary()

    def _qk_norm(self) -> Iterator[RenderableType]:
        """Step 2a (Qwen3, Gemma 3): q and k normalised head by head, before and after."""
        x = self.x
        assert x.q_unnormed is not None and x.k_unnormed is not None
        after_q = x.q if x.q_unrotated is None else x.q_unrotated  # (dk,) normalised
        after_k = x.k if x.k_unrotated is None else x.k_unrotated  # (T, dk)
        yield from self._step("step2a")
        yield Text(self._t("step2a_body", norm=x.norm or "RMSNorm", dk=x.head_size))
        for key, vector in (
            ("f_step2b_q_before", x.q_unnormed),
            ("f_step2b_q_after", after_q),
            ("f_step2b_k_before", x.k_unnormed[x.query]),
            ("f_step2b_k_after", after_k[x.query]),
        ):
            yield self._formula(
                key, values=_preview(vector), norm=_num(float(np.linalg.norm(vector)))
            )

    def _rotary(self) -> Iterator[RenderableType]:
        """Step 2b (rotary decoders): the query position's angles, q and k turned."""
        x = self.x
        assert x.angles is not None and x.q_unrotated is not None and x.k_unrotated is not None
        pairs = len(x.angles)
        yield from self._step("step2b")
        yield Text(
            self._t(
                "step2b_body",
                dk=x.head_size,
                pairs=pairs,
                p=x.query,
                first=_num(float(x.angles[0]), 3),
                last=pairs - 1,
                slowest=_num(float(x.angles[-1]), 4),
            )
        )
        theta = f"{x.rope_theta:g}" if x.rope_theta is not None else "?"
        yield self._formula("f_step2b", theta=theta, last=pairs - 1)
        if x.rope_local and x.rope_global_theta is not None:
            full = f"{x.rope_global_theta:g}"
            yield Text(self._t("step2b_local", layer=x.layer, theta=theta, full=full))
        if x.rotary_dims is not None:
            r, dk = x.rotary_dims, x.head_size
            yield Text(self._t("step2b_partial", r=r, dk=dk, pairs=r // 2, rest=dk - r))
        if x.rope_type not in (None, "default"):
            yield Text(self._t("step2b_scaling", kind=visible(x.rope_type)))
        yield Text(self._t("step2b_turn"))
        for key, vector in (
            ("f_step2b_q_before", x.q_unrotated),
            ("f_step2b_q_after", x.q),
            ("f_step2b_k_before", x.k_unrotated[x.query]),
            ("f_step2b_k_after", x.k[x.query]),
        ):
            yield self._formula(
                key, values=_preview(vector), norm=_num(float(np.linalg.norm(vector)))
            )
        yield Text(self._t("step2b_why"))

    def _scores(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        dk = x.head_size
        # The top score among the keys the query may see: a hidden key's score never counts.
        top_raw = int(np.argmax(np.where(x.hidden, -np.inf, x.raw_scores)))
        yield from self._step("step3")
        key = "step3_body_masked" if x.hidden.any() else "step3_body"
        yield Text(self._t(key, score=_num(x.raw_scores[top_raw]), label=self._name(top_raw)))
        yield self._formula("f_step3", dk=dk)
        yield from self._step("step4")
        yield from self._scale(top_raw)
        yield from self._step("step5")
        yield from self._mask()
        yield from self._step("step6")
        top = x.top_weight
        yield Text(self._t("step6_body", weight=_num(x.weights[top], 3), label=self._name(top)))
        total = x.weight_sum
        yield self._formula("f_step6", total=_num(total), exact=_num(total, 6))
        yield Text("")
        yield self._fit(self._score_table, console, options)
        yield from self._footer_note()

    def _scale(self, top_raw: int) -> Iterator[RenderableType]:
        """Step 4: 1/√d_k, or what a GPT-2 or Gemma config makes of it; Gemma 2's soft cap."""
        x = self.x
        dk, scaled = x.head_size, _num(x.scaled_scores[top_raw])
        if x.query_pre_attn_scalar is not None:  # Gemma: its own scale, not 1/√d_k
            scalar, scale = f"{x.query_pre_attn_scalar:g}", _num(x.scale, 4)
            yield Text(self._t("step4_scalar", dk=dk, scalar=scalar, scale=scale, scaled=scaled))
        elif x.scale_root:
            root = _num(float(np.sqrt(dk)), 3)
            by_root = _num(float(x.raw_scores[top_raw]) / float(np.sqrt(dk)))
            yield Text(self._t("step4_body", dk=dk, root=root, scaled=by_root))
        else:
            yield Text(self._t("step4_off", dk=dk))
        if x.scale_layer is not None:
            yield Text(self._t("step4_layer", layer=x.layer, n=x.scale_layer, scaled=scaled))
        if x.scale_root and x.scale_layer is None and x.query_pre_attn_scalar is None:
            yield self._formula("f_step4", dk=dk, scale=_num(x.scale, 4))
        else:
            yield self._formula("f_step4_factor", scale=_num(x.scale, 4))
        if x.softcap is not None and x.capped_scores is not None:  # Gemma 2
            cap = f"{x.softcap:g}"
            before, after = _num(x.scaled_scores[top_raw]), _num(x.capped_scores[top_raw])
            yield Text(self._t("step4_softcap", cap=cap, before=before, after=after))
            yield self._formula("f_step4_softcap", cap=cap)

    def _mask(self) -> Iterator[RenderableType]:
        """Step 5: none, the causal what-if, or a decoder's own mask (and window)."""
        x = self.x
        hidden = np.flatnonzero(x.hidden)  # (n_hidden,)
        later = hidden[hidden > x.query]  # (n_later,) hidden by the causal mask
        if x.decoder:
            if later.size == 0:
                yield Text(self._t("step5_decoder_last"))
            else:
                first, last = int(later[0]), int(later[-1])
                yield Text(self._t("step5_decoder", count=later.size, first=first, last=last))
            if x.window is not None:
                earlier = hidden[hidden < x.query]  # (n_earlier,) hidden by the window
                if earlier.size:
                    first, last = int(earlier[0]), int(earlier[-1])
                    yield Text(
                        self._t(
                            "step5_window",
                            window=x.window,
                            count=earlier.size,
                            first=first,
                            last=last,
                        )
                    )
                else:
                    yield Text(self._t("step5_window_none", window=x.window))
            if x.query == 0:
                yield Text(self._t("step5_only_self"))
        elif not x.causal:
            yield Text(self._t("step5_none", T=x.num_pieces))
        elif hidden.size == 0:
            yield Text(self._t("step5_causal_last"))
        else:
            first, last = int(hidden[0]), int(hidden[-1])
            yield Text(self._t("step5_causal", count=hidden.size, first=first, last=last))

    def _key_cell(self, j: int) -> Text:
        label = Text(_clean(self.x.labels[j]))
        if j == self.x.query:
            return Text(_QUERY_MARK, style="bold") + label
        return label

    def _row_style(self, j: int) -> str | None:
        if self.x.hidden[j]:
            return "dim"
        return "bold" if j == self.x.query else None

    def _footer_note(self) -> Iterator[Text]:
        notes = [self._t("legend_query")]
        if len(self.rows) < self.x.num_pieces:
            notes.insert(0, self._t("rows_shown", shown=len(self.rows), T=self.x.num_pieces))
        yield Text(" ".join(notes), style="dim")

    def _table(self, columns: list[_Column], footer: bool = False) -> Table:
        """A table of `self.rows`: the index, the key, then `columns`.

        Every column but the key's keeps its natural width (numbers are never cut); a
        key label that does not fit ends in `…`.
        """
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, show_footer=footer)
        index = _Column(self._t("col_index"), [str(j) for j in self.rows])
        table.add_column(index.header, justify="right", no_wrap=True, min_width=index.width)
        table.add_column(
            self._t("col_key"),
            footer=self._t("sum_row") if footer else "",
            no_wrap=True,
            overflow="ellipsis",
            max_width=MAX_LABEL_CELLS + cell_len(_QUERY_MARK),
        )
        for column in columns:
            table.add_column(
                column.header,
                footer=column.footer,
                justify=column.justify,
                style=column.style,
                no_wrap=True,
                min_width=column.width,
            )
        for r, j in enumerate(self.rows):
            cells = [column.cells[r] for column in columns]
            table.add_row(index.cells[r], self._key_cell(j), *cells, style=self._row_style(j))
        return table

    def _fit(
        self, build: Callable[[int], Table], console: Console, options: ConsoleOptions
    ) -> Table:
        """The table with the widest bars (8 cells, 4, then none) that fits the width."""
        wide = options.update_width(_UNBOUNDED)
        for cells in (BAR_CELLS, BAR_CELLS // 2):
            table = build(cells)
            if Measurement.get(console, wide, table).maximum <= options.max_width:
                return table
        return build(0)

    def _score_table(self, bar_cells: int) -> Table:
        x = self.x
        top = float(x.weights.max()) or 1.0
        columns = [
            _Column(self._t("col_raw"), [_num(x.raw_scores[j]) for j in self.rows]),
            _Column(
                self._t("col_scaled", scale=_num(x.scale, 3)),
                [_MINUS_INFINITY if x.hidden[j] else _num(x.scaled_scores[j]) for j in self.rows],
            ),
            *(
                [
                    _Column(
                        self._t("col_capped"),
                        [
                            _MINUS_INFINITY if x.hidden[j] else _num(x.capped_scores[j])
                            for j in self.rows
                        ],
                    )
                ]
                if x.capped_scores is not None
                else []
            ),
            _Column(
                self._t("col_weight"),
                [_num(x.weights[j], 3) for j in self.rows],
                footer=_num(x.weight_sum),
            ),
        ]
        if bar_cells:
            bars = [
                self._t("hidden") if x.hidden[j] else bar(float(x.weights[j]) / top, bar_cells)
                for j in self.rows
            ]
            columns.append(_Column("", bars, justify="left", style=_WEIGHT))
        return self._table(columns, footer=True)

    def _contribution_table(self, bar_cells: int) -> Table:
        x = self.x
        top_w = float(x.weights.max()) or 1.0
        top_c = float(x.contributions.max()) or 1.0
        weights = _Column(self._t("col_weight"), [_num(x.weights[j], 3) for j in self.rows])
        weight_bars = _Column(
            "",
            [bar(float(x.weights[j]) / top_w, bar_cells) for j in self.rows],
            justify="left",
            style=_WEIGHT,
        )
        norms = _Column(self._t("col_value"), [_num(x.transformed_norms[j]) for j in self.rows])
        contributions = _Column(
            self._t("col_contribution"), [_num(x.contributions[j], 3) for j in self.rows]
        )
        contribution_bars = _Column(
            "",
            [bar(float(x.contributions[j]) / top_c, bar_cells) for j in self.rows],
            justify="left",
            style=_CONTRIBUTION,
        )
        if not bar_cells:
            return self._table([weights, norms, contributions])
        return self._table([weights, weight_bars, norms, contributions, contribution_bars])

    def _contributions(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        dk = x.head_size
        yield from self._step("step7")
        yield Text(self._t("step7_body", dk=dk))
        yield self._formula("f_step7", norm=_num(float(np.linalg.norm(x.head_output))))
        yield Text(self._t("step7_contribution", dk=dk))
        with_bias = x.qkv_bias
        yield self._formula("f_step7_contribution" if with_bias else "f_step7_contribution_no_bias")
        if x.groups > 1:
            yield Text(self._t("step7_shared_values", kv=x.kv_head, g=x.groups, dk=dk))
        yield Text("")
        yield self._fit(self._contribution_table, console, options)
        yield from self._footer_note()
        w, c = x.top_weight, x.top_contribution
        weight, contribution = _num(x.weights[w], 3), _num(x.contributions[c], 3)
        if x.sink is not None:
            yield Text(self._sink_verdict())
        elif w != c:
            yield Text(
                self._t(
                    "step7_differ",
                    weight_label=self._name(w),
                    weight=weight,
                    contribution_label=self._name(c),
                    contribution=contribution,
                )
            )
        else:
            yield Text(
                self._t(
                    "step7_agree", label=self._name(w), weight=weight, contribution=contribution
                )
            )
        n = min(_TOP, x.num_pieces)
        by_weight = np.argsort(-x.weights, kind="stable")[:n]  # (n,)
        by_contribution = np.argsort(-x.contributions, kind="stable")[:n]  # (n,)
        if by_weight.tolist() != by_contribution.tolist():
            yield Text(
                self._t(
                    "step7_top",
                    n=n,
                    by_weight=", ".join(self._name(int(j)) for j in by_weight),
                    by_contribution=", ".join(self._name(int(j)) for j in by_contribution),
                )
            )

    def _sink_verdict(self) -> str:
        """What the numbers show on a sink: where the head parks, whether the contributions
        say the same as the weight, and how much the head writes for this query."""
        x = self.x
        sink = x.sink
        assert sink is not None
        others = np.delete(x.contributions, sink)  # (T - 1,)
        largest_other = float(others.max()) if others.size else 0.0
        parts = [
            self._t(
                "step7_sink",
                label=self._name(sink),
                weight=_num(x.weights[sink], 3),
                norm=_num(x.transformed_norms[sink]),
                median=_num(x.others_median_norm),
            )
        ]
        if x.top_contribution == sink:
            parts.append(
                self._t(
                    "step7_sink_agree",
                    contribution=_num(x.contributions[sink], 3),
                    others=_num(largest_other, 3),
                )
            )
        else:
            c = x.top_contribution
            parts.append(
                self._t(
                    "step7_sink_differ",
                    label=self._name(c),
                    contribution=_num(x.contributions[c], 3),
                )
            )
        if x.share_norms is not None and x.head_share_norms is not None and x.num_pieces > 1:
            mine = float(x.share_norms[x.query])
            queries = float(np.median(np.delete(x.share_norms, x.query)))
            heads = np.delete(x.head_share_norms, x.head)
            across = float(np.median(heads)) if heads.size else mine
            parked = x.parked_share
            if mine < SMALL_SHARE * queries:
                key = "step7_sink_small"
            elif parked is not None and parked >= SINK_SHARE:
                key = "step7_sink_parked"
            else:
                key = "step7_sink_not_small"
            parts.append(
                self._t(
                    key,
                    share=_num(mine),
                    queries=_num(queries),
                    heads=_num(across),
                    label=self._name(sink),
                    parked=f"{parked or 0:.0%}",
                )
            )
        return " ".join(parts)

    def _join(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        x = self.x
        h, dk, C = x.num_heads, x.head_size, x.hidden_size
        yield from self._step("step8")
        yield Text(self._t("step8_body", h=h))
        share = _num(float(np.linalg.norm(x.head_share)))
        if not x.decoder:
            yield self._formula("f_step8_join", h=h, dk=dk, C=C)
            yield Text(self._t("step8_projection", C=C, head=x.head, dk=dk, share=share))
            yield self._formula("f_step8", C=C)
        else:
            qw = h * dk
            yield self._formula("f_step8_join_decoder", h=h, dk=dk, qw=qw)
            yield Text(
                self._t("step8_projection_decoder", qw=qw, C=C, head=x.head, dk=dk, share=share)
            )
            bias = " + b_O" if x.out_bias else ""
            yield self._formula("f_step8_decoder", qw=qw, C=C, bias=bias)
        yield self._formula("f_step8_norm", norm=_num(x.output_norm))
        yield Text(self._t("step8_after_decoder" if x.decoder else "step8_after"))

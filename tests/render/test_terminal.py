"""Terminal heatmaps: widths, labels, shades, colours, paging and the head grid.

Everything is printed with `crop=False`, so a line that is too wide shows up as too
wide in the output instead of being cut by the console; widths are measured in
display cells with `rich.cells.cell_len`.
"""

from __future__ import annotations

import io
import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.segment import Segment

from attnviz.render.terminal import SHADES, HeadGrid, Heatmap
from tests.rendering import ANSI, plain_lines, render

SENTENCE = [
    "[CLS]", "João", "pensou", ":", "O", "trem", "estava", "cheio", ",",
    "mas", "ele", "conseguiu", "uma", "cadeira", "livre", ".", "[SEP]",
]  # fmt: skip
TRICKY_LABELS = [
    "東京",  # CJK, 2 cells a character
    "👍🏽",  # emoji with a skin-tone modifier
    "e\u0301te\u0301",  # combining accents
    "مرحبا",  # Arabic
    "שלום",  # Hebrew
    "👨\u200d👩\u200d👧",  # zero-width joiner sequence
    "a\u200db",  # zero-width joiner between letters
    "tab\there",
    "new\nline",
    "\x00nul",
    "\u202eevil",  # right-to-left override
    "a-very-long-token-label-that-goes-on",
    "日本語のテキストです",
    "\u200b",  # zero-width space only
]


def assert_fits(output: str, width: int) -> None:
    too_wide = [line for line in plain_lines(output) if cell_len(line) > width]
    assert not too_wide, f"lines wider than {width}: {too_wide[:3]}"


def segment_widths(renderable: RenderableType, width: int, *, colour: bool) -> list[int]:
    """Cell widths of the lines as rendered segments (before any console cropping)."""
    console = Console(
        width=width,
        file=io.StringIO(),
        color_system="truecolor" if colour else None,
        force_terminal=colour,
        no_color=False,
        legacy_windows=False,
    )
    segments = console.render(renderable, console.options)
    return [Segment.get_line_length(line) for line in Segment.split_lines(segments)]


def attention(n: int, seed: int = 0) -> np.ndarray:
    """A row-stochastic [n, n] matrix, like softmax attention."""
    scores = np.random.default_rng(seed).random((n, n)) ** 4  # (n, n)
    return scores / scores.sum(axis=1, keepdims=True)


def column_zero_hot(n: int) -> np.ndarray:
    """[n, n]: 1.0 in column 0, 0 elsewhere; without colour each row is `█` then blanks."""
    matrix = np.zeros((n, n))
    matrix[:, 0] = 1.0
    return matrix


# ---------------------------------------------------------------------------
# Heatmap


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("colour", [True, False])
def test_sentence_fits_and_shows_every_label_and_the_title(width: int, colour: bool) -> None:
    heatmap = Heatmap(attention(len(SENTENCE)), SENTENCE, title="layer 3 · head 5")
    output = render(heatmap, width, colour=colour)
    assert_fits(output, width)
    assert max(segment_widths(heatmap, width, colour=colour)) <= width
    text = ANSI.sub("", output)
    assert "layer 3 · head 5" in text
    rows = [line for line in plain_lines(output) if re.match(r"^\s*\d+ \S", line)]
    for i, label in enumerate(SENTENCE):
        assert any(re.match(rf"^\s*{i} {re.escape(label)}\s", row) for row in rows), label


def test_without_colour_the_max_cell_is_full_block_and_zero_is_blank() -> None:
    matrix = np.array([[0.0, 0.5, 1.0], [1.0, 0.0, 0.0], [0.25, 0.25, 0.5]])
    output = render(Heatmap(matrix, ["a", "b", "c"]), 80, colour=False)
    rows = {line.split()[1]: line for line in plain_lines(output) if re.match(r"^\d [abc] ", line)}
    cell_w = 3  # 3 columns easily fit 80 cells, so the widest cells are used
    cells = {label: row[-3 * cell_w :] for label, row in rows.items()}
    assert cells["a"] == "   " + "▒▒▒" + "███"  # 0 -> blank, 0.5 -> middle shade, max -> █
    assert cells["b"] == "███" + "      "
    assert cells["c"] == "░░░" + "░░░" + "▒▒▒"  # 0.25 of vmax 1.0 is the second shade


def test_shade_legend_gives_the_range_of_each_shade() -> None:
    output = render(Heatmap(np.array([[0.0, 0.5]]), ["x"]), 100, colour=False)
    text = ANSI.sub("", output)
    for shade, bounds in zip(SHADES, ["0.00–0.10", "0.10–0.20", "0.20–0.30"], strict=False):
        assert f"▕{shade}▏{bounds}" in text
    narrow = ANSI.sub("", render(Heatmap(np.array([[0.0, 0.5]]), ["x"]), 30, colour=False))
    assert "0.00 ▕ ░▒▓█▏ 0.50" in narrow  # the compact ramp when the ranges do not fit


def test_colour_output_has_colour_codes_and_plain_output_has_none() -> None:
    heatmap = Heatmap(attention(5), list("abcde"), title="t")
    coloured = render(heatmap, 80, colour=True)
    assert "\x1b[48;2;" in coloured  # truecolor backgrounds
    assert "█" not in coloured  # colours, not shades, carry the values
    plain = render(heatmap, 80, colour=False)
    assert "\x1b[" not in plain
    assert "█" in plain


def test_colour_legend_shows_the_numeric_range() -> None:
    matrix = np.array([[0.1, 0.63], [0.2, 0.3]])
    text = ANSI.sub("", render(Heatmap(matrix, ["a", "b"]), 80, colour=True))
    assert re.search(r"0\.00 ▕ +▏ 0\.63", text)


def test_no_color_console_uses_shades(monkeypatch: pytest.MonkeyPatch) -> None:
    heatmap = Heatmap(column_zero_hot(4), list("abcd"))
    output = render(heatmap, 80, colour=True, no_color=True)
    assert "█" in output
    assert not re.search(r"\x1b\[[0-9;]*[34]8;", output)  # no foreground/background colour
    monkeypatch.setenv("NO_COLOR", "1")
    console = Console(width=80, file=io.StringIO(), color_system="truecolor", force_terminal=True)
    console.print(heatmap, crop=False)
    file = console.file
    assert isinstance(file, io.StringIO)
    assert "█" in file.getvalue()


def test_numbers_are_stacked_vertically_when_wider_than_a_cell() -> None:
    output = render(Heatmap(column_zero_hot(17), SENTENCE), 40, colour=False)
    lines = plain_lines(output)
    units = next(i for i, line in enumerate(lines) if line.endswith("01234567890123456"))
    assert lines[units - 1].endswith(" " * 10 + "1111111")


@pytest.mark.slow  # 512 tokens
@pytest.mark.parametrize("colour", [True, False])
def test_512_tokens_at_80_are_paged_and_fit(colour: bool) -> None:
    n = 512
    heatmap = Heatmap(attention(n), [f"tok{i}" for i in range(n)], title="long input")
    output = render(heatmap, 80, colour=colour)
    assert_fits(output, 80)
    pages = re.findall(r"keys (\d+)–(\d+) of 512", ANSI.sub("", output))
    assert len(pages) > 1
    assert int(pages[0][0]) == 0 and int(pages[-1][1]) == n - 1
    for (_, end), (start, _) in itertools.pairwise(pages):
        assert int(start) == int(end) + 1  # pages cover every column once
    lines = plain_lines(output)
    last_digits = ["".join(line[-1:] for line in lines[i : i + 3]) for i in range(len(lines))]
    assert "511" in last_digits  # column 511 is numbered, its digits stacked vertically


@pytest.mark.parametrize("width", [30, 50, 80, 200])
def test_tricky_labels_keep_widths_and_rows_aligned(width: int) -> None:
    n = len(TRICKY_LABELS)
    heatmap = Heatmap(column_zero_hot(n), TRICKY_LABELS, title="tricky")
    output = render(heatmap, width, colour=False)
    assert_fits(output, width)
    assert not any(char in output for char in "\t\x00\u202e")
    rows = [line for line in plain_lines(output) if "█" in line and "▕" not in line]
    assert len(rows) == n  # no label broke its row into two lines
    for i, row in enumerate(rows):
        assert row.lstrip().startswith(f"{i} ")
    starts = {cell_len(row[: row.index("█")]) for row in rows}
    assert len(starts) == 1, f"first cells start at different columns: {starts}"
    assert max(segment_widths(heatmap, width, colour=True)) <= width


def test_long_labels_are_cut_with_an_ellipsis() -> None:
    text = ANSI.sub(
        "", render(Heatmap(column_zero_hot(2), ["x" * 40, "日" * 20]), 80, colour=False)
    )
    assert "x" * 40 not in text
    assert re.search(r"x{5,}…", text)
    assert re.search(r"日{3,}…", text)


def test_control_characters_are_shown_escaped() -> None:
    text = ANSI.sub("", render(Heatmap(np.ones((2, 2)), ["a\nb", "c\td"]), 80, colour=False))
    assert "a\\nb" in text and "c\\td" in text


@pytest.mark.parametrize("colour", [True, False])
def test_absurdly_narrow_terminal_gets_a_short_note(colour: bool) -> None:
    heatmap = Heatmap(attention(len(SENTENCE)), SENTENCE, title="a title")
    output = render(heatmap, 5, colour=colour)
    assert_fits(output, 5)
    assert 1 <= len(plain_lines(output)) <= 2
    assert plain_lines(output)[0].startswith("(")


@pytest.mark.parametrize("colour", [True, False])
def test_single_token_zeros_and_nan_do_not_crash(colour: bool) -> None:
    assert "0" in ANSI.sub("", render(Heatmap(np.zeros((1, 1)), ["only"]), 40, colour=colour))
    zeros = ANSI.sub("", render(Heatmap(np.zeros((3, 3)), list("abc")), 40, colour=colour))
    assert "1.00" in zeros  # an all-zero matrix gets the scale 0 .. 1
    matrix = np.array([[np.nan, 0.5], [np.inf, -1.0]])
    output = render(Heatmap(matrix, ["a", "b"]), 40, colour=colour)
    assert "·" in output
    assert_fits(output, 40)


def test_different_column_labels_get_a_key_legend() -> None:
    heatmap = Heatmap(np.ones((2, 3)), ["word", "other"], ["k-zero", "k-one", "k-two"])
    text = ANSI.sub("", render(heatmap, 80, colour=False))
    assert re.search(r"0 k-zero\s+1 k-one\s+2 k-two", text)
    same = Heatmap(np.ones((2, 2)), ["a", "b"], ["a", "b"])
    assert "keys:" not in ANSI.sub("", render(same, 80, colour=False))


def test_explicit_vmax_sets_the_scale() -> None:
    text = ANSI.sub("", render(Heatmap(np.array([[1.0]]), ["a"], vmax=2.0), 80, colour=False))
    assert "2.00" in text
    assert "█" not in text.replace("▕█▏", "")  # 1.0 of 2.0 is a middle shade


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="row labels"):
        Heatmap(np.ones((2, 2)), ["a"])
    with pytest.raises(ValueError, match="2-D"):
        Heatmap(np.ones(3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="vmax"):
        Heatmap(np.ones((1, 1)), ["a"], vmax=0.0)


# ---------------------------------------------------------------------------
# HeadGrid


def grid_12_heads() -> HeadGrid:
    heads = np.stack([attention(14, seed) for seed in range(12)])  # (12, 14, 14)
    return HeadGrid(
        heads, SENTENCE[:14], panel_titles=[f"head {h}" for h in range(12)], title="layer 3"
    )


def panels_on_first_line(output: str) -> int:
    line = next(line for line in plain_lines(output) if "head 0" in line)
    return len(re.findall(r"head \d+", line))


@pytest.mark.parametrize("colour", [True, False])
def test_head_grid_fits_and_shows_every_head(colour: bool) -> None:
    grid = grid_12_heads()
    per_line = {}
    for width in (80, 200):
        output = render(grid, width, colour=colour)
        assert_fits(output, width)
        assert max(segment_widths(grid, width, colour=colour)) <= width
        text = ANSI.sub("", output)
        for h in range(12):
            assert re.search(rf"head {h}\b", text)
        assert "layer 3" in text
        assert "11 conseguiu" in text  # the token list under the grid
        per_line[width] = panels_on_first_line(output)
    assert per_line[200] > per_line[80] >= 2


def test_head_grid_colour_packs_two_rows_per_line() -> None:
    grid = HeadGrid(attention(6)[None], list("abcdef"), panel_titles=["head 0"])
    coloured = render(grid, 80, colour=True)
    assert "▀" in coloured and "\x1b[" in coloured
    plain = plain_lines(render(grid, 80, colour=False))
    panel_lines_colour = [line for line in plain_lines(coloured) if "▀" in line]
    assert len(panel_lines_colour) == 3  # 6 matrix rows in 3 text lines
    assert not any("▀" in line for line in plain)


def test_head_grid_uses_one_scale_for_all_heads() -> None:
    heads = np.stack([np.full((2, 2), 1.0), np.full((2, 2), 0.5)])  # (2, 2, 2)
    grid = HeadGrid(heads, ["a", "b"], panel_titles=["strong", "weak"])
    lines = plain_lines(render(grid, 80, colour=False))
    panel_rows = [line for line in lines if "█" in line and "▕" not in line]
    assert len(panel_rows) == 2
    for row in panel_rows:
        assert "█" in row and "▒" in row  # the weak head is a middle shade, not full


@pytest.mark.parametrize("colour", [True, False])
def test_head_grid_on_a_tiny_terminal_says_so(colour: bool) -> None:
    output = render(grid_12_heads(), 10, colour=colour)
    assert_fits(output, 10)
    wide = render(
        HeadGrid(np.ones((2, 60, 60)), list(map(str, range(60))), panel_titles=["a", "b"]),
        40,
        colour=colour,
    )
    assert_fits(wide, 40)
    assert "--head" in ANSI.sub("", wide)
    narrow = render(grid_12_heads(), 5, colour=colour)
    assert_fits(narrow, 5)


@pytest.mark.parametrize("colour", [True, False])
def test_head_grid_single_token_and_nan(colour: bool) -> None:
    output = render(
        HeadGrid(np.zeros((2, 1, 1)), ["x"], panel_titles=["h0", "h1"]), 30, colour=colour
    )
    assert "h1" in output
    heads = np.array([[[np.nan, 1.0], [0.5, np.nan]], [[1.0, 0.0], [np.nan, np.nan]]])
    output = render(HeadGrid(heads, ["a", "b"], panel_titles=["h0", "h1"]), 30, colour=colour)
    assert_fits(output, 30)


# ---------------------------------------------------------------------------
# Property: any matrix, any labels, any width: no crash and nothing too wide


@pytest.mark.slow  # hypothesis
@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 40),
    width=st.integers(20, 300),
    colour=st.booleans(),
    seed=st.integers(0, 2**16),
    labels=st.lists(st.text(max_size=20), min_size=40, max_size=40),
)
def test_never_crashes_never_too_wide(
    n: int, width: int, colour: bool, seed: int, labels: list[str]
) -> None:
    matrix = attention(n, seed)
    matrix[0, 0] = np.nan if seed % 3 == 0 else matrix[0, 0]
    for renderable in (
        Heatmap(matrix, labels[:n], title=labels[0]),
        HeadGrid(np.stack([matrix, matrix.T]), labels[:n], panel_titles=labels[:2]),
    ):
        assert max(segment_widths(renderable, width, colour=colour)) <= width
        assert_fits(render(renderable, width, colour=colour), width)


def test_zero_width_joiner_is_kept_only_inside_emoji() -> None:
    # rich counts "a\u200db" as 1 cell but terminals draw 2, and a joiner there hides, so it
    # is shown escaped; inside an emoji sequence it is kept (rich and terminals agree on 2)
    family = "👨\u200d👩\u200d👧"
    output = render(Heatmap(np.ones((2, 2)), ["a\u200db", family]), 80, colour=False)
    assert "a\u200db" not in output and " aU+200Db " in output
    assert family in output


# ---------------------------------------------------------------------------
# Long input: 512 pieces of real text


@pytest.fixture(scope="module")
def long_labels(embedded_folder) -> list[str]:
    """The labels of the Portuguese sample sentence, repeated and cut to 512 pieces."""
    from attnviz.text.tokenize import load_tokenizer, tokenize
    from tests.conftest import PT_SENTENCE

    text = " ".join([PT_SENTENCE] * 30)
    pieces = tokenize(load_tokenizer(embedded_folder), text, max_positions=512, truncate=True)
    assert len(pieces) == 512 and pieces.dropped > 0
    return pieces.labels


@pytest.mark.slow  # 512 tokens
@pytest.mark.parametrize(("width", "colour"), [(80, True), (120, False)])
def test_512_pieces_of_text_are_paged_within_the_width(
    long_labels: list[str], width: int, colour: bool
) -> None:
    n = len(long_labels)
    output = render(Heatmap(attention(n), long_labels, title="512 pieces"), width, colour=colour)
    assert_fits(output, width)
    text = ANSI.sub("", output)
    pages = [(int(a), int(b)) for a, b in re.findall(r"keys (\d+)–(\d+) of 512", text)]
    assert pages[0][0] == 0 and pages[-1][1] == n - 1
    assert all(b + 1 == c for (_, b), (c, _) in itertools.pairwise(pages))
    assert all(b - a + 1 >= 40 for a, b in pages[:-1])  # pages are not needlessly thin
    rows = [line for line in plain_lines(output) if re.match(r"^\s*\d+ \S", line)]
    for i in (0, 1, 255, 511):  # each row is on every page, with its label
        label = long_labels[i]
        on_pages = [row for row in rows if re.match(rf"^\s*{i} {re.escape(label[:5])}", row)]
        assert len(on_pages) == len(pages), (i, label)


def test_512_pieces_head_grid_points_to_a_single_head(long_labels: list[str]) -> None:
    n = len(long_labels)
    heads = np.stack([attention(n, seed) for seed in range(2)])  # (2, 512, 512)
    grid = HeadGrid(heads, long_labels, panel_titles=["head 0", "head 1"], title="layer 0")
    output = render(grid, 100, colour=True)
    assert_fits(output, 100)
    assert "--head" in ANSI.sub("", output) and "--out" in ANSI.sub("", output)


@pytest.mark.parametrize("colour", [True, False])
def test_on_a_narrow_terminal_the_legend_keeps_the_top_of_the_scale(colour: bool) -> None:
    # the legend `0.000 ▕ ░▒▓█▏ 0.059` is 19 cells: at 15 it used to be cut to `… 0`
    matrix = np.full((17, 17), 1 / 17)
    output = render(Heatmap(matrix, SENTENCE), 15, colour=colour)
    assert_fits(output, 15)
    assert "0.059" in ANSI.sub("", output)


@pytest.mark.parametrize("width", [2, 5, 10])
def test_head_grid_on_a_very_narrow_terminal_is_one_short_line(width: int) -> None:
    output = render(grid_12_heads(), width, colour=True)  # panels 14 cells wide
    assert_fits(output, width)
    assert len(plain_lines(output)) == 1
    assert plain_lines(output)[0].startswith("(")


def test_a_joiner_left_dangling_by_a_dropped_skin_tone_is_dropped_too() -> None:
    # found by tests/measures/test_properties.py: the lone skin tone after the last joiner was
    # dropped but the joiner kept; ending the label, it swallowed the padding space after
    # it (in rich's count) and shifted that row one cell left of the others
    labels = ["\x06LO🧑\u200d🔬\u200d🏽", "a🏽\u200d🔬", "plain"]
    output = render(Heatmap(np.ones((3, 3)), labels), 60, colour=False)
    rows = [line for line in plain_lines(output) if "█" in line and "▕" not in line]
    assert len(rows) == 3
    assert len({cell_len(row[: row.index("█")]) for row in rows}) == 1
    assert "\u200d " not in output and "a\u200d" not in output


def test_head_grid_columns_keep_one_layer_per_line() -> None:
    """The model view asks for 3 panels a line: a wide terminal still breaks after 3."""
    import io

    from rich.console import Console

    from attnviz.render.terminal import HeadGrid

    grid = np.full((6, 4, 4), 0.25)  # 2 layers x 3 heads
    titles = [f"L{layer} H{head}" for layer in range(2) for head in range(3)]
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(
        HeadGrid(grid, list("abcd"), panel_titles=titles, columns=3)
    )
    title_lines = [line for line in out.getvalue().splitlines() if "L0 H0" in line or "L1" in line]
    assert len(title_lines) == 2 and "L1" not in title_lines[0]


def test_the_heads_legend_names_the_units_it_lists() -> None:
    """A grid of heads over words says words (and word order); over pieces, tokens."""
    import io

    from rich.console import Console

    import attnviz

    analysis = attnviz.analyse("Unbelievably, João waved.")

    def legend(units: str, lang: str) -> str:
        console = Console(width=120, file=io.StringIO(), color_system=None, highlight=False)
        console.print(analysis.heads(1, units=units, lang=lang))
        return console.file.getvalue()  # type: ignore[attr-defined]

    words = legend("words", "en")
    assert "in word order" in words and "\nwords:  0 [CLS]  1 Unbelievably" in words
    assert "tokens:" not in words
    pieces = legend("tokens", "en")
    assert "in token order" in pieces and "\ntokens:  0 [CLS]  1 Un  2 ##bel" in pieces
    assert "na ordem das palavras" in legend("words", "pt")

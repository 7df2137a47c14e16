"""Properties that hold for any input, checked with hypothesis.

- the terminal renderers never crash and never draw a line wider than the terminal,
  for any matrix (1..300 tokens), any Unicode labels and any width;
- the image renderers save a file that opens, for any Unicode labels and titles;
- tokenizing any text either works (offsets inside the text, non-empty labels) or is
  the documented BadInput;
- merging pieces into words keeps rows summing to 1;
- the encoder's attention rows sum to 1, and padding changes nothing for real tokens.

Example counts are sized so that the whole file takes about a minute on a busy
two-core machine. Set ATTNVIZ_PROPERTY_SCALE=10 (or more) for a deeper local run.
"""

from __future__ import annotations

import itertools
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from attnviz.errors import BadInput
from attnviz.render.terminal import HeadGrid, Heatmap
from tests.rendering import ANSI, plain_lines, render

pytestmark = pytest.mark.slow  # hypothesis, about a minute on a busy two-core machine

SCALE = float(os.environ.get("ATTNVIZ_PROPERTY_SCALE", "1"))
# Characters that must never reach the terminal: controls (an ESC could start an escape
# sequence), and bidirectional overrides or isolates, which move the text after them.
FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# In images also lone surrogates (FreeType cannot draw them) and U+FFFE/U+FFFF (not XML).
UNDRAWABLE = re.compile(FORBIDDEN.pattern[:-1] + "\ud800-\udfff\ufffe\uffff]")


def examples(count: int, **options: Any) -> settings:
    """`count` examples (times ATTNVIZ_PROPERTY_SCALE), no deadline: the machine is shared."""
    return settings(
        max_examples=max(1, round(count * SCALE)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        **options,
    )


# ---------------------------------------------------------------------------
# Strategies

# Pieces of text that break naive layouts: combining marks, emoji with skin tones and
# ZWJ sequences, flags, CJK, right-to-left scripts, zero-width and format characters,
# controls (and an ANSI escape sequence), a lone surrogate as undecodable bytes in argv
# arrive, noncharacters, and long runs.
FRAGMENTS = [
    "",
    " ",
    "e\u0301",
    "\u0301",
    "\u0e33",
    "\u0903",
    "👍🏽",
    "🏽",
    "👨\u200d👩\u200d👧",
    "🧑\u200d🔬",
    "🔬\u200d🏽",  # a joiner before a skin tone that is dropped (found by this file)
    "a🏽\u200d",
    "🏳️\u200d🌈",
    "🇵🇹",
    "🇵",
    "⚠\ufe0f",
    "東京",
    "日本語のテキストです",
    "\u3000",
    "مرحبا",
    "ﷺ",
    "שלום",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "\u200e",
    "\u200f",
    "\u202e",
    "\u2067",
    "\u061c",
    "\t",
    "\n",
    "\r",
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\udcff",
    "\ufffe",
    "\U000e0001",
    "𒐫",
    "[CLS]",
    "##ing",
    "$x^2$",
    "a" * 30,
]
label_strategy = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=4
).map("".join)


def skewed_size(low: int, high: int) -> st.SearchStrategy[int]:
    """Sizes from low to high, most of them small (a cube of a uniform draw)."""
    return st.integers(0, 1000).map(lambda u: low + int((high - low) * (u / 1000) ** 3))


KINDS = ("softmax", "zeros", "ones", "uniform", "masked rows", "one-hot", "tiny", "nan")


@st.composite
def attention_arrays(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    """Arrays of `shape` (..., T, T) like attention: softmax rows, or an edge case."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.random(shape) ** 4
    values /= values.sum(axis=-1, keepdims=True)  # rows sum to 1
    kind = draw(st.sampled_from(KINDS))
    if kind == "zeros":
        values[:] = 0.0
    elif kind == "ones":
        values[:] = 1.0
    elif kind == "uniform":
        values[:] = 1.0 / shape[-1]  # every row all equal
    elif kind == "masked rows":
        values[..., rng.random(shape[-2]) < 0.5, :] = 0.0  # rows a mask left all zero
    elif kind == "one-hot":
        values[:] = 0.0
        values[..., 0] = 1.0
    elif kind == "tiny":
        values *= 1e-9
    elif kind == "nan":
        values[..., rng.random(shape[-2]) < 0.2, :] = np.nan
    return values


def assert_fits_and_is_safe(output: str, width: int) -> None:
    """Every line at most `width` cells, and nothing that could take over the terminal."""
    lines = plain_lines(output)
    assert lines, "nothing was printed"
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, f"lines wider than {width}: {too_wide[:2]!r}"
    unsafe = [line for line in lines if FORBIDDEN.search(line)]
    assert not unsafe, f"control or bidi characters reached the terminal: {unsafe[:2]!r}"


# ---------------------------------------------------------------------------
# Terminal renderers


@examples(300)
@given(
    n=skewed_size(1, 300),
    data=st.data(),
    width=st.integers(20, 300),
    colour=st.booleans(),
    other_keys=st.booleans(),
)
def test_heatmap_fits_any_width_and_shows_the_top_of_the_scale(
    n: int, data: st.DataObject, width: int, colour: bool, other_keys: bool
) -> None:
    matrix = data.draw(attention_arrays((n, n)), "matrix")
    labels = data.draw(st.lists(label_strategy, min_size=n, max_size=n), "labels")
    keys = data.draw(st.lists(label_strategy, min_size=n, max_size=n)) if other_keys else None
    title = data.draw(st.one_of(st.none(), label_strategy), "title")
    heatmap = Heatmap(matrix, labels, keys, title=title)
    output = render(heatmap, width, colour=colour)
    assert_fits_and_is_safe(output, width)
    text = ANSI.sub("", output)
    assert heatmap.scale.fmt(heatmap.scale.vmax) in text  # the legend's top value, uncut
    if n > 1:
        assert re.search(rf"^\s*{n - 1} ", text, re.MULTILINE)  # the last row is there


@examples(150)
@given(n=skewed_size(1, 300), data=st.data(), width=st.integers(20, 300))
def test_heatmap_rows_stay_aligned_whatever_the_labels(
    n: int, data: st.DataObject, width: int
) -> None:
    # every cell at the maximum is a full block `█`; labels that contain the block or the
    # legend's brackets are left out so that matrix rows can be told apart from the rest
    labels = data.draw(
        st.lists(label_strategy.map(lambda s: re.sub("[█▕▏]", "", s)), min_size=n, max_size=n)
    )
    output = render(Heatmap(np.ones((n, n)), labels), width, colour=False)
    rows = [line for line in plain_lines(output) if "█" in line and "▕" not in line]
    pages = len(re.findall(r"keys \d+–\d+ of|\d+–\d+/\d+", ANSI.sub("", output))) or 1
    assert len(rows) == n * pages, "a label broke its row onto two lines"
    for i, row in enumerate(rows):
        assert re.match(rf"\s*{i % n} ", row), f"row {i % n} is out of order: {row!r}"
    starts = {cell_len(row[: row.index("█")]) for row in rows}
    assert len(starts) == 1, f"the first cells start at different columns: {starts}"
    assert len({cell_len(row) for row in rows}) <= pages  # each page's rows end together


@examples(200)
@given(
    heads=st.integers(1, 12),
    n=skewed_size(1, 100),
    data=st.data(),
    width=st.integers(20, 300),
    colour=st.booleans(),
)
def test_head_grid_fits_any_width(
    heads: int, n: int, data: st.DataObject, width: int, colour: bool
) -> None:
    matrices = data.draw(attention_arrays((heads, n, n)), "matrices")
    labels = data.draw(st.lists(label_strategy, min_size=n, max_size=n), "labels")
    titles = data.draw(st.lists(label_strategy, min_size=heads, max_size=heads), "titles")
    title = data.draw(st.one_of(st.none(), label_strategy), "title")
    grid = HeadGrid(matrices, labels, panel_titles=titles, title=title)
    output = render(grid, width, colour=colour)
    assert_fits_and_is_safe(output, width)
    text = ANSI.sub("", output)
    if "(one head is" not in text:  # the panels fit: legend and token list follow
        assert grid.scale.fmt(grid.scale.vmax) in text
        assert "tokens:" in text


@examples(150)
@given(
    n=skewed_size(1, 300),
    heads=st.integers(1, 12),
    width=st.integers(1, 19),
    height=st.integers(1, 5),
    colour=st.booleans(),
    data=st.data(),
)
def test_tiny_terminals_get_a_heatmap_or_a_one_line_note(
    n: int, heads: int, width: int, height: int, colour: bool, data: st.DataObject
) -> None:
    labels = data.draw(st.lists(label_strategy, min_size=n, max_size=n), "labels")
    matrix = data.draw(attention_arrays((n, n)), "matrix")
    titles = [f"head {h}" for h in range(heads)]
    for renderable in (
        Heatmap(matrix, labels, title="layer 0"),
        HeadGrid(np.stack([matrix] * heads), labels, panel_titles=titles, title="layer 0"),
    ):
        output = render(renderable, width, colour=colour, height=height)
        assert_fits_and_is_safe(output, width)
        lines = plain_lines(output)
        if lines[0].startswith("("):  # nothing fits: a note, and only that
            assert len(lines) == 1


# ---------------------------------------------------------------------------
# Image renderers


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("images")


@examples(20)
@given(
    n=st.integers(1, 10),
    heads=st.integers(1, 4),
    grid=st.booleans(),
    suffix=st.sampled_from([".png", ".png", ".svg", ".pdf"]),
    theme=st.sampled_from(["light", "dark"]),
    annotate=st.booleans(),
    data=st.data(),
)
def test_images_save_for_any_labels_and_titles(
    image_dir: Path,
    n: int,
    heads: int,
    grid: bool,
    suffix: str,
    theme: str,
    annotate: bool,
    data: st.DataObject,
) -> None:
    from PIL import Image

    from attnviz.render.figures import grid_figure, heatmap_figure
    from attnviz.render.layout import MAX_FIGURE_IN
    from attnviz.render.saving import save_figure

    labels = data.draw(st.lists(label_strategy, min_size=n, max_size=n), "labels")
    title = data.draw(st.one_of(label_strategy, st.text(min_size=100, max_size=400)), "title")
    matrices = data.draw(attention_arrays((heads, n, n)), "matrices")
    if grid:
        titles = data.draw(st.lists(label_strategy, min_size=heads, max_size=heads))
        fig = grid_figure(
            matrices, labels, panel_titles=titles, title=title, theme=theme, annotate=annotate
        )
    else:
        fig = heatmap_figure(matrices[0], labels, title=title, theme=theme, annotate=annotate)
    assert max(fig.get_size_inches()) <= MAX_FIGURE_IN
    for ax in fig.axes:
        for tick in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
            assert len(tick.get_text()) <= 20
            assert not UNDRAWABLE.search(tick.get_text())
    path = image_dir / f"property{suffix}"
    dpi = 40
    save_figure(fig, path, dpi=dpi)
    if suffix == ".png":
        with Image.open(path) as image:
            assert max(image.size) <= (MAX_FIGURE_IN + 0.5) * dpi  # a long title wraps
    elif suffix == ".svg":
        ET.parse(path)  # well-formed XML, whatever the labels
    else:
        assert path.read_bytes().startswith(b"%PDF")


# ---------------------------------------------------------------------------
# Tokenizer

# Valid Unicode text: no lone surrogates (the CLI refuses undecodable argv).
VALID_FRAGMENTS = [f for f in FRAGMENTS if not re.search("[\ud800-\udfff]", f)]
unicode_text = st.lists(
    st.one_of(st.characters(codec="utf-8"), st.sampled_from(VALID_FRAGMENTS)), max_size=20
).map("".join)
# Mostly short texts; some repeated past the model's 512 positions.
texts = st.one_of(
    unicode_text,
    st.tuples(unicode_text, st.integers(1, 120)).map(lambda pair: pair[0] * pair[1]),
)


class EmbeddedTokenizer:
    """The embedded model's tokenizer, with a short repr for hypothesis's failure reports."""

    def __init__(self, folder: Path) -> None:
        from attnviz.text.tokenize import load_tokenizer

        self.tokenizer = load_tokenizer(folder)

    def __repr__(self) -> str:
        return "EmbeddedTokenizer()"

    def __call__(self, text: str, pair: str | None = None, *, truncate: bool = False) -> Any:
        from attnviz.text.tokenize import tokenize

        return tokenize(self.tokenizer, text, pair=pair, max_positions=512, truncate=truncate)


@pytest.fixture(scope="module")
def tokenize(embedded_folder: Path) -> EmbeddedTokenizer:
    return EmbeddedTokenizer(embedded_folder)


@examples(300)
@given(text=texts, pair=st.one_of(st.none(), texts), truncate=st.booleans())
def test_tokenizing_any_text_gives_pieces_inside_the_text(
    tokenize: EmbeddedTokenizer, text: str, pair: str | None, truncate: bool
) -> None:
    try:
        pieces = tokenize(text, pair, truncate=truncate)
    except BadInput as error:
        message = str(error)
        assert "nothing the tokenizer keeps" in message or (
            not truncate and "truncate=True" in message  # Python words
        ), message
        return
    assert 3 <= len(pieces) <= 512
    assert len(pieces.ids) == len(pieces.offsets) == len(pieces.labels) == len(pieces)
    for i, (start, end) in enumerate(pieces.offsets):
        assert 0 <= start <= end <= len(pieces.source(i)), (i, start, end)
    assert all(isinstance(label, str) and label for label in pieces.labels)
    words = pieces.words()
    assert [i for word in words for i in word.pieces] == list(range(len(pieces)))
    assert all(word.label for word in words)
    # truncation is switched off again: the next text is not cut
    assert tokenize.tokenizer.truncation is None


def test_tokenizing_undecodable_text_is_bad_input(tokenize: EmbeddedTokenizer) -> None:
    with pytest.raises(BadInput):
        tokenize("caf\udcff")


# ---------------------------------------------------------------------------
# Word merging


@st.composite
def row_stochastic_with_groups(draw: st.DrawFn) -> tuple[np.ndarray, list[list[int]]]:
    """A softmax-like array (..., T, T) and a random split of 0..T-1 into contiguous words."""
    n = draw(st.integers(1, 40))
    lead = draw(st.sampled_from([(), (3,), (2, 3)]))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1)) if n > 1 else set())
    bounds = [0, *cuts, n]
    groups = [list(range(a, b)) for a, b in itertools.pairwise(bounds)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    matrix = rng.random((*lead, n, n)) ** draw(st.sampled_from([1, 4, 16]))
    matrix[matrix < draw(st.sampled_from([0.0, 0.5]))] = 0.0  # exact zeros, as masks give
    matrix[..., 0] += 1e-12  # no row is all zero
    return matrix / matrix.sum(axis=-1, keepdims=True), groups


@examples(200)
@given(case=row_stochastic_with_groups())
def test_merging_words_keeps_rows_summing_to_one(
    case: tuple[np.ndarray, list[list[int]]],
) -> None:
    from attnviz.measures.select import merge_words

    matrix, groups = case  # (..., T, T)
    merged = merge_words(matrix, groups)  # (..., W, W)
    assert merged.shape == (*matrix.shape[:-2], len(groups), len(groups))
    assert np.all(merged >= 0)
    np.testing.assert_allclose(merged.sum(axis=-1), 1.0, atol=1e-9)
    # a word's share of attention is the sum over its pieces, averaged over query pieces
    first = groups[0]
    expected = matrix[..., first, :][..., :, first].sum(axis=-1).mean(axis=-1)
    np.testing.assert_allclose(merged[..., 0, 0], expected, atol=1e-12)


# ---------------------------------------------------------------------------
# Encoder


@pytest.fixture(scope="module")
def encoder(tiny_bert: Any) -> Iterator[Any]:
    import torch

    from attnviz.model.weights import load_encoder

    # One thread: on a busy two-core machine, tiny forwards spend ~100 ms each waiting for
    # a second OpenMP thread, against ~0.3 ms on one.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield load_encoder(tiny_bert())  # 2 layers, 4 heads, 64 positions
    finally:
        torch.set_num_threads(threads)


@examples(200)
@given(
    lengths=st.lists(st.integers(1, 64), min_size=1, max_size=3),
    padded_to=st.integers(0, 64),
    causal=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_attention_rows_sum_to_one_and_padding_changes_nothing(
    encoder: Any, lengths: list[int], padded_to: int, causal: bool, seed: int
) -> None:
    import torch

    cfg = encoder.config
    T = max(max(lengths), padded_to)
    B = len(lengths)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (B, T), generator=generator)  # (B, T)
    types = torch.randint(0, cfg.type_vocab_size, (B, T), generator=generator)  # (B, T)
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()  # (B, T)
    with torch.inference_mode():
        weights = encoder(ids, types, attention_mask=mask, causal=causal).attentions
    assert weights.shape == (cfg.num_layers, B, cfg.num_heads, T, T)  # (L, B, nh, T, T)
    assert torch.isfinite(weights).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights[..., 0]), atol=1e-5, rtol=0)
    for b, length in enumerate(lengths):
        assert (weights[:, b, :, :, length:] == 0).all(), "a padded key got attention"
        if causal:
            assert (weights[:, b].triu(1) == 0).all(), "a query attended to a later key"
        with torch.inference_mode():
            alone = encoder(
                ids[b : b + 1, :length], types[b : b + 1, :length], causal=causal
            ).attentions  # (L, 1, nh, length, length)
        real = weights[:, b : b + 1, :, :length, :length]
        torch.testing.assert_close(real, alone, atol=1e-5, rtol=0)

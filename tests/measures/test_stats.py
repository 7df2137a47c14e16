"""Head statistics: known answers on synthetic attention, token kinds, labels, renderers."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.cells import cell_len
from rich.console import Console, RenderableType
from tokenizers import Tokenizer

from attnviz.errors import AttnvizError, BadInput
from attnviz.measures.stats import (
    SORT_COLUMNS,
    STATISTICS,
    HeadRecord,
    StatsAccumulator,
    _sums_numpy,
    _sums_torch,
    label_for,
    sort_records,
)
from attnviz.render.saving import save_figure
from attnviz.render.stats import StatsTable
from attnviz.render.stats_image import stats_figure, stats_grids
from attnviz.text.pieces import Pieces, TokenKinds, token_kinds
from attnviz.text.tokenize import load_tokenizer, tokenize

RECORD_KEYS = {"layer", "head", "entropy", "cls", "sep", "punct", "self", "prev", "next", "label"}


def plain_kinds(T: int) -> TokenKinds:
    """[CLS] first, [SEP] last, no punctuation."""
    cls = np.zeros(T, dtype=bool)
    sep = np.zeros(T, dtype=bool)
    cls[0] = sep[-1] = True
    return TokenKinds(cls=cls, sep=sep, punct=np.zeros(T, dtype=bool))


def random_kinds(T: int, rng: np.random.Generator) -> TokenKinds:
    cls = np.zeros(T, dtype=bool)
    cls[0] = True
    sep = np.zeros(T, dtype=bool)
    sep[-1] = True
    punct = rng.random(T) < 0.3
    punct[[0, -1]] = False
    return TokenKinds(cls=cls, sep=sep, punct=punct)


def softmax_rows(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    weights = np.exp(rng.normal(size=shape) * 2)
    return weights / weights.sum(axis=-1, keepdims=True)


def single_pattern(matrix: np.ndarray, layers: int = 2, heads: int = 3) -> np.ndarray:
    return np.broadcast_to(matrix, (layers, heads, *matrix.shape)).copy()  # (L, H, T, T)


def shift_by_one(T: int) -> np.ndarray:
    """Each row on the previous token; the first row on itself."""
    matrix = np.zeros((T, T))
    matrix[0, 0] = 1.0
    matrix[np.arange(1, T), np.arange(T - 1)] = 1.0
    return matrix


def stats_of(attentions: np.ndarray, kinds: TokenKinds) -> list[HeadRecord]:
    L, H = attentions.shape[:2]
    stats = StatsAccumulator(L, H)
    stats.add(attentions, kinds)
    return stats.result()


def naive_stats(sentences: list[tuple[np.ndarray, TokenKinds]]) -> np.ndarray:
    """The definition, one query at a time: (S, L, H) in STATISTICS order."""
    L, H = sentences[0][0].shape[:2]
    sums = np.zeros((len(STATISTICS), L, H))
    count = 0
    for attentions, kinds in sentences:
        T = attentions.shape[-1]
        count += T
        for layer in range(L):
            for head in range(H):
                for q in range(T):
                    row = attentions[layer, head, q]
                    entropy = -sum(p * math.log(p) for p in row if p > 0)
                    values = [
                        entropy,
                        row[kinds.cls].sum(),
                        row[kinds.sep].sum(),
                        row[kinds.punct].sum(),
                        row[q],
                        row[q - 1] if q > 0 else 0.0,
                        row[q + 1] if q < T - 1 else 0.0,
                    ]
                    sums[:, layer, head] += values
    return sums / count


# ---------------------------------------------------------------- known answers


def test_identity_attention_is_a_self_head_with_zero_entropy() -> None:
    records = stats_of(single_pattern(np.eye(6)), plain_kinds(6))
    assert len(records) == 2 * 3
    for record in records:
        assert record["self"] == pytest.approx(1.0)
        assert record["entropy"] == pytest.approx(0.0)
        assert record["prev"] == record["next"] == 0.0
        assert record["cls"] == pytest.approx(1 / 6)  # only query 0 attends to [CLS]
        assert record["label"] == "self"


def test_uniform_attention_has_entropy_log_t_and_is_broad() -> None:
    T = 7
    records = stats_of(single_pattern(np.full((T, T), 1 / T)), plain_kinds(T))
    for record in records:
        assert record["entropy"] == pytest.approx(math.log(T))
        assert record["cls"] == pytest.approx(1 / T)
        assert record["self"] == pytest.approx(1 / T)
        assert record["prev"] == pytest.approx((T - 1) / T / T)  # the first query has none
        assert record["label"] == "broad"


def test_shift_by_one_puts_t_minus_one_over_t_on_the_previous_token() -> None:
    T = 8
    records = stats_of(single_pattern(shift_by_one(T)), plain_kinds(T))
    for record in records:
        assert record["prev"] == pytest.approx((T - 1) / T)
        assert record["self"] == pytest.approx(1 / T)
        assert record["next"] == 0.0
        assert record["entropy"] == pytest.approx(0.0)
        assert record["label"] == "previous-token"


def test_next_token_pattern() -> None:
    T = 5
    records = stats_of(single_pattern(shift_by_one(T).T.copy()), plain_kinds(T))
    # transposed: row q attends to q+1, the last row to itself
    assert records[0]["next"] == pytest.approx((T - 1) / T)
    assert records[0]["label"] == "next-token"


def test_means_are_pooled_over_every_query_of_every_sentence() -> None:
    stats = StatsAccumulator(1, 1)
    stats.add(single_pattern(shift_by_one(2), 1, 1), plain_kinds(2))
    stats.add(single_pattern(shift_by_one(4), 1, 1), plain_kinds(4))
    (record,) = stats.result()
    assert record["prev"] == pytest.approx((1 + 3) / (2 + 4))  # not the mean of 1/2 and 3/4
    assert (stats.sentences, stats.queries) == (2, 6)


def test_a_cls_head() -> None:
    T = 6
    on_cls = np.zeros((T, T))
    on_cls[:, 0] = 1.0
    records = stats_of(single_pattern(on_cls), plain_kinds(T))
    assert records[0]["cls"] == pytest.approx(1.0)
    assert records[0]["label"] == "[CLS]"  # beats prev (1/T) and self (1/T)


def test_punctuation_and_sep_shares() -> None:
    T = 5
    kinds = TokenKinds(
        cls=np.array([1, 0, 0, 0, 0], dtype=bool),
        sep=np.array([0, 0, 0, 0, 1], dtype=bool),
        punct=np.array([0, 0, 1, 1, 0], dtype=bool),
    )
    attention = np.zeros((T, T))
    attention[:, 2] = 0.4
    attention[:, 3] = 0.3
    attention[:, 4] = 0.3
    (record,) = stats_of(single_pattern(attention, 1, 1), kinds)
    assert record["punct"] == pytest.approx(0.7)
    assert record["sep"] == pytest.approx(0.3)
    assert record["label"] == "punctuation"


def test_matches_the_definition_query_by_query() -> None:
    rng = np.random.default_rng(7)
    sentences = []
    for T in (4, 9, 1, 6):
        sentences.append((softmax_rows((2, 3, T, T), rng), random_kinds(T, rng)))
    sentences[1][0][1, 2, 3] = 0.0  # a fully masked row
    stats = StatsAccumulator(2, 3)
    for attentions, kinds in sentences:
        stats.add(attentions, kinds)
    np.testing.assert_allclose(stats.means(), naive_stats(sentences), atol=1e-12)


def test_add_batch_with_padding_equals_one_sentence_at_a_time() -> None:
    rng = np.random.default_rng(1)
    lengths = [5, 11, 3, 11, 7]
    L, H, Tmax = 3, 4, 11
    sentences = [
        (softmax_rows((L, H, T, T), rng).astype(np.float32), random_kinds(T, rng)) for T in lengths
    ]
    one_by_one = StatsAccumulator(L, H)
    for attentions, kinds in sentences:
        one_by_one.add(attentions, kinds)

    batch = np.full((L, len(lengths), H, Tmax, Tmax), np.nan, dtype=np.float32)
    for b, ((attentions, _), T) in enumerate(zip(sentences, lengths, strict=True)):
        batch[:, b, :, :T, :] = 0.0  # padding keys of real queries weigh 0
        batch[:, b, :, :T, :T] = attentions
        batch[:, b, :, T:, :T] = 1.0 / T  # padding queries hold something (ignored)
    batched = StatsAccumulator(L, H)
    batched.add_batch(batch[:, :2], lengths[:2], [k for _, k in sentences[:2]])
    batched.add_batch(batch[:, 2:], lengths[2:], [k for _, k in sentences[2:]])

    assert (batched.sentences, batched.queries) == (5, sum(lengths))
    assert (one_by_one.sentences, one_by_one.queries) == (5, sum(lengths))
    for got, want in zip(batched.result(), one_by_one.result(), strict=True):
        assert got["label"] == want["label"]
        for name in STATISTICS:
            assert got[name] == pytest.approx(want[name], abs=1e-6)  # type: ignore[literal-required]
        assert all(math.isfinite(got[name]) for name in STATISTICS)  # type: ignore[literal-required]


def test_the_gpu_path_ignores_padding_queries_even_nan_ones() -> None:
    """`_sums_torch` (attentions left on a GPU) on the padded batch of the test above."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    lengths, L, H, Tmax = [4, 9, 6], 2, 3, 9
    sentences = [(softmax_rows((L, H, T, T), rng), random_kinds(T, rng)) for T in lengths]
    batch = np.full((L, len(lengths), H, Tmax, Tmax), np.nan)
    for b, ((attentions, _), T) in enumerate(zip(sentences, lengths, strict=True)):
        batch[:, b, :, :T, :] = 0.0
        batch[:, b, :, :T, :T] = attentions
    kinds = [k for _, k in sentences]
    got = _sums_torch(torch.from_numpy(batch), lengths, kinds) / sum(lengths)
    np.testing.assert_allclose(got, naive_stats(sentences), atol=1e-12)


def test_a_real_batch_gives_the_same_statistics_as_a_tensor_and_as_numpy(
    embedded_folder: Path,
) -> None:
    """The encoder's batch summed in torch (as on a GPU) and in numpy (as on the CPU)."""
    pytest.importorskip("torch")
    from attnviz.pipeline import compute_batches, prepare_corpus

    texts = ["Short one.", "A somewhat longer sentence, with commas; and more words in it!", "Hi"]
    corpus = prepare_corpus(texts, model=str(embedded_folder))
    (batch,) = compute_batches(corpus, batch_size=8, device="cpu", on_device=True)
    kinds = [token_kinds(corpus.pieces[i]) for i in batch.indices]
    assert batch.attentions.shape[-1] > min(batch.lengths)  # padding is there
    on_device = _sums_torch(batch.attentions, batch.lengths, kinds)
    on_host = _sums_numpy(batch.attentions.numpy(), batch.lengths, kinds)
    np.testing.assert_allclose(
        on_device / sum(batch.lengths), on_host / sum(batch.lengths), rtol=0, atol=1e-9
    )
    from_tensor, from_array = StatsAccumulator(6, 12), StatsAccumulator(6, 12)
    from_tensor.add_batch(batch.attentions, batch.lengths, kinds)
    from_array.add_batch(batch.attentions.numpy().copy(), batch.lengths, kinds)
    assert from_tensor.result() == from_array.result()
    entropies = [r["entropy"] for r in from_tensor.result()]
    assert all(0 < e < math.log(max(batch.lengths)) for e in entropies)


def test_batches_must_match_the_model_shape() -> None:
    stats = StatsAccumulator(2, 3)
    with pytest.raises(ValueError, match="layers"):
        stats.add(np.zeros((3, 3, 4, 4)), plain_kinds(4))
    with pytest.raises(ValueError, match="pieces"):
        stats.add(np.zeros((2, 3, 4, 4)), plain_kinds(5))
    with pytest.raises(ValueError, match="length"):
        stats.add_batch(np.zeros((2, 1, 3, 4, 4)), [5], [plain_kinds(5)])


def test_no_sentences_is_an_error_not_nan() -> None:
    with pytest.raises(AttnvizError, match="at least one sentence"):
        StatsAccumulator(2, 2).result()


def test_records_have_the_json_shape() -> None:
    rng = np.random.default_rng(2)
    records = stats_of(softmax_rows((2, 2, 5, 5), rng), plain_kinds(5))
    assert [(r["layer"], r["head"]) for r in records] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for record in records:
        assert set(record) == RECORD_KEYS
        assert all(type(record[name]) is float for name in STATISTICS)  # type: ignore[literal-required]
        assert type(record["layer"]) is int and type(record["head"]) is int
    assert json.loads(json.dumps(records)) == records


# ---------------------------------------------------------------- token kinds


@pytest.fixture(scope="module")
def tokenizer(embedded_folder: Path) -> Tokenizer:
    return load_tokenizer(embedded_folder)


def test_token_kinds_on_real_pieces(tokenizer: Tokenizer) -> None:
    pieces = tokenize(tokenizer, "Wait... it costs $5 — really?! «ok» x++", max_positions=512)
    kinds = token_kinds(pieces)
    by_token = list(zip(pieces.labels, kinds.cls, kinds.sep, kinds.punct, strict=True))
    assert by_token[0] == ("[CLS]", True, False, False)
    assert by_token[-1] == ("[SEP]", False, True, False)
    punct = [label for label, *_, p in by_token if p]
    assert punct == [".", ".", ".", "—", "?", "!", "«", "»"]  # not $ (Sc) nor + (Sm)


def test_token_kinds_on_a_pair_mark_both_separators(tokenizer: Tokenizer) -> None:
    pieces = tokenize(tokenizer, "Vi João.", pair="Eles?", max_positions=512)
    kinds = token_kinds(pieces)
    assert [pieces.tokens[i] for i in np.flatnonzero(kinds.sep)] == ["[SEP]", "[SEP]"]
    assert np.flatnonzero(kinds.cls).tolist() == [0]
    assert [pieces.labels[i] for i in np.flatnonzero(kinds.punct)] == [".", "?"]


def test_token_kinds_for_roberta_style_pieces() -> None:
    text = "hi , there!"
    pieces = Pieces(
        text=text,
        pair=None,
        tokens=["<s>", "hi", "Ġ,", "Ġthere", "!", "</s>"],
        ids=[0, 1, 2, 3, 4, 2],
        type_ids=[0] * 6,
        offsets=[(0, 0), (0, 2), (2, 4), (4, 10), (10, 11), (0, 0)],
        word_ids=[None, 0, 1, 2, 3, None],
        sequence_ids=[None, 0, 0, 0, 0, None],
    )
    kinds = token_kinds(pieces)
    assert kinds.cls.tolist() == [True, False, False, False, False, False]
    assert kinds.sep.tolist() == [False, False, False, False, False, True]
    assert kinds.punct.tolist() == [False, False, True, False, True, False]


# ---------------------------------------------------------------- labels and sorting


def shares(**given: float) -> dict[str, float]:
    return {name: 0.0 for name in STATISTICS} | given


def test_the_largest_dominant_share_names_the_head() -> None:
    assert label_for(shares(prev=0.6, punct=0.7), 1.0) == "punctuation"
    assert label_for(shares(self=0.9, cls=0.55), 1.0) == "self"
    assert label_for(shares(prev=0.6, punct=0.6), 1.0) == "previous-token"  # tie: order


def test_without_a_dominant_share_entropy_decides() -> None:
    assert label_for(shares(prev=0.5, entropy=0.9), 1.0) == "broad"  # 0.5 is not > 0.5
    assert label_for(shares(prev=0.4, entropy=0.5), 1.0) == "mixed"


def make_records() -> list[HeadRecord]:
    rng = np.random.default_rng(5)
    return stats_of(softmax_rows((3, 4, 9, 9), rng), plain_kinds(9))


def test_sort_by_a_share_is_descending_and_top_cuts() -> None:
    records = make_records()
    ordered = sort_records(records, "prev", top=3)
    assert len(ordered) == 3
    assert [r["prev"] for r in ordered] == sorted((r["prev"] for r in records), reverse=True)[:3]


def test_sort_by_entropy_puts_the_most_focused_heads_first() -> None:
    records = make_records()
    ordered = sort_records(records, "entropy", top=None)
    assert [r["entropy"] for r in ordered] == sorted(r["entropy"] for r in records)


def test_sort_by_layer_restores_layer_head_order() -> None:
    records = make_records()
    shuffled = sort_records(records, "cls", None)
    assert sort_records(shuffled, "layer", None) == records
    assert set(SORT_COLUMNS) == {"layer", *STATISTICS, "first"}  # first: a decoder's


def test_bad_sort_options_are_user_errors() -> None:
    with pytest.raises(BadInput, match="entropy"):
        sort_records(make_records(), "heads", None)
    with pytest.raises(BadInput, match="^top 0 is out of range: use 1..1000000"):  # Python words
        sort_records(make_records(), "cls", 0)


# ---------------------------------------------------------------- renderers


def render(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    console.print(renderable, crop=False)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_stats_table_fits_80_columns_with_every_value() -> None:
    rng = np.random.default_rng(3)
    attentions = softmax_rows((6, 12, 9, 9), rng)
    attentions[0, 0] = shift_by_one(9)  # one previous-token head, the longest label
    records = stats_of(attentions, plain_kinds(9))
    text = render(StatsTable(records, title="all-MiniLM-L6-v2 · 1 sentence · 9 pieces"), 80)
    assert max(cell_len(line) for line in text.splitlines()) <= 80
    for header in ("layer", "head", "entropy", "CLS", "SEP", "punct", "self", "prev", "next"):
        assert header in text
    first = next(line for line in text.splitlines() if line.split()[:2] == ["0", "0"])
    assert first.split()[2:] == [
        f"{records[0][name]:.2f}"  # type: ignore[literal-required]
        for name in STATISTICS
    ] + ["previous-token"]
    assert len([line for line in text.splitlines() if line.split()[-1:] == ["mixed"]]) > 0


@pytest.mark.parametrize("width", [64, 55, 50, 45, 40])
def test_stats_table_stays_readable_in_narrow_terminals(width: int) -> None:
    """Fewer columns and shorter labels and values, never a value cut to `0…`."""
    rng = np.random.default_rng(3)
    attentions = softmax_rows((6, 12, 9, 9), rng)
    attentions[0, 0] = shift_by_one(9)
    records = stats_of(attentions, plain_kinds(9))
    text = render(StatsTable(records, title="all-MiniLM-L6-v2 · 1 sentence"), width)
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    header = next(line for line in lines if line.split()[:2] in (["layer", "head"], ["L", "H"]))
    columns = header.split()
    rows = [line.split() for line in lines if line.split()[:2] == ["0", "0"]]
    assert len(rows) == 1
    (row,) = rows
    assert len(row) == len(columns) and not any("…" in cell for cell in row)
    names = {"ent": "entropy", "CLS": "cls", "SEP": "sep"}
    for column, cell in zip(columns[2:], row[2:], strict=True):
        name = names.get(column, column)
        if name != "label":
            assert float(cell) == pytest.approx(records[0][name], abs=0.006)  # type: ignore[literal-required]
    left_out = [
        c
        for c in ("cls", "sep", "punct", "self", "prev", "next", "label")
        if c not in {names.get(x, x) for x in columns}
    ]
    if left_out:
        assert "Not shown here: " + ", ".join(reversed(left_out)) in " ".join(text.split())


@pytest.mark.slow  # a 14-axes image
def test_stats_figure_has_a_panel_per_statistic_and_saves(tmp_path: Path) -> None:
    records = make_records()
    fig = stats_figure(records, 3, 4, title="corpus · 1 sentence", theme="dark")
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "head"]
    assert len(panels) == 7
    assert all(ax.get_ylabel() == "layer" for ax in panels)
    assert len(fig.axes) == 14  # each panel has its own colour bar
    entropy = panels[0].images[0].get_array()
    assert entropy is not None and entropy.shape == (3, 4)
    assert float(entropy[1, 2]) == pytest.approx(records[1 * 4 + 2]["entropy"])
    out = tmp_path / "stats.png"
    save_figure(fig, out, dpi=60)
    with Image.open(out) as image:
        assert image.format == "PNG" and image.width > 200


def test_stats_figure_rejects_an_unknown_colormap() -> None:
    with pytest.raises(BadInput, match="colormap"):
        stats_figure(make_records(), 3, 4, title="x", cmap="viridiss")


@pytest.mark.slow  # two 14-axes images
def test_stats_figure_shares_one_scale_for_the_shares_by_default() -> None:
    records = make_records()
    grids = stats_grids(records, 3, 4)  # (S, L, H)
    for shared in (True, False):
        fig = stats_figure(records, 3, 4, title="t", shared_scale=shared)
        images = [ax.images[0] for ax in fig.axes if ax.images]
        tops = [image.norm.vmax for image in images]
        assert tops[0] == pytest.approx(np.nanmax(grids[0]))  # entropy: its own scale
        own = [np.nanmax(g) or 1.0 for g in grids[1:]]  # an all-zero panel: 0 .. 1
        expected = [np.nanmax(grids[1:])] * 6 if shared else own
        assert tops[1:] == pytest.approx(expected)

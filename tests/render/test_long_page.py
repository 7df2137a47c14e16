"""The pooled page of a long input (`LongResult.html`, `--pool N --out x.html`): blocks of
pieces are its units, it carries the pooled map within the quantisation, stays a few MB,
refuses a map too large before the model runs, and renders in Chromium without errors."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.render.long import LONG_PAGE_BLOCKS, long_page
from tests.conftest import TinyFactory

TEXT = (
    "John thought: the train was full, but he found a free seat near the window, and "
    "he sat there reading until the last station."
)


def _spec(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1))


def _pooled(spec: dict) -> np.ndarray:
    """The page's (L, H, n, n) as long.js reads it."""
    raw = zlib.decompress(base64.b64decode(spec["data"]))
    L, H, n = spec["layers"], spec["heads"], spec["n"]
    if spec["dtype"] == "u16":
        planes = np.frombuffer(raw, dtype=np.uint8).reshape(2, -1)
        q = planes[0].astype(np.float64) + planes[1].astype(np.float64) * 256
        top = 65535
    else:
        q, top = np.frombuffer(raw, dtype=np.uint8).astype(np.float64), 255
    scales = np.array(spec["scales"]).reshape(L, H, 1, 1)
    return q.reshape(L, H, n, n) / top * scales


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})
    return result.exit_code, result.stdout, result.stderr


def test_the_page_carries_the_pooled_map(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=4)
    assert long.pooled is not None
    spec = _spec(long.html("heads", layer=1))
    assert (spec["layers"], spec["heads"], spec["n"]) == long.pooled.shape[:3]
    assert spec["labels"] == long.pool_labels and spec["labels"][0] == "0–3"
    assert spec["causal"] and spec["view"] == "heads" and spec["layer"] == 1
    largest = long.pooled.max(axis=(-2, -1), keepdims=True)  # each matrix's
    np.testing.assert_allclose(_pooled(spec), long.pooled, atol=float(largest.max()) / 65535)
    shares = np.array(spec["shares"])  # each head's weight by distance bin: rows sum to 1
    np.testing.assert_allclose(shares.sum(axis=-1), 1.0, atol=1e-3)
    assert spec["kinds"][0] == long.head_kinds(0)
    with pytest.raises(BadInput, match="view"):
        long.html("table")


@pytest.mark.slow
def test_a_page_for_8192_pieces_stays_a_few_mb() -> None:
    """The worst case for compression (random rows) of a 30 × 9 model at 8,192 pieces in
    blocks of 128, the default model view's 64 a side: about 1 MB."""
    rng = np.random.default_rng(0)
    L, H, n = 30, 9, 64
    pooled = (rng.dirichlet(np.full(n, 0.3), size=(L, H, n)) / 128).astype(np.float32)
    page = long_page(pooled, [str(i) for i in range(n)], T=8192, pool=128, pool_by="mean",
                     causal=True, bin_labels=["0", "1"], profile=np.ones((L, H, 2)),
                     widths=np.ones(2), sink=np.zeros((L, H)), kinds=[["local"] * H] * L,
                     title="t")  # fmt: skip
    assert len(page) < 1.5e6
    spec = _spec(page)
    assert spec["dtype"] == "u8"  # over a million blocks: 8 bits, within 1/255 of each max
    np.testing.assert_allclose(_pooled(spec), pooled, atol=float(pooled.max()) / 255)


def test_a_page_too_large_is_refused_before_the_model_runs_and_the_advice_works(
    tiny_decoder: TinyFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr("attnviz.render.long.LONG_PAGE_BLOCKS", 2 * 4 * 36)  # 6 blocks a side
    out = tmp_path / "m.html"
    ran: list[int] = []
    monkeypatch.setattr("attnviz.pipeline.compute_blocked", lambda *a, **k: ran.append(1))
    code, _, err = _cli("model", TEXT, "--model", folder, "--pool", "2", "--out", str(out))
    assert code != 0 and not out.exists() and ran == []
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    advice = re.search(r"use --pool (\d+) or more", " ".join(err.split()))
    assert advice, err
    monkeypatch.undo()
    monkeypatch.setattr("attnviz.render.long.LONG_PAGE_BLOCKS", 2 * 4 * 36)
    code, _, err = _cli("model", TEXT, "--model", folder, "--pool", advice.group(1),
                               "--out", str(out))  # fmt: skip
    assert code == 0, err
    assert out.stat().st_size > 0 and LONG_PAGE_BLOCKS > 2 * 4 * 36


def test_the_command_line_writes_pooled_pages(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    for command, view in ((["show", "--layer", "1", "--head", "2"], "matrix"),
                          (["heads", "--layer", "0"], "heads"), (["model"], "model")):  # fmt: skip
        out = tmp_path / f"{command[0]}.html"
        code, text, err = _cli(command[0], TEXT, "--model", folder, "--pool", "8", *command[1:],
                               "--out", str(out), "--show")  # fmt: skip
        assert code == 0, err
        assert "0–7" in text
        spec = _spec(out.read_text(encoding="utf-8"))
        assert spec["view"] == view and spec["pool"] == 8
        assert "blocks of 8 pieces" in spec["title"]


@pytest.mark.slow
def test_the_pooled_page_renders_in_chromium(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    from tests.render.test_html import CHROMIUM, _browser

    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    out = tmp_path / "long.html"
    code, _, err = _cli("show", TEXT, "--model", folder, "--pool", "4", "--layer", "1",
                        "--head", "0", "--out", str(out))  # fmt: skip
    assert code == 0, err
    long = attnviz.analyse_long(TEXT, model=folder, pool=4)
    assert long.pooled is not None
    m = long.pooled[1, 0]
    n = m.shape[0]
    with _browser()() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = chromium.new_context(viewport={"width": 1200, "height": 900})
        requests: list[str] = []
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:")
                      else (requests.append(r.request.url), r.abort()))  # fmt: skip
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        page.wait_for_selector(".attnviz[data-ready=true]", timeout=30_000)
        assert page.eval_on_selector(".attnviz", "e => e.dataset.view") == "matrix"
        box = page.locator("canvas.av-heat").bounding_box()
        assert box is not None
        i, j = n - 2, 1  # a block of queries late in the text, keys early
        page.mouse.move(box["x"] + (j + 0.5) * box["width"] / n,
                        box["y"] + (i + 0.5) * box["height"] / n)  # fmt: skip
        tip = page.locator(".av-tip")
        assert tip.text_content().startswith(f"queries {long.pool_labels[i]} → keys ")
        assert float(tip.get_attribute("data-weight")) == pytest.approx(m[i, j], abs=1e-4)
        row = page.eval_on_selector_all(  # the hovered block's row, largest first
            ".av-row .av-key",
            "els => els.map(e => [Number(e.dataset.block), Number(e.dataset.weight)])",
        )
        expected = np.argsort(-m[i, : i + 1], kind="stable")[: len(row)]
        assert [b for b, _ in row] == expected.tolist()
        np.testing.assert_allclose([w for _, w in row], m[i, expected], atol=1e-4)
        page.mouse.move(box["x"] + (n - 0.5) * box["width"] / n, box["y"] + 0.5 * box["height"] / n)
        assert tip.get_attribute("data-masked") == "true"  # keys after the queries
        page.click('button[data-view="model"]')
        assert page.locator("canvas.av-thumb").count() == long.layers * long.heads
        page.click('canvas.av-thumb[data-layer="0"][data-head="1"]')
        assert page.eval_on_selector("select.av-head", "s => s.value") == "1"
        assert page.locator(".av-profile tbody tr").count() == long.heads
        page.click('button[data-view="heads"]')  # the heads of the layer now shown
        assert page.locator("canvas.av-thumb").count() == long.heads
        page.focus(".attnviz")
        page.keyboard.press("ArrowDown")
        assert page.eval_on_selector("select.av-layer", "s => s.value") == "1"
        assert errors == [] and requests == []
        context.close()
        chromium.close()


def test_the_model_page_pools_by_itself_past_the_budget(
    tiny_decoder: TinyFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    monkeypatch.setattr("attnviz.limits.ATTENTION_BYTES", 300_000)
    out = tmp_path / "m.html"
    code, _, err = _cli("model", TEXT, "--model", folder, "--no-cache", "--out", str(out))
    assert code == 0, err
    assert "drawing blocks of 2 pieces" in " ".join(err.split())
    spec = _spec(out.read_text(encoding="utf-8"))
    assert spec["view"] == "model" and spec["pool"] == 2

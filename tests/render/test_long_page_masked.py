"""The pooled page greys exactly the blocks the model cannot see: after the queries (a
decoder) and, given each layer's sliding window (`long_page(windows=...)`), the blocks whose
keys are all a window or more behind their queries. Checked in Chromium against the model's
own pooled weights: a block the model can see holds some weight (a softmax is never 0 on a
visible key), a hidden one none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.model.families import describe
from tests.render.test_long_page_pt import TEXT, _page, _spec

# Every block of the matrix view hovered in the page: whether its tip says masked, and why.
HOVER_ALL = """([n, layer]) => {
  const canvas = document.querySelector("canvas.av-heat"), tip = document.querySelector(".av-tip");
  const box = canvas.getBoundingClientRect(), out = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const x = box.left + (j + 0.5) * box.width / n, y = box.top + (i + 0.5) * box.height / n;
      canvas.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: x, clientY: y }));
      if (tip.dataset.masked === "true") out.push([i, j, tip.textContent]);
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def gemma2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.model.test_decoder_families import write_checkpoint

    # windows of 5 pieces in layers 0, 2 and 3, layer 1 sees every earlier piece
    return write_checkpoint(tmp_path_factory.mktemp("long-windows"), "gemma2")


def _windows(folder: Path) -> list[int | None]:
    config = describe(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    assert config.decoder is not None
    return list(config.decoder.sliding_windows)


def test_the_page_carries_each_layers_window(gemma2_folder: Path) -> None:
    long = attnviz.analyse_long(TEXT, model=str(gemma2_folder), pool=3)
    windows = _windows(gemma2_folder)
    assert windows == [5, None, 5, 5]
    assert _spec(_page(long, "en", windows=windows))["windows"] == windows
    assert _spec(_page(long, "en"))["windows"] is None  # without them, only the causal mask
    for wrong in ([5, None], [5, None, 0, 5], [5, None, 5.0, 5]):
        with pytest.raises(ValueError, match="windows"):
            _page(long, "en", windows=wrong)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_page_greys_exactly_the_blocks_the_model_cannot_see(
    gemma2_folder: Path, tmp_path: Path
) -> None:
    from tests.render.test_html import CHROMIUM, Page, _browser

    pool = 3
    long = attnviz.analyse_long(TEXT, model=str(gemma2_folder), pool=pool)
    assert long.pooled is not None
    n = len(long.pool_labels)
    with _browser()() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for layer, lang in ((0, "en"), (1, "en"), (2, "pt")):
            out = tmp_path / f"layer{layer}.html"
            out.write_text(_page(long, lang, "matrix", windows=_windows(gemma2_folder),
                                 layer=layer), encoding="utf-8")  # fmt: skip
            view = Page(chromium, out)
            view.page.wait_for_selector(".attnviz[data-ready=true]", timeout=30_000)
            masked = view.page.evaluate(HOVER_ALL, [n, layer])
            shown = {(i, j) for i, j, _ in masked}
            unseen = long.pooled[layer].max(axis=0) == 0  # (n, n): no head puts weight there
            assert shown == {(int(i), int(j)) for i, j in zip(*np.nonzero(unseen), strict=True)}
            behind = [text for i, j, text in masked if j <= i]  # hidden by the window
            assert bool(behind) == (layer != 1)
            words = "outside the layer's sliding window" if lang == "en" else "fora da janela"
            assert all(words in text for text in behind), behind
            rows = view.page.eval_on_selector_all(".av-row .av-key", "els => els.length")
            last = n - 1  # the row shown first: the last block of queries, its visible keys
            assert rows == min(12, n - int(unseen[last].sum()))
            assert view.errors == [] and view.requests == []
            view.close()
        chromium.close()


def test_analyse_long_hands_its_windows_to_the_page(gemma2_folder: Path) -> None:
    long = attnviz.analyse_long(TEXT, model=str(gemma2_folder), pool=3)
    assert _spec(long.html())["windows"] == [5, None, 5, 5]


def test_pooled_views_mask_the_blocks_the_model_cannot_see(gemma2_folder: Path) -> None:
    """The terminal and image views of the pooled map mark as masked exactly the blocks no head
    puts weight on: after the queries, and behind the window on layers 0, 2 and 3."""
    import io

    from rich.console import Console

    from attnviz.measures.long import hidden_blocks

    long = attnviz.analyse_long(TEXT, model=str(gemma2_folder), pool=3)
    assert long.pooled is not None
    n = len(long.pool_labels)
    unseen = long.pooled.max(axis=1) == 0  # (L, n, n): no head of the layer puts weight there
    for layer in range(long.layers):
        for head in (None, 2):
            masked = long.view(layer, head).masked
            assert masked is not None and np.array_equal(masked, unseen[layer])
        heads = long.heads_view(layer).masked
        assert heads is not None and heads.shape == (long.heads, n, n)
        assert (heads == unseen[layer]).all()
    model = long.model_view().masked
    assert model is not None and np.array_equal(model, np.repeat(unseen, long.heads, axis=0))
    assert unseen[0].sum() > unseen[1].sum()  # the window hides more than the causal mask
    out = io.StringIO()
    Console(file=out, width=200).print(long.view(0, 1))
    assert "masked" in out.getvalue()
    assert hidden_blocks(long.T, 3, causal=False, window=None) is None  # an encoder's

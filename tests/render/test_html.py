"""The interactive HTML page: self-contained, compact, and right in a real browser.

The browser tests drive Debian's Chromium with Playwright, with every network request
blocked. Without Chromium or Playwright they are skipped with one line naming what is
missing, except where ATTNVIZ_REQUIRE_BROWSER=1 (as in CI), where they fail.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.render.html import page

EN = "John thought: the train was full, but he found a free seat."
CHROMIUM = os.environ.get("ATTNVIZ_CHROMIUM", "/usr/bin/chromium")


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


class _Outside(HTMLParser):
    """Every reference from the page to anything outside it."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "action", "data", "poster") and value:
                self.found.append(f"<{tag} {name}={value}>")
        if tag in ("link", "iframe", "object", "embed", "base"):
            self.found.append(f"<{tag}>")


def _spec(text: str) -> dict:
    match = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.S)
    assert match
    return json.loads(match.group(1).replace("<\\/", "</"))


def _weights(spec: dict) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(spec["data"]))
    shape = (spec["layers"], spec["heads"], spec["T"], spec["T"])
    if spec["dtype"] == "u16":
        planes = np.frombuffer(raw, dtype=np.uint8).reshape(2, -1)  # low, high
        values = planes[0].astype(np.uint32) | (planes[1].astype(np.uint32) << 8)
    else:
        values = np.frombuffer(raw, dtype=np.uint8)
    return (values / spec["scale"]).reshape(shape)


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(EN)


def test_page_references_nothing_outside_itself(analysis: attnviz.Analysis, tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    CliRunner().invoke(app, ["heads", EN, "--layer", "3", "--out", str(out)])
    text = out.read_text(encoding="utf-8")
    parser = _Outside()
    parser.feed(text)
    assert parser.found == []
    assert "@import" not in text and "url(" not in text
    assert not re.search(r"https?://", text)
    assert "default-src 'none'" in text  # the browser itself refuses any fetch


def test_page_carries_the_weights_to_within_1e_5(analysis: attnviz.Analysis) -> None:
    spec = _spec(analysis.html())
    assert spec["dtype"] == "u16" and spec["scale"] == 65535
    np.testing.assert_allclose(_weights(spec), analysis.attentions, atol=1e-5)
    assert spec["tokens"] == analysis.labels
    assert spec["wordLabels"] == [w.label for w in analysis.words]


def test_a_label_cannot_break_out_of_the_page() -> None:
    weights = np.full((1, 1, 3, 3), 1 / 3)
    labels = ["</script><b>x", "<!--<script>", "ok"]
    text = page(weights, labels, title="<i>t</i><!--<script>")
    data = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.S)
    assert data is not None and "<" not in data.group(1)  # nothing the HTML parser could read
    assert "<title>&lt;i&gt;t&lt;/i&gt;&lt;!--&lt;script&gt;</title>" in text
    assert _spec(text)["tokens"] == labels


@pytest.mark.slow
def test_page_sizes(tmp_path: Path) -> None:
    """128 pieces with the whole model stay under 2 MB; 512 pieces still make a page."""
    words = " ".join(f"w{i}" for i in range(600))
    sizes = {}
    for pieces in (128, 512):
        rng = np.random.default_rng(pieces)
        raw = rng.dirichlet(np.full(pieces, 0.1), size=(6, 12, pieces)).astype(np.float32)
        labels = words.split()[:pieces]
        sizes[pieces] = len(page(raw, labels).encode("utf-8"))
    assert sizes[128] < 2_000_000, sizes
    assert sizes[512] < 12_000_000, sizes


@pytest.mark.slow
def test_writing_a_page_from_the_cache_imports_neither_torch_nor_matplotlib(
    tmp_path: Path,
) -> None:
    attnviz.analyse(EN)  # fills the test session's cache
    code = (
        "import sys, attnviz; a = attnviz.analyse(sys.argv[1]); a.save(sys.argv[2], 'model'); "
        "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    )
    out = tmp_path / "m.html"
    run = subprocess.run(
        [sys.executable, "-c", code, EN, str(out)], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]" and out.stat().st_size > 0


def test_cli_writes_pages_and_refuses_image_options(tmp_path: Path) -> None:
    for command in (["show"], ["heads"], ["model"], ["export", "--view", "model"]):
        out = tmp_path / f"{command[0]}.html"
        result = CliRunner().invoke(app, [*command, EN, "--out", str(out)])
        assert result.exit_code == 0, result.stderr
        assert _spec(out.read_text(encoding="utf-8"))["view"] in ("matrix", "heads", "model")
    result = CliRunner().invoke(app, ["show", EN, "--out", str(tmp_path / "x.html"), "--dpi", "90"])
    assert result.exit_code == 2 and "only applies to images" in result.stderr
    result = CliRunner().invoke(app, ["rollout", EN, "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "unknown extension .html" in result.stderr


def test_pages_follow_the_reader_unless_theme_is_given(tmp_path: Path) -> None:
    for command, theme in ((["heads"], "dark"), (["show"], "light"), (["model"], None)):
        out = tmp_path / f"{command[0]}.html"
        given = ["--theme", theme] if theme else []
        result = CliRunner().invoke(app, [*command, EN, "--out", str(out), *given])
        assert result.exit_code == 0, result.stderr
        assert _spec(out.read_text(encoding="utf-8"))["theme"] == (theme or "auto")


# ---------------------------------------------------------------- in a real browser


def _browser():  # type: ignore[no-untyped-def]
    missing = []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package (pip install playwright)")
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).is_file():
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if missing:
        message = "browser tests need " + " and ".join(missing)
        if os.environ.get("ATTNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return sync_playwright


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_playwright = _browser()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Page:
    """A page opened from disk with the network blocked, collecting console errors."""

    def __init__(self, browser, path: Path) -> None:  # type: ignore[no-untyped-def]
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.requests: list[str] = []

        def route(r):  # type: ignore[no-untyped-def]
            if r.request.url.startswith("file:"):
                return r.continue_()
            self.requests.append(r.request.url)
            return r.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector(".attnviz[data-ready=true]", timeout=30_000)

    def weights(self, side: str) -> list[float]:
        return self.page.eval_on_selector_all(
            f".av-{side} .av-tok", "els => els.map(e => Number(e.dataset.weight))"
        )

    def close(self) -> None:
        self.context.close()


@pytest.mark.slow
def test_head_view_shows_the_weights_of_show_json(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "heads.html"
    cli("heads", EN, "--layer", "3", "--out", str(out))
    view = Page(browser, out)
    page_ = view.page
    mean = json.loads(cli("show", EN, "--layer", "3", "--json"))
    he = mean["tokens"].index("he")
    page_.hover(f'.av-left .av-tok[data-index="{he}"]')
    np.testing.assert_allclose(view.weights("right"), mean["weights"][he], atol=1e-4)

    page_.click('.av-chip[data-head="7"]', modifiers=["Shift"])  # head 7 alone
    page_.hover(f'.av-left .av-tok[data-index="{he}"]')
    head7 = json.loads(cli("show", EN, "--layer", "3", "--head", "7", "--json"))
    np.testing.assert_allclose(view.weights("right"), head7["weights"][he], atol=1e-4)
    john = head7["tokens"].index("John")
    page_.hover(f'.av-right .av-tok[data-index="{john}"]')  # to John, from every query
    column = [row[john] for row in head7["weights"]]
    np.testing.assert_allclose(view.weights("left"), column, atol=1e-4)

    page_.focus(".attnviz")
    page_.keyboard.press("ArrowDown")  # the next layer
    assert page_.eval_on_selector("select.av-layer", "s => s.value") == "4"
    page_.click('button[data-units="tokens"]')
    assert page_.locator(".av-left .av-tok").count() == len(attnviz.analyse(EN).tokens)
    shot = tmp_path / "heads.png"
    page_.screenshot(path=str(shot))
    from PIL import Image

    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # not a blank page
    assert view.errors == [] and view.requests == []
    view.close()


@pytest.mark.slow
def test_matrix_view_tooltip_gives_the_exact_weight(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "show.html"
    cli("show", EN, "--layer", "3", "--head", "7", "--out", str(out))
    view = Page(browser, out)
    record = json.loads(cli("show", EN, "--layer", "3", "--head", "7", "--json"))
    assert view.page.eval_on_selector(".attnviz", "e => e.dataset.view") == "matrix"
    box = view.page.locator("canvas.av-heat").bounding_box()
    assert box is not None
    width, height = view.page.eval_on_selector("canvas.av-heat", "c => [c.width, c.height]")
    n = len(record["tokens"])
    cell = max(1, min(28, 640 // n))  # as the page lays it out
    margin = width - 4 - n * cell
    john, he = record["tokens"].index("John"), record["tokens"].index("he")
    x = box["x"] + (margin + john * cell + cell / 2) * box["width"] / width
    y = box["y"] + (margin + he * cell + cell / 2) * box["height"] / height
    view.page.mouse.move(x, y)
    tip = view.page.locator(".av-tip")
    assert tip.text_content().startswith("\u2068he\u2069 → \u2068John\u2069: ")  # isolated
    assert float(tip.get_attribute("data-weight")) == pytest.approx(
        record["weights"][he][john], abs=1e-5
    )
    assert view.errors == []
    view.close()


@pytest.mark.slow
def test_model_view_of_512_pieces_opens_and_stays_responsive(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = " ".join(["the train was full but he found a free seat ."] * 60)
    out = tmp_path / "long.html"
    cli("model", text, "--truncate", "--out", str(out))
    size = out.stat().st_size
    view = Page(browser, out)
    page_ = view.page
    assert page_.locator("canvas.av-thumb").count() == 72
    page_.click('canvas.av-thumb[data-layer="3"][data-head="7"]')  # opens that head large
    assert page_.eval_on_selector("select.av-head", "s => s.value") == "7"
    page_.click('button[data-view="heads"]')
    page_.click('.av-chip[data-head="7"]', modifiers=["Shift"])
    times = []
    for i in (5, 100, 300):
        page_.hover(f'.av-left .av-tok[data-index="{i}"]')
        times.append(float(page_.eval_on_selector(".attnviz", "e => e.dataset.drawMs")))
    print(f"512 pieces: page {size / 1e6:.1f} MB, hover redraw {max(times):.1f} ms")
    assert view.errors == []
    view.close()


@pytest.mark.slow
def test_notebook_shows_the_view_inline(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(f"import attnviz\na = attnviz.analyse({EN!r})\na"),
        nbformat.v4.new_code_cell("a.view(layer=3, head=7)"),
    ]
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    fragments = []
    for cell in notebook.cells:
        data = cell.outputs[-1]["data"]
        assert "text/html" in data and "image/png" in data
        fragments.append(data["text/html"])
    assert len({re.search(r'id="(attnviz-[0-9a-f]+)"', f).group(1) for f in fragments}) == 2
    out = tmp_path / "notebook.html"
    out.write_text("<!DOCTYPE html><meta charset=utf-8>" + "".join(fragments), encoding="utf-8")
    view = Page(browser, out)  # both views on one page, each in its own element
    assert view.page.locator(".attnviz[data-ready=true]").count() == 2
    assert view.errors == []
    view.close()


@pytest.mark.slow
def test_heads_and_model_views_show_inline_with_their_own_names(  # type: ignore[no-untyped-def]
    browser, analysis: attnviz.Analysis, tmp_path: Path
) -> None:
    """A notebook cell ending in `a.heads(3, heads=[7, 1])` or `a.model_view()` is interactive."""
    heads = analysis.heads(3, heads=[7, 1])
    parts = [heads._repr_html_(), analysis.model_view(heads=[0, 2])._repr_html_()]
    spec = _spec(parts[0])
    assert (spec["layers"], spec["heads"], spec["headNames"]) == (1, 2, ["head 7", "head 1"])
    np.testing.assert_allclose(_weights(spec)[0], heads.matrices, atol=1e-5)
    out = tmp_path / "inline.html"
    out.write_text("<!DOCTYPE html><meta charset=utf-8>" + "".join(parts), encoding="utf-8")
    view = Page(browser, out)
    assert view.page.locator(".attnviz[data-ready=true]").count() == 2
    assert view.page.locator(".av-chip").first.inner_text().strip() == "7"  # head 7 comes first
    assert view.errors == [] and view.requests == []
    view.close()


@pytest.mark.slow
def test_decoder_page_shows_its_causal_weights(browser, tiny_decoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Llama-family page: a query's later tokens are masked (unlisted), the rest as --json."""
    folder = str(tiny_decoder("llama"))
    text = "the bank refused the loan"
    out = tmp_path / "decoder.html"
    cli("heads", text, "--model", folder, "--layer", "1", "--units", "tokens", "--out", str(out))
    view = Page(browser, out)
    record = json.loads(
        cli("show", text, "--model", folder, "--layer", "1", "--units", "tokens", "--json")
    )
    page_ = view.page
    page_.click('button[data-units="tokens"]')
    assert page_.locator(".av-left .av-tok").count() == len(record["tokens"]) == 8
    assert page_.locator(".av-left .av-tok").first.text_content() == "<s>"
    for i in (0, 3, 7):
        page_.hover(f'.av-left .av-tok[data-index="{i}"]')
        shown = view.weights("right")
        np.testing.assert_allclose(shown[: i + 1], record["weights"][i][: i + 1], atol=1e-4)
        # A decoder's query never sees a later token: those keys are masked and unlisted.
        masked = page_.eval_on_selector_all(
            ".av-right .av-tok", "els => els.map(e => e.dataset.masked === 'true')"
        )
        assert masked == [k > i for k in range(8)] == record["masked"][i]
        assert np.isnan(shown[i + 1 :]).all()  # no weight shown, not 0.0000
    assert view.errors == [] and view.requests == []
    view.close()

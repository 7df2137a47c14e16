"""A notebook cell shows every result: figures as images, tables and walkthroughs as HTML.

In a fresh kernel (no `%matplotlib inline`) a cell ending in a figure shows the picture, not
`<Figure size 1245x966 with 4 Axes>`; a cell ending in an explanation, head statistics,
`find`'s heads, the measures compared, a model's details, a generation or a long result
shows what the terminal prints, as HTML that a browser renders with no error and that
shows tokens as text, never as markup. The notebook runs headlessly with nbclient; the
HTML opens in Debian's Chromium (the browser fixture of tests/render/test_html.py).
"""

from __future__ import annotations

import base64
import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.measures.compare import Comparison
from tests.conftest import TinyFactory
from tests.render.test_html import Page, browser  # noqa: F401  (a fixture, used by name)

EN = "John thought: the train was full, but he found a free seat."
HOSTILE = "<script>alert(1)</script>"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(EN)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG)
    with Image.open(io.BytesIO(data)) as image:
        return image.size


@pytest.mark.slow
def test_every_figure_is_a_figure_that_shows_itself(analysis: attnviz.Analysis) -> None:
    """What `figure()` returns is still a matplotlib Figure (callers draw on it and save
    it), its `_repr_png_` is that figure at 100 dpi, and pyplot never hears of it."""
    view = analysis.view(layer=3, head=7)
    figures = [
        analysis.figure("heads", layer=0),
        analysis.figure("model"),
        view.figure(),
        view.row("he").figure(),
        analysis.find("he", "john").figure(),
        analysis.rollout().figure(),
    ]
    for fig in figures:
        assert isinstance(fig, Figure)
        width, height = _png_size(fig._repr_png_())
        # laid out to the inch, the image is the figure's size at 100 dpi; one laid out by
        # matplotlib (a row's bars) is cropped to what it draws, as when saved
        shown = tuple(fig.get_size_inches() * 100)
        close = 1 if fig.get_layout_engine() is None else 0.05 * max(shown)
        assert (width, height) == pytest.approx(shown, abs=close)
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


@pytest.mark.slow
def test_each_result_shows_the_terminal_output_as_html(analysis: attnviz.Analysis) -> None:
    """The HTML holds the numbers `rich.print` prints, and the plain repr stays one line."""
    explanation = analysis.explain("he", layer=3, head=7)
    links = analysis.find("he", "john")
    row = analysis.row("he", layer=3, head=7)
    details = attnviz.model_info()
    shown = {
        explanation: ["Softmax", "John", "0.700"],
        links: ["he → John", "0.70"],
        row: ["John", "0.70"],
        details: ["22,565,376", "all-MiniLM-L6-v2", "WordPiece"],
    }
    for result, expected in shown.items():
        html = result._repr_html_()
        assert html.startswith('<pre class="attnviz-text"') and "<script" not in html
        text = re.sub(r"<[^>]+>", "", html)
        for word in expected:
            assert word.replace(">", "&gt;") in text, (type(result).__name__, word)
        assert "\n" not in repr(result) and len(repr(result)) < 160
    assert repr(details).startswith("<ModelDetails all-MiniLM-L6-v2: BERT encoder, 6 layers")


@pytest.mark.parametrize(
    "kind",
    [
        "embedded",
        pytest.param("albert", marks=pytest.mark.slow),
        pytest.param("mistral", marks=pytest.mark.slow),
    ],
)
def test_model_details_rows_are_what_info_prints(kind: str, request: pytest.FixtureRequest) -> None:
    """The notebook's table of `model_info()` and `attnviz info` agree, row by row (where
    the command line names a flag, `--no-bos`, Python names the argument, `bos=False`):
    the default model, ALBERT (shared layers, factorised embeddings), Mistral (grouped
    keys and values, rotary positions, a sliding window)."""
    model = []
    if kind == "albert":
        model = ["--model", str(request.getfixturevalue("tiny_model")("albert"))]
    elif kind == "mistral":
        made = request.getfixturevalue("tiny_decoder")("mistral", sliding_window=4)
        model = ["--model", str(made)]
    printed = CliRunner().invoke(app, ["info", *model], env={"COLUMNS": "300"})
    assert printed.exit_code == 0, printed.stderr
    lines = {" ".join(line.split()) for line in printed.stdout.splitlines()}
    rows = attnviz.model_info(model[-1] if model else None).rows()
    for name, value in rows:
        if name == "start token":
            assert "puts it in front; bos=False)" in value
            continue
        flags = value.replace("max_tokens", "--max-tokens")  # a decoder's bound past 2,048
        assert f"{name} {flags}" in lines, (name, value)
    assert len(rows) >= 17
    names = {name for name, _ in rows}
    expected = {
        "embedded": {"text", "parameters"},
        "albert": {"layer weights", "embedding size"},
        "mistral": {"key/value heads", "positions", "sliding window"},
    }
    assert expected[kind] <= names


def test_a_token_is_shown_as_text_never_as_markup() -> None:
    comparison = Comparison(
        title=f"tiny · layer 0 · query {HOSTILE}",
        query=0,
        labels=[HOSTILE, "<b>bold</b>", "&amp;", "\x1b[31mred", "abc\u202edef"],
        layer=0,
        measures=["weight", "norm"],
        values=np.array([[0.2, 0.5, 0.3, 0.0, 0.0], [0.6, 0.3, 0.1, 0.0, 0.0]]),
    )
    html = comparison._repr_html_()
    assert "<script" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&amp;amp;" in html  # the label "&amp;" as typed, not the entity
    # the terminal's rule for strangers' text holds in the notebook too
    assert "\x1b" not in html and "\u202e" not in html
    assert "\\x1b[31mred" in html and "abcU+202Edef" in html


@pytest.mark.slow
def test_a_table_of_any_size_shows_at_most_max_rows() -> None:
    """A model of 40 layers × 32 heads: the notebook's tables stop at `MAX_ROWS` heads and
    say how many were left out and how to see them."""
    from attnviz.measures.long import LongResult
    from attnviz.measures.stats import HeadRecord, HeadStats
    from attnviz.render.notebook import MAX_ROWS

    L, H = 40, 32
    records = [
        HeadRecord(layer=layer, head=head, entropy=1.0, punct=0.1, self=0.2, prev=0.3,
                   label="mixed", cls=0.2, sep=0.1, next=0.1)
        for layer in range(L) for head in range(H)
    ]  # fmt: skip
    stats = HeadStats(records, "big", L, H, sentences=1, queries=10)
    html = stats._repr_html_()
    assert f"… and {L * H - MAX_ROWS:,} more rows, left out here" in html
    assert "rich.print(stats.table(stats.sorted(by, top)))" in html
    assert len(re.findall(r"\bmixed\b", html)) == MAX_ROWS
    bins = ["0", "1", "2"]
    long = LongResult(
        model="big", T=9, layers=L, heads=H, pool=None, pool_by="mean", pooled=None,
        pool_labels=[], profile=np.full((L, H, 3), 0.3), bin_labels=bins, sink=np.zeros((L, H)),
    )  # fmt: skip
    html = long._repr_html_()
    assert f"… and {(L - MAX_ROWS // H) * H:,} more rows" in html
    assert repr(long) == "<LongResult big: 9 pieces, 40 layers × 32 heads; profile, sink>"


@pytest.mark.slow
def test_a_generation_draws_its_steps(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    """The steps heatmap (a generation's image in a notebook, `generate --out x.png`) names
    its rows' axis "new token" (it named a label the lexicon lacked: a KeyError)."""
    folder = str(tiny_decoder("llama", arch="lm"))
    written = attnviz.generate("the bank refused", model=folder, max_new=3)
    figure = written.figure()
    assert isinstance(figure, Figure) and figure.axes[0].get_ylabel() == "new token"
    out = tmp_path / "steps.png"
    args = ["generate", "the bank refused", "--model", folder, "--max-new", "3", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().startswith(PNG)


def _notebook(decoder: Path) -> list[tuple[str, str]]:
    """(source, the MIME type its output must show) for each cell."""
    rows = [
        ("a.figure('heads', layer=0)", "image/png"),
        ("a.view(layer=3, head=7).figure()", "image/png"),
        ("a.explain('he', layer=3, head=7)", "text/html"),
        ("attnviz.head_stats(['I saw John and Mary yesterday.', 'They were together.'])", ""),
        ("a.find('he', 'john')", "text/html"),
        ("a.compare('he', layer=3)", "text/html"),
        ("attnviz.model_info()", "text/html"),
        (f"attnviz.generate('the bank refused', model={str(decoder)!r}, max_new=3)", ""),
        (f"attnviz.analyse_long({EN * 3!r}, pool=8)", "text/html"),
        (
            "from attnviz.measures.compare import Comparison\n"
            f"Comparison(title='tiny', query=0, labels=[{HOSTILE!r}, 'b'], layer=0, "
            "measures=['weight'], values=np.array([[0.4, 0.6]]))",
            "text/html",
        ),
    ]
    return [(source, mime or "text/html") for source, mime in rows]


@pytest.mark.slow
def test_a_fresh_kernel_shows_every_result(  # type: ignore[no-untyped-def]
    browser,  # noqa: F811
    tiny_decoder: TinyFactory,
    tmp_path: Path,
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = _notebook(tiny_decoder("llama", arch="lm"))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"import numpy as np\nimport attnviz\na = attnviz.analyse({EN!r})"
        ),
        *(nbformat.v4.new_code_cell(source) for source, _ in cells),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nlen(plt.get_fignums())"  # no figure left open
        ),
    ]
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    fragments = []
    for cell, (source, mime) in zip(notebook.cells[1:], cells, strict=False):
        # one output: the result, nothing displayed or printed beside it
        assert [o["output_type"] for o in cell.outputs] == ["execute_result"], cell.outputs
        (output,) = cell.outputs
        data = output["data"]
        assert mime in data, (source, sorted(data))
        assert len(data["text/plain"]) < 200 and "\n" not in data["text/plain"]
        if mime == "image/png" or "generate" in source:  # a generation: its image too
            assert base64.b64decode(data["image/png"]).startswith(PNG)
        else:  # a table shows as HTML only: no image drawn that nobody sees
            assert "image/png" not in data, source
        if mime == "text/html":
            fragments.append(data["text/html"])
    assert notebook.cells[-1].outputs[0]["data"]["text/plain"] == "0"

    out = tmp_path / "outputs.html"
    page_html = "".join(f'<section class="cell">{f}</section>\n' for f in fragments)
    out.write_text(f"<!DOCTYPE html><meta charset=utf-8><body>{page_html}", encoding="utf-8")
    view = Page(browser, out)  # waits for the generation's step slider to be drawn
    dialogs: list[str] = []
    view.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    texts = view.page.eval_on_selector_all("section.cell", "els => els.map(e => e.innerText)")
    explanation, stats, links, compared, details, generation, long, hostile = texts
    assert "How head 7 of layer 3" in explanation and "0.700" in explanation
    assert "previous-token" in stats
    assert "he → John" in links and "0.70" in links
    assert "value-zeroing" in compared
    assert "22,565,376" in details
    assert "bank" in generation and "greedy" in generation
    assert "share of each head's weight by distance" in long
    assert HOSTILE in hostile  # shown as the text it is
    assert view.page.locator("section.cell pre script").count() == 0
    assert view.errors == [] and view.requests == [] and dialogs == []
    view.close()

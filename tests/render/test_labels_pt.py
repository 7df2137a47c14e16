"""Portuguese labels everywhere: `--lang pt`, `lang="pt"` or a Portuguese locale.

Each test draws something (a Figure, an SVG, a PNG, a terminal table, an HTML page in
Chromium) and reads the words it carries: the lessons' consulta, chave, camada, cabeça and
peso de atenção, and none of the English they replace. English stays the default.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import BadInput
from attnviz.language import default_lang, resolve_lang
from attnviz.lexicon import LABELS, label, page_texts

PT = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."
# Words of the English labels that must not show in a Portuguese drawing.
ENGLISH = ("query", "attention weight", "layer", "head", "keys", "tokens:")


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(PT)


def _texts(figure) -> list[str]:  # type: ignore[no-untyped-def]
    """Every text a matplotlib Figure draws: titles, axis names, ticks, the colour bar's."""
    from matplotlib.text import Text

    return [t.get_text() for t in figure.findobj(Text) if t.get_text()]


def _english(texts: list[str] | str) -> list[str]:
    joined = texts if isinstance(texts, str) else "\n".join(texts)
    return [word for word in ENGLISH if re.search(rf"\b{re.escape(word)}\b", joined)]


def _rendered(renderable: object, width: int = 120) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, highlight=False)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the catalogue


def test_every_label_says_the_same_in_both_languages() -> None:
    """Same keys, same placeholders, nothing empty; the words the lessons use."""
    from attnviz.i18n import placeholders

    assert set(LABELS) == {"en", "pt"}
    assert set(LABELS["pt"]) == set(LABELS["en"])
    for key, english in LABELS["en"].items():
        assert LABELS["pt"][key].strip(), key
        assert placeholders(LABELS["pt"][key]) == placeholders(english), key
    words = {k: LABELS["pt"][k] for k in ("query", "key", "layer", "head", "attention_weight")}
    assert words == {
        "query": "consulta",
        "key": "chave",
        "layer": "camada",
        "head": "cabeça",
        "attention_weight": "peso de atenção",
    }
    assert label("pt", "mean_of_heads", n=12) == "média das 12 cabeças"


def test_the_locale_decides_when_lang_is_not_given() -> None:
    assert resolve_lang(None, {"LANG": "pt_BR.UTF-8"}) == "pt"
    assert resolve_lang(None, {"LANG": "en_US.UTF-8", "LC_MESSAGES": "pt_PT"}) == "pt"
    assert resolve_lang(None, {"LANG": "pt_BR.UTF-8", "LC_ALL": "C"}) == "en"  # LC_ALL wins
    assert default_lang({"LC_ALL": "", "LANG": "pt_BR"}) == "pt"  # empty is unset
    assert resolve_lang("en", {"LANG": "pt_BR.UTF-8"}) == "en"  # an explicit lang wins
    with pytest.raises(BadInput, match=r"^lang 'fr' is not available: use one of en, pt$"):
        resolve_lang("fr")


def test_a_language_attnviz_lacks_is_refused_before_drawing(analysis: attnviz.Analysis) -> None:
    with pytest.raises(BadInput, match="lang 'es' is not available"):
        analysis.view(lang="es")
    with pytest.raises(BadInput, match="lang 3 is not available|lang int is not available"):
        analysis.heads(lang=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- images


def test_heatmap_figure_in_portuguese(analysis: attnviz.Analysis) -> None:
    texts = _texts(analysis.figure(layer=2, head=1, lang="pt"))
    assert "consulta" in texts and "chave" in texts and "peso de atenção" in texts
    title = next(t for t in texts if "camada" in t)
    assert "camada 2 · cabeça 1" in title
    assert _english(texts) == []
    english = _texts(analysis.figure(layer=2, head=1))  # the default stays English
    assert {"query", "key", "attention weight"} <= set(english)


def test_head_mean_and_model_titles_in_portuguese(analysis: attnviz.Analysis) -> None:
    assert "média das 12 cabeças" in analysis.view(1, lang="pt").title
    model = analysis.model_view([0, 1], lang="pt")
    assert "6 camadas × cabeças 0,1" in model.title
    assert model.panel_titles[:2] == ["C0 c0", "C0 c1"]
    assert "sem tokens especiais (linhas renormalizadas)" in (
        analysis.view(lang="pt", exclude="special").title
    )
    rollout = analysis.rollout(lang="pt")
    assert "rollout até a camada 5" in rollout.title


def test_svg_grid_keeps_its_portuguese_as_text(analysis: attnviz.Analysis, tmp_path: Path) -> None:
    out = analysis.save(tmp_path / "heads.svg", "heads", layer=2, lang="pt")
    svg = out.read_text(encoding="utf-8")
    for words in (
        "camada 2 · todas as 12 cabeças",
        "cabeça 11",
        "consulta",
        "chave",
        "peso de atenção",
    ):
        assert words in svg, words
    assert "attention weight" not in svg and ">query<" not in svg


def test_png_grid_drawn_to_pixels_writes_portuguese(
    analysis: attnviz.Analysis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grid PNG is drawn straight to pixels: every text it writes goes through one writer."""
    from attnviz.render import raster

    written: list[str] = []
    original = raster._Writer.text

    def spy(self, text: str, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        written.append(text)
        original(self, text, *args, **kwargs)

    monkeypatch.setattr(raster._Writer, "text", spy)
    analysis.save(tmp_path / "model.png", "model", lang="pt", dpi=40)
    assert "peso de atenção" in written
    assert "chave" in written or any(t.startswith("chave (") for t in written)
    assert "consulta" in written or any(t.startswith("consulta (") for t in written)
    assert "C5 c11" in written
    assert _english(written) == []


def test_query_bars_find_and_stats_figures_in_portuguese(analysis: attnviz.Analysis) -> None:
    bars = _texts(analysis.row("ele", layer=2, lang="pt").figure())
    assert "peso de atenção" in bars and any("consulta ele" in t for t in bars)
    links = _texts(analysis.find("ele", "João", lang="pt").figure())
    assert "camada" in links and "cabeça" in links
    assert "ele → João em cada cabeça" in " ".join(" ".join(links).split())
    assert _english(bars + links) == []

    from attnviz.render.stats_image import stats_figure

    records = [
        {"layer": 0, "head": h, "entropy": 1.0, "cls": 0.1, "sep": 0.2, "punct": 0.1,
         "self": 0.3, "prev": 0.2, "next": 0.1, "label": "mixed"}
        for h in range(2)
    ]  # fmt: skip
    stats = _texts(stats_figure(records, 1, 2, title="t", lang="pt"))
    assert {"entropia (nats)", "na peça anterior", "camada", "cabeça"} <= set(stats)


# ---------------------------------------------------------------- the terminal


def test_terminal_heatmap_and_grid_in_portuguese(analysis: attnviz.Analysis) -> None:
    shown = _rendered(analysis.view(2, lang="pt"))
    assert "cons \\ chave" in shown and "camada 2 · média das 12 cabeças" in shown
    from attnviz.render.terminal import Heatmap

    wide = _rendered(Heatmap(np.eye(2), ["paralelepípedos", "b"], lang="pt"))  # a wide corner
    assert "consulta \\ chave" in wide
    grid = _rendered(analysis.heads(2, [0, 1], lang="pt"), width=200)
    assert "painéis: linhas = consultas, colunas = chaves, na ordem das palavras" in grid
    assert "palavras:" in grid and "cabeça 1" in grid  # the default units: words
    assert _english(shown + grid) == []
    assert "query \\ key" in _rendered(analysis.view(2))  # English by default


def test_terminal_tables_in_portuguese(analysis: attnviz.Analysis) -> None:
    bars = _rendered(analysis.row("ele", lang="pt"))
    assert "chave, peso (barras: fração do maior" in bars
    links = _rendered(analysis.find("ele", "João", top=3, lang="pt"), width=140)
    for header in ("camada", "cabeça", "peso", "posição", "maior chave", "outras"):
        assert header in links, header
    assert "peso: ele → João. posição: de João entre as chaves de ele" in links
    rollout = _rendered(analysis.rollout(lang="pt"))
    assert "de onde cada peça mais tira" in rollout and "peça ← tira mais de" in rollout
    assert _english(bars + links + rollout) == []
    compared = analysis.compare("ele", 2, measures=["weight", "norm"], lang="pt")
    table = _rendered(compared)
    assert "posição" in table and "frações: a linha de cada medida" in table
    assert "em primeiro" in table or "das 5 maiores chaves de weight" in table
    assert "camada 2 · consulta ele" in " ".join(table.split())
    assert _english(table) == []
    assert "put" in " ".join(compared.to_dict()["disagreements"])  # JSON stays English
    assert "fração da linha da consulta" in _texts(compared.figure())

    from attnviz.measures.stats import LABEL_SHARES
    from attnviz.render.stats import StatsTable

    record = {"layer": 0, "head": 0, "entropy": 1.0, "first": 0.6, "punct": 0.1,
              "self": 0.2, "prev": 0.1, "label": "first-token"}  # fmt: skip
    table = _rendered(
        StatsTable([record], "t", label_shares=LABEL_SHARES, first_token="<bos>", lang="pt")
    )
    assert "entropia" in table and "primeira" in table and "rótulo" in table
    assert "Um decodificador: cada peça vê só a si mesma" in table and "<bos>" in table
    assert "primeira-peça" in table and "first-token" not in table  # the JSON keeps it


# ---------------------------------------------------------------- the page


def test_page_controls_come_from_the_page_data(analysis: attnviz.Analysis) -> None:
    from attnviz.render.html import WEB

    page = analysis.html(lang="pt")
    assert '<html lang="pt-BR">' in page
    spec = json.loads(
        re.search(r'type="application/json" id="[^"]+">(.*?)</script>', page, re.S).group(1)  # type: ignore[union-attr]
    )
    assert spec["lang"] == "pt" and spec["text"] == page_texts("pt")
    assert spec["text"]["view_heads"] == "Cabeças" and spec["text"]["layer"] == "camada"
    # The script hard-codes none of the page's English: every sentence of it is data.
    script = (WEB / "attnviz.js").read_text(encoding="utf-8")
    for text in page_texts("en").values():
        for piece in re.split(r"\{\w+\}", text):
            if " " in piece.strip() and len(piece.strip()) >= 8:
                assert piece.strip() not in script, piece


# ---------------------------------------------------------------- the command line


def _cli(*args: str, lang: str = "C.UTF-8") -> str:
    env = {"LANG": lang, "LC_ALL": None, "LC_MESSAGES": None, "COLUMNS": "120"}
    result = CliRunner().invoke(app, list(args), env=env)  # type: ignore[arg-type]
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_a_portuguese_locale_labels_the_command_line_in_portuguese() -> None:
    shown = _cli("show", PT, "--layer", "2", lang="pt_BR.UTF-8")
    assert "cons \\ chave" in shown and "camada 2" in shown
    english = _cli("show", PT, "--layer", "2", "--lang", "en", lang="pt_BR.UTF-8")
    assert "query \\ key" in english and "layer 2" in english
    asked = _cli("find", PT, "--from", "ele", "--to", "João", "--top", "3", "--lang", "pt")
    assert "maior chave" in asked and "em cada cabeça" in asked
    pieces = _cli("tokens", PT, lang="pt_BR.UTF-8")
    assert "28 peças, 17 palavras" in pieces and "palavra" in pieces and "trecho" in pieces


def test_lang_reaches_images_and_pages_from_the_command_line(tmp_path: Path) -> None:
    svg, html = tmp_path / "show.svg", tmp_path / "show.html"
    _cli("show", PT, "--layer", "2", "--out", str(svg), "--lang", "pt")
    assert "peso de atenção" in svg.read_text(encoding="utf-8")
    _cli("export", PT, "--out", str(html), lang="pt_BR.UTF-8")
    assert '"view_matrix":"Matriz"' in html.read_text(encoding="utf-8")


# ---------------------------------------------------------------- in a browser


@pytest.mark.slow
def test_the_page_reads_in_portuguese_in_chromium(
    analysis: attnviz.Analysis, tmp_path: Path
) -> None:
    from tests.render.test_html import CHROMIUM, Page, _browser

    out = analysis.save(tmp_path / "pt.html", "heads", layer=2, lang="pt")
    with _browser()() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        view = Page(chromium, out)
        page = view.page
        seen = [page.inner_text(".attnviz")]
        page.hover('.av-left .av-tok[data-index="3"]')
        seen.append(page.inner_text(".av-status"))
        page.click('button[data-view="matrix"]')
        seen.append(page.inner_text(".attnviz"))
        page.click('button[data-view="model"]')
        seen.append(page.inner_text(".attnviz"))
        text = "\n".join(seen)
        expected = [
            *("Cabeças", "Matriz", "Modelo", "palavras", "peças", "cabeças:", "todas"),
            *("camada 2", "passe o mouse", "atende a cada chave", "6 camadas × 12 cabeças"),
            "linhas são consultas, colunas são chaves",
        ]
        for words in expected:
            assert words in text, words
        options = page.eval_on_selector_all("option", "os => os.map(o => o.textContent)")
        assert "média das cabeças" in options and "cabeça 0" in options
        for english in ("Head view", "Matrix", "hover a token", "mean of", "layers ×", "words"):
            assert english not in text + "\n".join(options), english
        assert view.errors == [] and view.requests == []
        view.close()
        chromium.close()

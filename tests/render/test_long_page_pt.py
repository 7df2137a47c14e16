"""The pooled page of a long input in Portuguese: `long_page(..., lang="pt")` carries the
lexicon's `long_` words in its data, web/long.js shows them (controls, captions, hover texts,
the profile table, head kinds) and hard-codes no English of its own, and the page reads in
Portuguese in Chromium without a console error. A head's kind stays an English key in the
data; only what is shown is translated."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.lexicon import LABELS, label
from attnviz.measures.long import POOL_BY, LongResult
from attnviz.render.long import (
    long_page,
    long_page_title,
    long_profile_title,
    long_texts,
    profile_figure,
    profile_table,
)
from tests.conftest import TinyFactory

TEXT = (
    "John thought: the train was full, but he found a free seat near the window, and "
    "he sat there reading until the last station."
)
KINDS = ("sink", "self", "previous", "local", "global")  # LongResult.head_kinds' words
WEB = Path(attnviz.__file__).parent / "render" / "web"


def _page(
    long: LongResult,
    lang: str,
    view: str = "matrix",
    windows: list[int | None] | None = None,
    **where: int | None,
) -> str:
    """The pooled page of `long` in `lang`, drawn from its arrays as `LongResult.html` draws it
    (and with the model's sliding `windows`, which it does not pass yet)."""
    assert long.pooled is not None and long.pool is not None
    return long_page(
        long.pooled,
        long.pool_labels,
        T=long.T,
        pool=long.pool,
        pool_by=long.pool_by,
        causal=long.causal,
        bin_labels=long.bin_labels,
        profile=long.profile,
        widths=long.bin_widths,
        sink=long.sink,
        kinds=[long.head_kinds(x) for x in range(long.layers)],
        title=long_page_title(
            long.model, long.T, long.layers, long.heads, long.pool, long.pool_by, lang
        ),
        view=view,
        layer=where.get("layer", long.layers - 1),
        head=where.get("head"),
        lang=lang,
        windows=windows,
    )


def _spec(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1))


def test_the_page_carries_its_words_in_its_language(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=4)
    page = _page(long, "pt")
    assert '<html lang="pt-BR">' in page and 'class="attnviz av-long" lang="pt-BR"' in page
    spec = _spec(page)
    assert spec["lang"] == "pt" and spec["text"] == long_texts("pt")
    assert spec["text"]["view_matrix"] == "Matriz" and spec["text"]["kind_previous"] == "anterior"
    assert spec["kinds"] == [long.head_kinds(x) for x in range(2)]  # the data keeps English keys
    assert spec["poolBy"] == "mean"
    how = "a parcela da atenção das consultas"
    title = f"{long.T} peças · 2 camadas × 8 cabeças · blocos de 4 peças, {how}"
    assert spec["title"].endswith(title) and f"<title>{spec['title']}</title>" in page
    english = _spec(_page(long, "en"))
    assert english["lang"] == "en" and english["text"]["kind_sink"] == "sink"
    # In English the title is the one LongResult.html writes today.
    assert english["title"] == _spec(long.html())["title"]
    with pytest.raises(ValueError, match="lang"):
        _page(long, "fr")


def test_every_kind_and_pooling_has_its_words_in_both_languages() -> None:
    for lang in LABELS:
        for kind in KINDS:
            assert label(lang, f"long_kind_{kind}").strip(), (lang, kind)
        for how in POOL_BY:
            assert label(lang, f"long_by_{how}").strip(), (lang, how)
    assert [label("pt", f"long_kind_{k}") for k in KINDS] == [
        *("sumidouro", "si-mesma", "anterior", "local", "global")
    ]


def test_the_script_hard_codes_none_of_the_pages_english() -> None:
    script = (WEB / "long.js").read_text(encoding="utf-8")
    script = re.sub(r"/\*.*?\*/|//[^\n]*", "", script, flags=re.S)  # its comments may say it
    for text in long_texts("en").values():
        for piece in re.split(r"\{\w+\}", text):
            if " " in piece.strip() and len(piece.strip()) >= 8:
                assert piece.strip() not in script, piece
    for key in long_texts("en"):  # and every word the data carries is one the script asks for
        asked = key.startswith(("kind_", "by_", "view_", "title")) or f'"{key}"' in script
        assert asked, key


def _printed(table: object) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200).print(table)
    return out.getvalue()


def test_the_distance_table_and_figure_in_portuguese(tiny_decoder: TinyFactory) -> None:
    """`attnviz distance`'s table and figure (render.long.profile_table, profile_figure)."""
    folder = str(tiny_decoder("mistral", num_hidden_layers=2, sliding_window=2))
    long = attnviz.analyse_long(TEXT, model=folder)
    kinds = [long.head_kinds(x) for x in range(long.layers)]
    parts = (long.profile, long.bin_labels, long.bin_widths)

    def table(lang: str) -> str:
        title = long_profile_title(long.model, long.T, lang)
        return _printed(profile_table(title, *parts, long.sink, kinds, range(2), lang=lang))

    portuguese = " ".join(table("pt").split())  # the title wraps at the table's width
    for words in ("camada", "cabeça", "sumidouro", "tipo", "anterior", "si-mesma",
                  f"{long.T} peças · fração do peso de cada cabeça por distância"):  # fmt: skip
        assert words in portuguese, words
    for english in ("layer", "head", "sink", "kind", "previous", "self", "pieces"):
        assert english not in portuguese, english
    assert table("en") == _printed(long.profile_table())  # English as LongResult draws it
    title = long_profile_title(long.model, long.T, "pt")
    figure = profile_figure(title, *parts, lang="pt")
    axes, bar = figure.axes
    assert axes.get_xlabel() == "distância consulta − chave (peças)"
    assert bar.get_ylabel() == "fração do peso da cabeça"
    assert [t.get_text() for t in axes.get_yticklabels()] == ["C0 c0", "C1 c0"]  # a tick a layer


@pytest.mark.slow
def test_the_pooled_page_reads_in_portuguese_in_chromium(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    from tests.render.test_html import CHROMIUM, Page, _browser

    # a window of 2 pieces: heads that read the previous piece or themselves, kinds whose
    # Portuguese differs from their English
    folder = str(tiny_decoder("mistral", num_hidden_layers=2, sliding_window=2))
    long = attnviz.analyse_long(TEXT, model=folder, pool=4)
    assert {"previous", "self"} <= set(long.head_kinds(0) + long.head_kinds(1))
    out = tmp_path / "longo.html"
    out.write_text(_page(long, "pt", "matrix", layer=1, head=0), encoding="utf-8")
    n = len(long.pool_labels)
    with _browser()() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        view = Page(chromium, out)
        page = view.page
        page.wait_for_selector(".attnviz[data-ready=true]", timeout=30_000)
        seen = [page.inner_text(".attnviz")]
        # the profile table under the map is reached by scrolling the page, not a box of its own
        own_scroll = "m => m.scrollHeight > m.clientHeight + 1"
        assert page.eval_on_selector(".av-main", own_scroll) is False
        box = page.locator("canvas.av-heat").bounding_box()
        assert box is not None
        i, j = n - 2, 1  # a block of queries late in the text, keys early
        page.mouse.move(box["x"] + (j + 0.5) * box["width"] / n,
                        box["y"] + (i + 0.5) * box["height"] / n)  # fmt: skip
        tip = page.locator(".av-tip")
        assert tip.text_content().startswith(
            f"consultas {long.pool_labels[i]} → chaves {long.pool_labels[j]}: "
        )
        seen.append(page.inner_text(".av-status"))
        page.mouse.move(box["x"] + (n - 0.5) * box["width"] / n, box["y"] + 0.5 * box["height"] / n)
        assert tip.get_attribute("data-masked") == "true"
        seen.append(tip.text_content())
        kinds = page.eval_on_selector_all(
            ".av-profile td[data-kind]", "els => els.map(e => [e.dataset.kind, e.textContent])"
        )
        assert [k for k, _ in kinds] == long.head_kinds(1)
        for kind, shown in kinds:  # the English key in the data, its Portuguese on screen
            assert shown == label("pt", f"long_kind_{kind}")
        page.click('button[data-view="model"]')
        seen.append(page.inner_text(".attnviz"))
        captions = page.eval_on_selector_all("figcaption", "els => els.map(e => e.textContent)")
        assert len(captions) == long.layers * long.heads
        for c, caption in enumerate(captions):
            layer, head = divmod(c, long.heads)
            kind = label("pt", f"long_kind_{long.head_kinds(layer)[head]}")
            assert caption == f"C{layer} c{head} {kind}"
        thumb = page.get_attribute('canvas.av-thumb[data-layer="1"][data-head="2"]', "title")
        assert thumb is not None and thumb.startswith("camada 1, cabeça 2: sumidouro ")
        text = "\n".join(seen)
        expected = [
            *("Matriz", "Cabeças", "Modelo", "passe o mouse sobre um bloco: a sua linha"),
            "linhas são blocos de consultas, colunas blocos de chaves, de 4 peças; cada bloco: a "
            "parcela da atenção das consultas",
            "camada 1: fração do peso de cada cabeça por distância consulta–chave",
            *("sumidouro", "tipo", "anterior", "si-mesma", "os 12 maiores de", "blocos de chaves"),
            "mascaradas (depois das consultas)",
            *("clique numa cabeça para abri-la", "2 camadas × 8 cabeças", "blocos de 4 peças"),
        ]
        for words in expected:
            assert words in text, words
        options = page.eval_on_selector_all("option", "os => os.map(o => o.textContent)")
        assert {"camada 0", "camada 1", "média das 8 cabeças", "cabeça 0"} <= set(options)
        for english in ("Matrix", "Heads", "hover a block", "rows are blocks", "queries ",
                        "mean of", "click a head", "layers ×", "share of", "kind", "previous",
                        "self"):  # fmt: skip
            assert english not in text + "\n".join(options), english
        assert view.errors == [] and view.requests == []
        view.close()
        chromium.close()


def test_lang_reaches_the_pooled_page_from_the_command_line_and_the_api(
    tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    out = tmp_path / "m.html"
    result = CliRunner().invoke(app, ["model", TEXT, "--model", folder, "--pool", "8",
                                      "--lang", "pt", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    spec = _spec(out.read_text(encoding="utf-8"))
    assert spec["lang"] == "pt" and "camadas" in spec["title"]
    long = attnviz.analyse_long(TEXT, model=folder, pool=8)
    assert _spec(long.html(lang="pt"))["text"] == long_texts("pt")


def test_distance_speaks_the_commands_language(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    folder = str(tiny_decoder("mistral", num_hidden_layers=2, sliding_window=2))
    out = tmp_path / "d.png"
    result = CliRunner().invoke(app, ["distance", TEXT, "--model", folder, "--lang", "pt",
                                      "--out", str(out), "--show"],
                                 env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.stderr
    shown = " ".join(result.stdout.split())
    for words in ("fração do peso de cada cabeça por distância", "sumidouro", "tipo", "anterior"):
        assert words in shown, words
    assert "kind" not in shown and out.stat().st_size > 0


def test_the_pooled_views_and_a_long_row_speak_the_commands_language(
    tiny_decoder: TinyFactory,
) -> None:
    """`show/heads/model --pool N --lang pt` and `show --query '#N' --lang pt` title their
    views in Portuguese (they were English whatever --lang said); English stays the default."""
    folder = str(tiny_decoder("llama", num_hidden_layers=2))
    runs = {
        ("show", "--pool", "8"): ("camada 1", "média das cabeças", "blocos de 8 peças"),
        ("heads", "--pool", "8", "--layer", "0"): ("camada 0", "cabeça 3", "blocos de 8 peças"),
        ("model", "--pool", "8"): ("2 camadas ×", "cabeças · blocos de 8 peças"),
        ("show", "--query", "#5", "--layer", "1", "--head", "0"): ("consulta", "cabeça 0"),
    }
    for args, words in runs.items():
        result = CliRunner().invoke(app, [args[0], TEXT, "--model", folder, *args[1:],
                                          "--lang", "pt"], env={"COLUMNS": "200"})  # fmt: skip
        assert result.exit_code == 0, result.stderr
        shown = " ".join(result.stdout.split())
        for word in words:
            assert word in shown, (args, word)
        assert "pieces" not in shown and "layer" not in shown, args
    english = attnviz.analyse_long(TEXT, model=folder, pool=8).view(1).title
    assert "layer 1 · head mean" in english and "blocks of 8 pieces" in english

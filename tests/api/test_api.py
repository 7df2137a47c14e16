"""The public Python API: what a notebook gets is what the commands show, as data."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.measures.select import merge_words

EN = "John thought: the train was full, but he found a free seat."
PT = "Vi João e Maria ontem. Eles estavam juntos."


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(EN)


def cli(*args: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def printed(renderable: object, width: int = 80) -> str:
    """What `rich.print` writes to a plain terminal `width` cells wide."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False).print(renderable)
    return out.getvalue()


@pytest.mark.slow
def test_import_attnviz_is_cheap() -> None:
    """`import attnviz` and touching the API names load neither torch nor matplotlib."""
    code = (
        "import sys, attnviz; attnviz.analyse; attnviz.Analysis; attnviz.AttentionView; "
        "attnviz.head_stats; attnviz.BadInput; "
        "print(sorted(m for m in ('torch', 'matplotlib', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_resolve() -> None:
    for name in attnviz.__all__:
        assert getattr(attnviz, name) is not None
    assert issubclass(attnviz.BadInput, attnviz.AttnvizError)
    with pytest.raises(AttributeError):
        attnviz.no_such_name  # noqa: B018


def test_analysis_carries_the_input_and_the_model(analysis: attnviz.Analysis) -> None:
    L, H, T, _ = analysis.attentions.shape
    assert (L, H) == (6, 12) and T == len(analysis.tokens) == len(analysis.labels)
    np.testing.assert_allclose(analysis.attentions.sum(-1), 1.0, atol=1e-5)
    assert analysis.tokens[0] == "[CLS]" and analysis.tokens[-1] == "[SEP]"
    assert analysis.model.name == "all-MiniLM-L6-v2" and analysis.model.family == "BERT"
    assert analysis.text == EN and analysis.pair is None and analysis.pair_start is None
    assert not analysis.causal and analysis.dtype == "float32"
    words = analysis.words
    assert [w.label for w in words][:3] == ["[CLS]", "John", "thought"]
    assert sorted(i for w in words for i in w.pieces) == list(range(T))
    assert "6 layers × 12 heads" in repr(analysis)


def test_view_resolves_layer_and_head_once(analysis: attnviz.Analysis) -> None:
    view = analysis.view(layer=-3, head=-5)
    assert (view.layer, view.head) == (3, 7)
    assert view.title == "all-MiniLM-L6-v2 · layer 3 · head 7"
    groups = [w.pieces for w in analysis.words]
    np.testing.assert_allclose(view.matrix, merge_words(analysis.attentions[3, 7], groups))
    he = view.labels.index("he")
    assert view.labels[int(view.matrix[he].argmax())] == "John"
    assert view.weight(he, view.labels.index("John")) == pytest.approx(0.70, abs=0.01)


def test_view_mean_and_tokens(analysis: attnviz.Analysis) -> None:
    view = analysis.view(units="tokens")
    assert view.head is None and view.layer == 5 and "mean of 12 heads" in view.title
    np.testing.assert_allclose(view.matrix, analysis.attentions[5].mean(axis=0), rtol=1e-6)
    assert view.labels == analysis.labels


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer": 6}, "layer 6 is out of range: this model has 6 layers"),
        ({"head": 12}, "head 12 is out of range"),
        ({"units": "letters"}, "units 'letters' is not one of words, tokens"),
    ],
)
def test_view_refuses_what_the_model_lacks(
    analysis: attnviz.Analysis, kwargs: dict, message: str
) -> None:
    with pytest.raises(attnviz.BadInput, match=message):
        analysis.view(**kwargs)


def test_rich_print_of_a_view_is_the_show_command(analysis: attnviz.Analysis) -> None:
    view = analysis.view(layer=3, head=7)
    assert printed(view) == cli("show", EN, "--layer", "3", "--head", "7")


def test_view_record_is_show_json(analysis: attnviz.Analysis) -> None:
    record = json.loads(cli("show", EN, "--layer", "2", "--json"))
    assert json.loads(json.dumps(analysis.view(layer=2).to_dict())) == record


def test_heads_and_model_views_print_as_the_commands(analysis: attnviz.Analysis) -> None:
    heads = analysis.heads(layer=0, heads=[0, 2, -1])
    assert heads.heads == [0, 2, 11] and heads.matrices.shape[0] == 3
    assert printed(heads, 100) == cli("heads", EN, "--layer", "0", "--heads", "0,2,-1", columns=100)
    model = analysis.model_view(heads=[1, 2])
    assert model.layer is None and model.matrices.shape[0] == 12 and model.columns == 2
    assert printed(model, 100) == cli("model", EN, "--heads", "1,2", columns=100)


def test_rollout_is_the_rollout_command(analysis: attnviz.Analysis) -> None:
    rollout = analysis.rollout(upto=2, top=2)
    assert rollout.layer == 2
    np.testing.assert_allclose(rollout.matrix.sum(-1), 1.0, atol=1e-9)
    assert all(len(row) == 2 for row in rollout.sources())
    record = json.loads(cli("rollout", EN, "--upto", "2", "--json"))
    assert json.loads(json.dumps(rollout.to_dict())) == record
    assert printed(rollout) == cli("rollout", EN, "--upto", "2", "--top", "2")


def test_explain_returns_the_numbers_the_command_prints(analysis: attnviz.Analysis) -> None:
    explanation = analysis.explain("he", layer=3, head=7)
    he = analysis.labels.index("he")
    assert explanation.query == he and (explanation.layer, explanation.head) == (3, 7)
    np.testing.assert_allclose(explanation.weights, analysis.attentions[3, 7, he], atol=1e-6)
    assert explanation.top_weight == analysis.labels.index("John")
    assert printed(explanation) == cli(
        "explain", EN, "--token", "he", "--layer", "3", "--head", "7", "--lang", "en"
    )
    assert analysis.explain(index=he, layer=3, head=7, lang="pt").lang == "pt"
    with pytest.raises(attnviz.BadInput, match="not a word of the text"):
        analysis.explain("she")


def test_head_stats_records_are_the_stats_command() -> None:
    texts = [EN, PT]
    stats = attnviz.head_stats(texts)
    assert (stats.layers, stats.heads, stats.sentences) == (6, 12, 2)
    assert len(stats.records) == 72 and stats.record(0, 2)["label"] == "previous-token"
    record = json.loads(cli("stats", *texts, "--json", "--sort", "prev", "--top", "3"))
    assert json.loads(json.dumps(stats.sorted("prev", top=3))) == record
    assert printed(stats) == cli("stats", *texts)


def test_save_writes_what_export_writes(analysis: attnviz.Analysis, tmp_path: Path) -> None:
    analysis.save(tmp_path / "api.npz")
    CliRunner().invoke(app, ["export", EN, "--out", str(tmp_path / "cli.npz")])
    with np.load(tmp_path / "api.npz") as ours, np.load(tmp_path / "cli.npz") as theirs:
        assert sorted(ours.files) == sorted(theirs.files)
        for name in ours.files:
            np.testing.assert_array_equal(ours[name], theirs[name])
    analysis.save(tmp_path / "api.json")
    assert json.loads((tmp_path / "api.json").read_text())["tokens"] == analysis.tokens


def test_save_refuses_a_bad_path_and_writes_nothing(
    analysis: attnviz.Analysis, tmp_path: Path
) -> None:
    with pytest.raises(attnviz.BadInput, match="unknown extension .txt"):
        analysis.save(tmp_path / "x.txt")
    with pytest.raises(attnviz.BadInput, match="view 'grid' is not one of show, heads, model"):
        analysis.save(tmp_path / "x.png", "grid")
    with pytest.raises(attnviz.AttnvizError, match="does not exist"):
        analysis.save(tmp_path / "missing" / "x.npz")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_figures_and_notebook_images(analysis: attnviz.Analysis, tmp_path: Path) -> None:
    figure = analysis.figure("heads", layer=0, heads=[0, 1])
    assert len(figure.axes) >= 2
    png = analysis.view(layer=3, head=7)._repr_png_()
    assert png.startswith(b"\x89PNG")
    assert analysis._repr_png_().startswith(b"\x89PNG")
    path = analysis.save(tmp_path / "m.svg", "model", heads=[0])
    assert path.read_text().lstrip().startswith("<?xml")


def test_errors_are_the_cli_errors() -> None:
    with pytest.raises(attnviz.BadInput, match="the text is empty"):
        attnviz.analyse("   ")
    with pytest.raises(attnviz.BadInput, match="mask 'future' is not one of none, causal"):
        attnviz.analyse(EN, mask="future")
    with pytest.raises(attnviz.BadInput, match="at most 512"):
        attnviz.prepare("word " * 600)
    with pytest.raises(attnviz.AttnvizError, match="not found|does not exist|no config"):
        attnviz.prepare(EN, model="/nonexistent/model")


def test_prepare_tokenizes_without_torch() -> None:
    code = (
        "import sys, attnviz; p = attnviz.prepare('Vi João e Maria.'); "
        "print(p.labels, p.model.layers, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['[CLS]', 'Vi', 'João', 'e', 'Maria', '.', '[SEP]'] 6 False"


def test_causal_pair_analysis() -> None:
    analysis = attnviz.analyse("Vi João.", pair="Ele sorriu.", mask="causal", cache=False)
    assert analysis.causal and analysis.pair_start is not None
    view = analysis.view(layer=0, head=0, units="tokens")
    assert "(modified: causal mask)" in view.title
    assert view.labels[analysis.pair_start].startswith("B:")
    assert np.allclose(np.triu(view.matrix, k=1), 0)


@pytest.mark.slow
def test_fresh_interpreter_equals_export(tmp_path: Path) -> None:
    """`attnviz.analyse` in a new process gives the attentions `attnviz export` writes."""
    out = tmp_path / "x.npz"
    result = CliRunner().invoke(app, ["export", PT, "--out", str(out), "--no-cache"])
    assert result.exit_code == 0, result.stderr
    code = (
        "import sys, numpy as np, attnviz; "
        f"a = attnviz.analyse({PT!r}, cache=False); ref = np.load(sys.argv[1]); "
        "print(np.abs(a.attentions - ref['attentions']).max(), "
        "list(ref['tokens']) == a.tokens)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=True
    )
    diff, same_tokens = run.stdout.split()
    assert float(diff) == 0.0 and same_tokens == "True"


def test_exports_carry_the_text_the_words_and_their_pieces(tmp_path: Path) -> None:
    a = attnviz.analyse("Vi João e Maria ontem.", pair="Eles estavam juntos.")
    a.save(tmp_path / "x.npz")
    a.save(tmp_path / "x.json")
    record = json.loads((tmp_path / "x.json").read_text(encoding="utf-8"))
    words = [w.label for w in a.words]
    assert (record["text"], record["pair"], record["model"]) == (a.text, a.pair, a.model.name)
    assert record["words"] == words and "João" in words and "Eles" in words
    assert record["word_pieces"] == [w.pieces for w in a.words]
    with np.load(tmp_path / "x.npz", allow_pickle=False) as data:
        assert (str(data["text"]), str(data["pair"]), str(data["model"])) == (
            a.text,
            a.pair,
            "all-MiniLM-L6-v2",
        )
        assert list(data["words"]) == words
        owner = data["word_of_piece"]
        assert owner.shape == (data["attentions"].shape[-1],)
        for w, word in enumerate(a.words):
            assert (owner[word.pieces] == w).all()
        assert record["word_of_piece"] == owner.tolist()

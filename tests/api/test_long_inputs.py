"""Long inputs stay within bounded memory: only the layers a view needs are computed and kept.

Past `limits.attention_budget()` of attention (all layers × heads × T × T float32), the
whole attention is refused before any work; `layers=` (and show/heads, which need one
layer) keep only what they show, and say so in one note.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import BadInput
from tests.conftest import TinyFactory

TEXT = "John thought: the train was full, but he found a free seat."


def test_kept_layers_equal_the_same_layers_of_a_whole_run(tiny_decoder: TinyFactory) -> None:
    folder = str(tiny_decoder("llama", num_hidden_layers=4))
    whole = attnviz.analyse(TEXT, model=folder, cache=False)
    some = attnviz.analyse(TEXT, model=folder, cache=False, layers=[2, -1])
    assert some.layers == (2, 3)
    assert some.attentions.shape[0] == 2
    np.testing.assert_array_equal(some.attentions, whole.attentions[[2, 3]])
    np.testing.assert_array_equal(some.view(3).matrix, whole.view(3).matrix)
    assert some.heads(2).layer == 2
    with pytest.raises(BadInput, match="layer 1 was not computed"):
        some.view(1)
    for call in (some.model_view, some.rollout, lambda: some.find("he", "John"), some.html):
        with pytest.raises(BadInput, match="needs every layer"):
            call()


def test_an_encoder_keeps_layers_too(embedded_folder: Path) -> None:
    whole = attnviz.analyse(TEXT, cache=False)
    some = attnviz.analyse(TEXT, cache=False, layers=[3])
    np.testing.assert_allclose(some.attentions[0], whole.attentions[3], atol=1e-6)
    assert some.view(3, 7).row("he").keys[0] == whole.view(3, 7).row("he").keys[0]


def test_export_names_the_layers_it_holds(tiny_decoder: TinyFactory, tmp_path: Path) -> None:
    folder = str(tiny_decoder("gpt2"))
    some = attnviz.analyse(TEXT, model=folder, cache=False, layers=[1])
    some.save(tmp_path / "a.npz")
    some.save(tmp_path / "a.json")
    with np.load(tmp_path / "a.npz") as data:
        assert data["layers"].tolist() == [1]
        assert data["attentions"].shape[0] == 1
    record = json.loads((tmp_path / "a.json").read_text())
    assert record["layers"] == [1]
    assert record["causal"] is True and record["kind"] == "decoder, causal"  # its own mask
    loaded = attnviz.load_attentions(tmp_path / "a.npz")  # a file of one layer: asking another
    with pytest.raises(BadInput, match="load a file that holds that layer"):
        loaded.view(0)


def test_bad_layer_lists_are_refused_in_one_line(tiny_decoder: TinyFactory) -> None:
    prepared = attnviz.prepare(TEXT, model=str(tiny_decoder("gpt2")))
    for layers, message in (([], "empty"), ([5], "out of range"), ("1", "list of layer")):
        with pytest.raises(BadInput, match=message) as info:
            prepared.analyse(layers=layers, cache=False)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch, tiny_decoder: TinyFactory) -> str:
    """A 4-layer Llama, and a budget that one layer of TEXT fits and all four do not."""
    import attnviz.limits

    folder = str(tiny_decoder("llama", num_hidden_layers=4))
    budget = attnviz.prepare(TEXT, model=folder).attention_bytes(1) + 1
    monkeypatch.setattr(attnviz.limits, "ATTENTION_BYTES", budget)
    return folder


def test_whole_attention_past_the_budget_is_refused_before_any_work(small_budget: str) -> None:
    prepared = attnviz.prepare(TEXT, model=small_budget)
    with pytest.raises(BadInput) as info:
        prepared.analyse(cache=False)
    message = str(info.value)
    assert "\n" not in message
    assert "all 4 layers" in message and "layers=[L]" in message
    fits = int(message.rsplit("max_tokens ", 1)[1].split()[0])  # the most that fits (Python)
    assert 0 < fits < len(prepared.pieces)
    assert prepared.attention_bytes() * fits**2 // len(prepared.pieces) ** 2 <= (
        attnviz.limits.ATTENTION_BYTES
    )
    with pytest.raises(BadInput, match="name fewer layers"):
        prepared.analyse(cache=False, layers=[0, 1])
    assert prepared.analyse(cache=False, layers=[1]).layers == (1,)


def test_show_and_heads_keep_their_layer_and_say_so(small_budget: str) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    folder = small_budget
    runner = CliRunner()
    result = runner.invoke(app, ["show", TEXT, "--model", folder, "--layer", "2", "--json"])
    assert result.exit_code == 0, result.stderr
    assert "keeping layer 2 only" in result.stderr and "all 4 layers would take" in result.stderr
    record = json.loads(result.stdout)
    whole = attnviz.analyse(TEXT, model=folder, cache=False, layers=[2]).view(2)
    np.testing.assert_allclose(record["weights"], whole.matrix, atol=1e-6)
    heads = runner.invoke(app, ["heads", TEXT, "--model", folder, "--layer", "1", "--quiet"])
    assert heads.exit_code == 0 and "keeping" not in heads.stderr
    model = runner.invoke(app, ["model", TEXT, "--model", folder])  # pooled, a block at a time
    assert model.exit_code == 0, model.stderr
    assert "--pool" in model.stderr and "blocks of 1 pieces" in model.stdout
    some = runner.invoke(app, ["model", TEXT, "--model", folder, "--heads", "0"])
    assert some.exit_code == 2  # bad input, as for any option the input cannot take
    assert some.stderr.count("\n") == 1 and "more than attnviz keeps" in some.stderr


def test_a_decoder_reads_2048_pieces_unless_max_tokens_says_otherwise(
    tiny_decoder: TinyFactory,
) -> None:
    folder = str(tiny_decoder("gpt2", n_positions=4096))
    long = " ".join(["the train was full"] * 200)  # 2,600 pieces with this tokenizer
    with pytest.raises(BadInput) as info:
        attnviz.prepare(long, model=folder)
    assert "at most 2048 (attnviz's bound for a decoder; max_tokens raises it up to the " in str(
        info.value
    )
    assert len(attnviz.prepare(long, model=folder, truncate=True).pieces) == 2048
    assert len(attnviz.prepare(long, model=folder, max_tokens=4096).pieces) > 2048
    assert len(attnviz.prepare(long, model=folder, max_tokens=100, truncate=True).pieces) == 100
    with pytest.raises(BadInput, match=r"max_tokens 5000 is out of range.*at most 4,096"):
        attnviz.prepare(long, model=folder, max_tokens=5000)


def test_max_tokens_on_the_command_line(embedded_folder: Path) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["tokens", TEXT, "--max-tokens", "5", "--truncate"])
    assert result.exit_code == 0, result.stderr
    refused = runner.invoke(app, ["show", TEXT, "--max-tokens", "5"])
    assert refused.exit_code == 2
    assert "takes at most 5 (--max-tokens)" in refused.stderr
    too_many = runner.invoke(app, ["show", TEXT, "--max-tokens", "513"])
    assert too_many.exit_code == 2 and "at most 512" in too_many.stderr


def test_max_tokens_past_what_one_layer_can_keep_is_refused_before_tokenizing(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import attnviz.limits

    folder = str(tiny_decoder("gpt2", n_positions=4096))
    monkeypatch.setattr(attnviz.limits, "ATTENTION_BYTES", 8 * 100 * 100 * 4)  # 100 pieces
    huge = "word " * 3_000_000  # 15 MB: refused by the bound, never tokenized
    with pytest.raises(BadInput) as info:
        attnviz.prepare(huge, model=folder, max_tokens=200)
    message = str(info.value)
    assert "\n" not in message and "use max_tokens 100 or less" in message
    assert "ATTNVIZ_ATTENTION_MB" in message
    short = attnviz.prepare(TEXT, model=folder, max_tokens=100)
    assert short.shape.token_limit()[0] == 100  # the default follows the budget too
    monkeypatch.setenv("ATTNVIZ_ATTENTION_MB", "1")
    with pytest.raises(BadInput, match="ATTNVIZ_ATTENTION_MB='1' is not a number of megabytes"):
        attnviz.prepare(TEXT, model=folder)
    monkeypatch.setenv("ATTNVIZ_ATTENTION_MB", "64")  # 64 MB: 1,448 pieces of 8 heads
    assert attnviz.prepare(TEXT, model=folder).shape.token_limit()[0] == 1448


def test_json_exports_and_pages_past_their_size_are_refused_before_the_work(
    tiny_decoder: TinyFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    import attnviz.limits
    from attnviz.cli import app

    folder = str(tiny_decoder("gpt2"))
    monkeypatch.setattr(attnviz.limits, "JSON_WEIGHTS", 1000)
    monkeypatch.setattr(attnviz.limits, "PAGE_WEIGHTS", 1000)
    runner = CliRunner()
    for name, message in (("x.json", "write .npz instead"), ("x.html", "draw one layer")):
        out = tmp_path / name
        result = runner.invoke(app, ["export", TEXT, "--model", folder, "--out", str(out)])
        assert result.exit_code == 2 and message in result.stderr
        assert result.stderr.count("\n") == 1 and not out.exists()
    analysis = attnviz.analyse(TEXT, model=folder, cache=False)
    with pytest.raises(BadInput, match="write .npz instead"):
        analysis.save(tmp_path / "y.json")
    analysis.save(tmp_path / "y.npz")  # binary data has no such bound
    # In a notebook, an analysis too large for a page shows its last layer's matrix instead.
    shown = re.search(r'"layers":(\d+),"heads":(\d+)', analysis._repr_html_())
    assert shown is not None and shown.groups() == ("1", "1")


@pytest.mark.slow  # commands on a 2,600-piece input (2,048 read)
def test_truncation_notes_say_whose_bound_and_quiet_hides_them(
    tiny_decoder: TinyFactory,
) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    folder = str(tiny_decoder("gpt2", n_positions=4096))
    long = " ".join(["the train was full"] * 200)  # 2,600 pieces
    runner = CliRunner()
    for command in ("tokens", "show"):
        loud = runner.invoke(app, [command, long, "--model", folder, "--truncate"])
        assert loud.exit_code == 0, loud.stderr
        assert "; 2048 are read (attnviz's bound for a decoder;" in loud.stderr
        quiet = runner.invoke(app, [command, long, "--model", folder, "--truncate", "--quiet"])
        assert quiet.exit_code == 0 and quiet.stderr == ""

"""Sentence pairs, the causal what-if mask, head subsets and the model view."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz import analyse
from attnviz.api import prepare
from attnviz.cli import app

runner = CliRunner()
A = "Vi João e Maria ontem."
B = "Eles estavam juntos."


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "100"})


def ok(*args: str) -> str:
    result = run(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


def test_pair_token_types_match_transformers_tokenizer(embedded_folder: Path) -> None:
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(embedded_folder))(A, B)
    pieces = prepare(A, pair=B).pieces
    assert pieces.ids == reference["input_ids"]
    assert pieces.type_ids == reference["token_type_ids"]
    assert set(pieces.type_ids) == {0, 1}


def test_pair_attention_equals_transformers(embedded_folder: Path) -> None:
    import torch
    from transformers import BertModel

    pieces = prepare(A, pair=B).pieces
    reference = BertModel.from_pretrained(str(embedded_folder), attn_implementation="eager")
    with torch.inference_mode():
        out = reference(
            torch.tensor([pieces.ids]),
            token_type_ids=torch.tensor([pieces.type_ids]),
            output_attentions=True,
        )
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)
    np.testing.assert_allclose(analyse(A, pair=B).attentions, expected, atol=1e-5)


def test_causal_mask_equals_transformers_decoder_mask(embedded_folder: Path) -> None:
    """BERT configured as a decoder applies the same causal mask: an independent reference."""
    import torch
    from transformers import BertModel

    analysis = analyse(A, mask="causal")
    T = len(analysis.pieces)
    above = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert np.all(analysis.attentions[..., above] == 0.0)
    np.testing.assert_allclose(analysis.attentions.sum(-1), 1.0, atol=1e-5)

    reference = BertModel.from_pretrained(
        str(embedded_folder), attn_implementation="eager", is_decoder=True
    )
    with torch.inference_mode():
        out = reference(torch.tensor([analysis.pieces.ids]), output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)
    np.testing.assert_allclose(analysis.attentions, expected, atol=1e-5)
    assert not np.allclose(analysis.attentions, analyse(A).attentions, atol=1e-3)


def test_show_pair_marks_where_b_starts() -> None:
    pieces = ok("show", A, "--pair", B, "--units", "tokens")
    assert "B:El" in pieces and "##es" in pieces  # the first piece of B, then the rest
    assert pieces.count("[SEP]") >= 2
    assert "B:Eles" in ok("show", A, "--pair", B)  # words


def test_show_causal_says_the_model_was_modified() -> None:
    out = ok("show", A, "--mask", "causal")
    assert "(modified: causal mask)" in out
    assert "modified" not in ok("show", A, "--mask", "none")


def test_json_with_causal_mask_has_nothing_above_the_diagonal() -> None:
    import json

    record = json.loads(ok("show", A, "--mask", "causal", "--head", "2", "--json"))
    weights = np.array(record["weights"])
    assert np.all(np.triu(weights, k=1) == 0.0)


def test_heads_subset_shows_only_those_heads() -> None:
    out = ok("heads", A, "--heads", "0,3,-1")
    assert "heads 0,3,11" in out
    assert "head 3" in out and "head 11" in out
    assert "head 1 " not in out and "head 2 " not in out


@pytest.mark.parametrize(
    ("heads", "message"),
    [
        ("0,x", "not a list of head numbers"),
        ("12", "head 12 is out of range"),
        ("1,1", "names head 1 twice"),
        ("", "not a list of head numbers"),
    ],
)
def test_bad_head_subsets_are_refused(heads: str, message: str) -> None:
    result = run("heads", A, "--heads", heads)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_empty_pair_is_refused() -> None:
    result = run("show", A, "--pair", " ")
    assert result.exit_code == 2
    assert "--pair is empty" in result.stderr


def test_model_view_has_a_panel_per_layer_and_head() -> None:
    out = ok("model", A, "--heads", "0,5")
    for layer in range(6):
        assert f"L{layer} H0" in out and f"L{layer} H5" in out
    assert "L0 H1" not in out
    assert "6 layers × heads 0,5" in out


@pytest.mark.slow  # a 12-panel image
def test_model_view_writes_one_image(tmp_path: Path) -> None:
    out = tmp_path / "model.png"
    result = run("model", A, "--heads", "0,1", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_npz_of_a_causal_pair(tmp_path: Path) -> None:
    out = tmp_path / "pair.npz"
    result = run("export", A, "--pair", B, "--mask", "causal", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    data = np.load(out, allow_pickle=False)
    expected = analyse(A, pair=B, mask="causal").attentions
    np.testing.assert_allclose(data["attentions"], expected, atol=1e-6)


def test_dtype_bfloat16_is_close_to_float32_and_says_so() -> None:
    import json

    half = run("show", A, "--dtype", "bfloat16", "--head", "0", "--json", "--no-cache")
    full = json.loads(ok("show", A, "--head", "0", "--json"))
    assert half.exit_code == 0, half.stderr
    np.testing.assert_allclose(json.loads(half.stdout)["weights"], full["weights"], atol=3e-2)
    assert "(in bfloat16)" in ok("show", A, "--dtype", "bfloat16")


def test_json_tokens_are_plain_and_say_where_the_pair_starts() -> None:
    import json

    record = json.loads(ok("show", A, "--pair", B, "--json"))
    assert not any(t.startswith("B:") for t in record["tokens"])
    assert record["tokens"][record["pair_start"]] == "Eles"
    rolled = json.loads(ok("rollout", A, "--pair", B, "--json", "--units", "tokens"))
    assert rolled["tokens"][rolled["pair_start"] - 1] == "[SEP]"
    assert json.loads(ok("show", A, "--json"))["pair_start"] is None


def test_exported_data_records_how_it_was_computed(tmp_path: Path) -> None:
    import json

    out = tmp_path / "pair.json"
    result = run("export", A, "--pair", B, "--mask", "causal", "--out", str(out))
    assert result.exit_code == 0, result.stderr
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["causal"] is True and record["dtype"] == "float32"
    assert record["token_type_ids"] == prepare(A, pair=B).pieces.type_ids


def test_explain_marks_where_the_pair_starts() -> None:
    out = ok("explain", A, "--pair", B, "--token", "juntos", "--lang", "en")
    assert "B:El" in out

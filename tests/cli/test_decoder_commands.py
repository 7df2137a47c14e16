"""Every command on each decoder family, and the one-line refusals of what a decoder lacks.

Tiny random GPT-2, Llama (grouped-query), Mistral (a window of 4, shorter than the text)
and Qwen2 checkpoints with byte-level BPE tokenizers (tests/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz import analyse, prepare
from attnviz.cli import app
from tests.conftest import TinyFactory
from tests.render.test_html import _spec, _weights

TEXT = "João said the bank refused the loan, and then the bank closed."
FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}
OVERRIDES: dict[str, dict] = {"mistral": {"sliding_window": 4}}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


def _ok(*args: str) -> str:
    code, out, err = _run(*args)
    assert code == 0, (args, err)
    return out


@pytest.mark.slow  # every command, a dozen invocations, on each family
@pytest.mark.parametrize("family", FAMILIES)
def test_every_command_runs_on_each_decoder_family(
    family: str, tiny_decoder: TinyFactory, tmp_path: Path
) -> None:
    folder = str(tiny_decoder(family, **OVERRIDES.get(family, {})))
    model = ("--model", folder)
    analysis = analyse(TEXT, model=folder, cache=False)
    A = analysis.attentions  # (L, H, T, T)
    labels = analysis.pieces.labels

    info = " ".join(_ok("info", *model).split())
    assert f"family {FAMILIES[family]} kind decoder, causal" in info
    assert "(decoder, LM head not counted)" in info
    if family == "gpt2":
        assert "positions a learned vector per position" in info
        assert "key/value heads" not in info
    else:
        assert "positions rotary (RoPE): q and k turned by position, θ = 10000" in info
        assert "key/value heads 4, each read by 2 query heads (grouped-query attention)" in info
    assert ("sliding window a token sees the last 4 tokens" in info) == (family == "mistral")

    # tokens: the vocabulary's byte-level piece beside the text it covers
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in _ok("tokens", TEXT, *model).splitlines()
        if line.startswith("│")
    ]
    assert [row[2] for row in rows] == labels
    assert any("Ã" in row[1] for row in rows) and "João" in labels  # JoÃ£o is João
    assert not any("Ġ" in label or "Ã" in label for label in labels)

    # show --json is analyse's attention: the head mean, one head, in tokens
    record = json.loads(_ok("show", TEXT, *model, "--units", "tokens", "--json"))
    assert record["tokens"] == labels
    np.testing.assert_allclose(record["weights"], A[-1].mean(axis=0), atol=1e-6)
    record = json.loads(_ok("show", TEXT, *model, "--layer", "0", "--head", "5", "--json"))
    assert record["tokens"] == [w.label for w in analysis.words]
    weights = np.array(record["weights"])
    assert np.allclose(np.triu(weights, 1), 0)  # merged into words, still causal
    if family == "mistral":  # the window of 4 pieces: a token never reaches 5 pieces back
        assert np.allclose(np.tril(A, -4), 0) and not np.allclose(np.tril(A, -3), 0)

    assert "all 8 heads" in _ok("heads", TEXT, *model, "--layer", "1")
    assert "2 layers × all 8 heads" in _ok("model", TEXT, *model)
    rollout = json.loads(_ok("rollout", TEXT, *model, "--units", "tokens", "--json"))
    flow = np.array(rollout["rollout"])
    assert np.allclose(np.triu(flow, 1), 0)  # nothing flows from a later token
    np.testing.assert_allclose(flow.sum(axis=1), 1, atol=1e-5)

    links = json.loads(_ok("find", TEXT, *model, "--from", "loan", "--to", "bank", "--json"))
    best = links["heads"][0]
    assert best["weight"] == max(h["weight"] for h in links["heads"])
    stats = json.loads(_ok("stats", TEXT, "The loan was refused.", *model, "--json"))
    assert len(stats) == 16 and all({"first", "prev"} <= set(r) for r in stats)
    assert not any({"cls", "sep", "next"} & set(r) for r in stats)
    for lang, kind in (("en", "decoder, causal"), ("pt", "decodificador, causal")):
        out = _ok("explain", TEXT, *model, "--token", "loan", "--layer", "1", "--lang", lang)
        assert kind in out

    npz, data, page, png = (tmp_path / f"x.{ext}" for ext in ("npz", "json", "html", "png"))
    for path in (npz, data, page):
        _ok("export", TEXT, *model, "--out", str(path))
    with np.load(npz) as saved:
        np.testing.assert_allclose(saved["attentions"], A, atol=1e-6)
        assert bool(saved["causal"]) and str(saved["kind"]) == "decoder, causal"
    record = json.loads(data.read_text())
    assert record["kind"] == "decoder, causal" and record["causal"] is True
    spec = _spec(page.read_text())  # the page carries the decoder's weights
    np.testing.assert_allclose(_weights(spec), A, atol=1e-4)
    _ok("show", TEXT, *model, "--out", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["show", TEXT, "--mask", "causal"],
            "--mask causal changes nothing on {m}: it is a decoder, and its own mask is already "
            "causal; leave --mask out",
        ),
        (
            ["show", TEXT, "--pair", "The loan."],
            "--pair is for encoders: {m} is a decoder (Llama), which reads one running text",
        ),
        (
            ["show", TEXT, "--measure", "alti", "--head", "1"],
            "alti is measured per layer, over all heads together, so --head does not apply",
        ),
        (
            ["explain", TEXT, "--token", "loan", "--mask", "causal"],
            "--mask causal changes nothing on {m}",
        ),
        (["stats", TEXT, "--sort", "cls"], "a decoder has no [CLS]; its first token is column"),
    ],
)
def test_what_a_decoder_lacks_is_refused_in_one_line(
    args: list[str], message: str, tiny_decoder: TinyFactory
) -> None:
    folder = str(tiny_decoder("llama"))
    code, _, err = _run(*args, "--model", folder)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert message.format(m=folder) in lines[0]


def test_labels_of_a_gpt2_style_tokenizer_carry_no_bpe_marks(tiny_decoder: TinyFactory) -> None:
    """GPT-2's ByteLevel post-processor keeps the space in the offsets (trim_offsets false):
    labels still show the word alone, and a byte-split emoji shows as itself."""
    pieces = prepare("the  bank 😀 refused", model=str(tiny_decoder("gpt2")), cache=False).pieces
    spans = [pieces.text[s:e] for s, e in pieces.offsets]
    assert any(span.startswith(" ") for span in spans)  # the offsets hold the space
    assert all(label == label.strip() and "Ġ" not in label for label in pieces.labels)
    assert {"bank", "😀"} <= {label.removeprefix("##") for label in pieces.labels}

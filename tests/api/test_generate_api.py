"""`attnviz.generate` and `attnviz generate`: what a user sees of a decoder writing.

The model-level checks against transformers are in tests/model/test_writing.py; here the
public API's result, the command line's output and files, the page's step slider in a
real browser, and the refusals.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from tests.conftest import TinyFactory

PROMPT = "John thought: the train was full, but he"
N = 6


@pytest.fixture(scope="module")
def folder(tiny_decoder: TinyFactory) -> Path:
    return tiny_decoder("llama", arch="lm")


@pytest.fixture(scope="module")
def written(folder: Path) -> attnviz.Generation:
    return attnviz.generate(PROMPT, model=folder, max_new=N)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_generation_holds_the_tokens_their_steps_and_each_steps_attention(
    folder: Path, written: attnviz.Generation
) -> None:
    from transformers import AutoModelForCausalLM

    P = written.prompt_length
    assert written.steps == list(range(P, P + N))
    assert len(written.new_ids) == N and len(written.pieces) == P + N
    assert [a.shape for a in written.step_attentions] == [(2, 8, 1, P + k) for k in range(N)]
    assert written.prompt_attention.shape == (2, 8, P, P)
    # The text is the prompt and what the new tokens decode to.
    from attnviz.text.tokenize import load_tokenizer

    tokenizer = load_tokenizer(folder)
    ids = list(written.pieces.ids)
    assert written.text.endswith(written.continuation)
    assert tokenizer.decode(ids).endswith(written.continuation)
    # The whole attention read equals the full sequence's, read at once by transformers.
    reference = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        out = reference(torch.tensor([ids[:-1]]), output_attentions=True)
    full = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)
    assert np.abs(written.attentions() - full).max() <= 1e-5
    analysis = written.analysis()
    assert analysis.attentions.shape == full.shape
    assert analysis.tokens == written.pieces.tokens[:-1]


def test_the_steps_view_has_a_row_per_new_token_and_blank_future_keys(
    written: attnviz.Generation,
) -> None:
    view = written.steps_view(layer=-1, head=3)
    P = written.prompt_length
    assert view.matrix.shape == (N, P + N - 1)
    for k in range(N):
        row = view.matrix[k]
        assert np.allclose(row[: P + k], written.step_attentions[k][1, 3, 0])
        assert np.isnan(row[P + k :]).all()
        assert abs(row[: P + k].sum() - 1) < 1e-5
    assert view.rows == written.new_tokens
    mean = written.steps_view()  # the mean of the heads
    assert np.allclose(mean.matrix[0, :P], written.step_attentions[0][1, :, 0].mean(0))


@pytest.mark.slow  # writes checkpoints or runs several generations
def test_top_k_1_is_greedy_and_a_seed_repeats_through_the_api(
    folder: Path, written: attnviz.Generation
) -> None:
    one = attnviz.generate(PROMPT, model=folder, max_new=N, sample=True, top_k=1, seed=1)
    assert one.new_ids == written.new_ids
    a = attnviz.generate(PROMPT, model=folder, max_new=N, sample=True, temperature=2.0, seed=5)
    b = attnviz.generate(PROMPT, model=folder, max_new=N, sample=True, temperature=2.0, seed=5)
    assert a.new_ids == b.new_ids and a.sampled


def test_the_lens_reads_every_layer_and_ends_in_the_models_own_choices(
    written: attnviz.Generation,
) -> None:
    lens = written.lens()
    P = written.prompt_length
    assert lens.ids.shape == (2, P + N - 1)
    # After the prompt's last piece and each new token, the last layer's guess is the
    # token the model then wrote (greedy).
    assert lens.ids[-1, P - 1 :].tolist() == list(written.new_ids)
    assert 0 <= lens.first_layer() <= 1


@pytest.mark.slow  # runs the command line several times
def test_the_command_streams_the_text_then_each_tokens_row(
    folder: Path, written: attnviz.Generation, tmp_path: Path
) -> None:
    code, out, err = _run("generate", PROMPT, "--model", str(folder), "--max-new", str(N))
    assert code == 0, err
    assert out.startswith(PROMPT)
    assert "\x1b[" not in out  # not a terminal: no colour
    assert "each new token's attention" in out
    assert f"({N} tokens)" in out

    code, out, err = _run("generate", PROMPT, "--model", str(folder), "--max-new", str(N), "--json")
    record = json.loads(out)
    assert record["steps"] == written.steps
    assert record["new_tokens"] == written.new_tokens
    for k, rows in enumerate(record["step_attentions"]):
        assert np.allclose(np.array(rows), written.step_attentions[k], atol=1e-7)

    npz = tmp_path / "steps.npz"
    _run("generate", PROMPT, "--model", str(folder), "--max-new", str(N), "--out", str(npz))
    with np.load(npz) as data:
        assert data["steps"].tolist() == written.steps
        P = int(data["prompt_length"])
        for k in range(N):
            row = data["step_attentions"][k]  # (L, H, P + N - 1), zeros after P + k
            assert np.allclose(row[:, :, : P + k], written.step_attentions[k][:, :, 0])
            assert not row[:, :, P + k :].any()

    png = tmp_path / "lens.png"
    code, out, err = _run(
        "generate", PROMPT, "--model", str(folder), "--max-new", "3", "--lens", "--out", str(png),
        "--show",
    )  # fmt: skip
    assert code == 0, err
    assert "logit lens" in out and "L1" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "generate needs a decoder"),  # the default model is an encoder
        (["--max-new", "0"], "--max-new 0 is out of range: use 1..512"),
        (["--max-new", "513"], "--max-new 513 is out of range: use 1..512"),
        (["--temperature", "2"], "pass --sample too"),
        (["--sample", "--temperature", "0"], "--temperature 0.0 is out of range"),
        (["--lens", "--out", "x.html"], "--lens writes its image"),
    ],
)
def test_bad_requests_end_in_one_line(folder: Path, args: list[str], said: str) -> None:
    model = [] if not args else ["--model", str(folder)]
    code, out, err = _run("generate", PROMPT, *model, *args)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], err
    assert out == ""


def test_past_the_models_positions_is_refused_before_loading(folder: Path) -> None:
    long = " ".join(["word"] * 20)  # 80 pieces, and 100 new: more than 128 positions
    with pytest.raises(attnviz.BadInput, match="more than the 128 positions"):
        attnviz.generate(long, model=folder, max_new=100)


def test_a_decoder_without_its_lm_head_says_so(tiny_decoder: TinyFactory) -> None:
    bare = tiny_decoder("llama")  # LlamaModel, untied: no lm_head.weight
    with pytest.raises(attnviz.AttnvizError, match="without its LM head"):
        attnviz.generate(PROMPT, model=bare, max_new=2)


# ---------------------------------------------------------------- the page, in a browser


@pytest.mark.slow
def test_the_slider_steps_through_the_tokens_and_shows_their_weights(
    written: attnviz.Generation, tmp_path: Path
) -> None:
    from tests.render.test_html import Page, _browser

    out = written.save(tmp_path / "steps.html")
    sync_playwright = _browser()
    with sync_playwright() as p:
        from tests.render.test_html import CHROMIUM

        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            view = Page(browser, out)  # waits for the view below the slider to be ready
            page = view.page
            page.wait_for_selector(".attnviz-steps[data-ready=true]")
            P = written.prompt_length
            for step in (0, 3, N - 1):
                page.locator(".av-step-slider").fill(str(step))
                assert page.eval_on_selector(".attnviz-steps", "e => e.dataset.step") == str(step)
                said = page.inner_text(".av-step-label")  # counted as a reader counts
                assert said.startswith(f"step {step + 1} of {N}: writing "), said
                shown = page.eval_on_selector_all(
                    ".av-step-token[data-weight]", "els => els.map(e => Number(e.dataset.weight))"
                )
                expected = written.step_attentions[step][-1, :, 0].mean(0)  # last layer's mean
                np.testing.assert_allclose(shown, expected, atol=1e-4)
                # The view below shows the tokens read until this step.
                tokens = page.locator(".attnviz .av-left .av-tok").count()
                assert tokens == P + step
            page.select_option(".av-step-head", "2")
            shown = page.eval_on_selector_all(
                ".av-step-token[data-weight]", "els => els.map(e => Number(e.dataset.weight))"
            )
            np.testing.assert_allclose(shown, written.step_attentions[N - 1][-1, 2, 0], atol=1e-4)
            assert view.errors == [] and view.requests == []
            view.close()
        finally:
            browser.close()


@pytest.mark.slow  # runs the command line
def test_a_hostile_prompt_is_shown_never_obeyed(folder: Path) -> None:
    prompt = "John [bold]thought\x1b[2J: the \u202etrain"
    code, out, err = _run("generate", prompt, "--model", str(folder), "--max-new", "3", "--lens")
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out and "U+202E" in out
    assert "John [bold]thought" in out  # the streamed prompt: text, not markup
    assert "│ [ " in out or "│ [" in out  # the lens's rows show the piece `[` too

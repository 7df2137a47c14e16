"""`--load FILE.npz`: the attention of a file, drawn as attnviz draws its own.

An export loaded back draws the same heatmap and ranks the same heads in `find`; any .npz
with `attentions` and `tokens` works; a hostile file (a pickle, a lying header, a zip bomb,
not a zip at all, weights that are not attention) is one line on stderr; a rectangle's
page works in a real browser.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app

EN = "The cat sat on the mat because it was tired."


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100", **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("load") / "cat.npz"
    ok("export", EN, "--out", str(path))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("show", "--layer", "3", "--head", "7"),
        ("show", "--layer", "2", "--units", "tokens", "--exclude", "special"),
        ("show", "--query", "it", "--layer", "4"),
        ("heads", "--layer", "1"),
        ("find", "--from", "it", "--to", "cat", "--top", "72"),
        ("find", "--from", "it", "--to", "cat", "--json"),
        ("rollout", "--upto", "4"),
    ],
    ids=lambda args: "-".join(args[:2]),
)
def test_an_export_loaded_back_draws_the_same(exported: Path, args: tuple[str, ...]) -> None:
    assert ok(*args, "--load", str(exported)) == ok(*args, EN)


def test_any_npz_with_attentions_and_tokens(tmp_path: Path) -> None:
    analysis = attnviz.analyse(EN)
    path = tmp_path / "plain.npz"
    np.savez(path, attentions=analysis.attentions.astype(np.float64), tokens=analysis.tokens)
    shown = ok("show", "--load", str(path), "--layer", "3", "--head", "7", "--json")
    record = json.loads(shown)
    assert record["model"] == "your attention" and record["tokens"][:3] == ["[CLS]", "the", "cat"]
    np.testing.assert_allclose(record["weights"], analysis.view(3, 7).matrix, atol=1e-6)
    page = tmp_path / "plain.html"
    ok("model", "--load", str(path), "--out", str(page))
    assert page.stat().st_size > 10_000
    again = tmp_path / "again.npz"
    ok("export", "--load", str(path), "--out", str(again))
    with np.load(again, allow_pickle=False) as data:
        np.testing.assert_allclose(data["attentions"], analysis.attentions, atol=1e-7)


# ---------------------------------------------------------------- hostile files


def _npy_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()  # the magic string, then the header


def _lying(path: Path) -> None:
    """An .npz whose attentions claim 64 × 64 × 100,000² float32s in a few bytes."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("attentions.npy", _npy_header((64, 64, 100_000, 100_000)) + b"\0" * 64)
        archive.writestr("tokens.npy", _npy_header((1,), "<U1") + "a".encode("utf-32-le"))


def _bomb(path: Path) -> None:
    """A zip bomb: 100 MB of zeros deflated to about 100 KB, an honest header."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("attentions.npy", "w", force_zip64=True) as member:
            member.write(_npy_header((1, 1, 5000, 5000)))
            block = b"\0" * 2**20
            for _ in range(100):
                member.write(block)
        archive.writestr("tokens.npy", _npy_header((1,), "<U1") + "a".encode("utf-32-le"))


def _pickle(path: Path) -> None:
    tokens = np.array(["a", {"not": "a str"}], dtype=object)
    np.savez(path, attentions=np.full((1, 1, 2, 2), 0.5, dtype=np.float32), tokens=tokens)


def _nan(path: Path) -> None:
    weights = np.full((1, 2, 2, 2), 0.5, dtype=np.float32)
    weights[0, 1, 1, 0] = np.nan
    np.savez(path, attentions=weights, tokens=np.array(["a", "b"]))


def _not_rows(path: Path) -> None:
    np.savez(path, attentions=np.full((1, 1, 2, 2), 0.7, np.float32), tokens=np.array(["a", "b"]))


def _short_tokens(path: Path) -> None:
    np.savez(path, attentions=np.full((1, 1, 3, 3), 1 / 3, np.float32), tokens=np.array(["a"]))


def _no_tokens(path: Path) -> None:
    np.savez(path, attentions=np.full((1, 1, 2, 2), 0.5, dtype=np.float32))


def _not_zip(path: Path) -> None:
    path.write_bytes(b"PK\x03\x04 this is not really a zip file" * 10)


HOSTILE = {
    "pickle": (_pickle, "holds Python objects (a pickle), which attnviz never loads"),
    "lying": (_lying, "claims 163,840,000,000,000 bytes in a member of 192"),
    "bomb": (_bomb, "holds 95 MB of arrays or more, past what attnviz reads (80 MB"),
    "nan": (_nan, "its 'attentions' array holds NaN or infinite weights"),
    "rows": (_not_rows, "row 0 of layer 0, head 0 sums to 1.4"),
    "tokens": (_short_tokens, "its 'tokens' array has 1 tokens, but the attentions have 3"),
    "missing": (_no_tokens, "has no 'tokens' array"),
    "zip": (_not_zip, "cannot read"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_file_is_one_line(tmp_path: Path, case: str) -> None:
    write, message = HOSTILE[case]
    path = tmp_path / f"{case}.npz"
    write(path)
    out = tmp_path / "never.png"
    code, stdout, stderr = run(
        "show", "--load", str(path), "--out", str(out), env={"ATTNVIZ_ATTENTION_MB": "16"}
    )
    assert code != 0 and stdout == ""
    assert stderr.startswith("Error: ") and stderr.count("\n") == 1, stderr
    assert message in stderr, stderr
    assert "Traceback" not in stderr and not out.exists()


def test_not_a_file_and_text_with_load(tmp_path: Path, exported: Path) -> None:
    code, _, stderr = run("heads", "--load", str(tmp_path))
    assert code != 0 and "is a folder, not an .npz file" in stderr
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)
    code, _, stderr = run("show", "--load", str(fifo))  # never waits for a writer
    assert code != 0 and "a pipe, a device or a socket" in stderr
    code, _, stderr = run("show", EN, "--load", str(exported))
    assert (
        code == 2 and "--load reads the tokens and the attention from the file: drop TEXT" in stderr
    )
    code, _, stderr = run(
        "find", "--load", str(exported), "--model", "x", "--from", "a", "--to", "b"
    )
    assert code == 2 and "drop --model" in stderr
    code, _, stderr = run("show", "--load", str(exported), "--measure", "alti")
    assert code != 0 and "has no model" in stderr and stderr.count("\n") == 1


# ---------------------------------------------------------------- a rectangle in a browser


@pytest.mark.slow
def test_a_rectangle_page_renders_in_chromium(tmp_path: Path) -> None:
    from tests.test_html import Page, _browser

    sync_playwright = _browser()
    weights = np.random.default_rng(5).random((2, 3, 4, 6)) ** 3
    weights /= weights.sum(axis=-1, keepdims=True)
    queries = ["<s>", "Le", "chat", "</s>"]
    keys = ["▁The", "▁cat", "▁sat", "▁do", "wn", "</s>"]
    analysis = attnviz.from_attentions(weights, queries, key_tokens=keys, model="toy-mt")
    out = tmp_path / "rectangle.html"
    analysis.save(out, "heads", layer=1)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        view = Page(chromium, out)
        page = view.page
        assert page.locator(".av-left .av-tok").count() == 4  # the queries' words
        assert page.locator(".av-right .av-tok").count() == 5  # the keys': "do" + "wn" merged
        expected = analysis.view(1)  # the head mean, in words
        page.hover('.av-left .av-tok[data-index="2"]')  # from "chat"
        np.testing.assert_allclose(view.weights("right"), expected.matrix[2], atol=1e-4)
        page.hover('.av-right .av-tok[data-index="3"]')  # to "down", from every query
        np.testing.assert_allclose(view.weights("left"), expected.matrix[:, 3], atol=1e-4)
        page.click('button[data-units="tokens"]')
        assert page.locator(".av-right .av-tok").count() == 6
        page.click('button[data-view="matrix"]')
        assert page.eval_on_selector("canvas.av-heat", "c => c.width > c.height")  # 6 wide, 4 high
        page.click('button[data-view="model"]')
        assert page.locator("canvas.av-thumb").count() == 6
        assert view.errors == [] and view.requests == []
        view.close()
        chromium.close()

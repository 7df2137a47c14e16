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


def test_a_sentence_pair_loaded_back_keeps_its_b(tmp_path: Path) -> None:
    pair = ("The bank refused the loan.", "--pair", "They were sad about it.")
    path = tmp_path / "pair.npz"
    ok("export", *pair, "--out", str(path))
    for args in [
        ("show", "--layer", "2", "--units", "tokens"),
        ("find", "--from", "they", "--to", "bank"),
    ]:
        loaded = ok(*args, "--load", str(path))
        assert loaded == ok(*args, *pair) and "B:They" in ok("show", "--load", str(path))


def test_an_unknown_word_keeps_its_text_and_stays_a_word(tmp_path: Path) -> None:
    text = "I love ☃ and snow."  # the snowman is [UNK] to the model, a word of the text
    path = tmp_path / "unk.npz"
    ok("export", text, "--out", str(path))
    args = ("show", "--units", "tokens", "--exclude", "special")
    assert ok(*args, "--load", str(path)) == ok(*args, text)
    assert "☃" in ok(*args, "--load", str(path))


def test_a_decoders_export_loads_back_causal(tmp_path: Path, tiny_decoder) -> None:  # type: ignore[no-untyped-def]
    text, folder = "the bank refused the loan", str(tiny_decoder("llama"))
    path = tmp_path / "decoder.npz"
    ok("export", text, "--model", folder, "--out", str(path))
    for args in [("show", "--layer", "1", "--head", "3", "--units", "tokens"), ("heads",)]:
        assert ok(*args, "--load", str(path)) == ok(*args, text, "--model", folder)
    loaded = json.loads(ok("show", "--load", str(path), "--json"))
    assert loaded["masked"][0][1] is True  # the first token cannot see the second
    code, _, err = run("find", "--load", str(path), "--from", "bank", "--to", "loan")
    assert code == 2 and "look only back" in err


def test_a_sliding_window_comes_back_from_the_file(tmp_path: Path, tiny_decoder) -> None:  # type: ignore[no-untyped-def]
    text = "the bank refused the loan because it was risky"
    folder = str(tiny_decoder("mistral", sliding_window=4))  # shorter than the text
    path = tmp_path / "windowed.npz"
    ok("export", text, "--model", folder, "--out", str(path))
    args = ("show", "--layer", "1", "--units", "tokens", "--json")
    loaded, computed = (
        json.loads(ok(*args, "--load", str(path))),
        json.loads(ok(*args, text, "--model", folder)),
    )
    assert loaded["masked"] == computed["masked"] and loaded["weights"] == computed["weights"]
    assert loaded["masked"][-1][0] is True  # the last token's window does not reach the first


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


def _scalar_tokens(path: Path) -> None:
    """One str, not a list of them, beside the words' labels."""
    np.savez(path, attentions=np.full((1, 1, 3, 3), 1 / 3, np.float32), tokens=np.array("abc"),
             words=np.array(["a", "b", "c"]))  # fmt: skip


def _not_causal(path: Path) -> None:
    """A 'causal' flag that the weights above the diagonal contradict."""
    np.savez(path, attentions=np.full((1, 1, 3, 3), 1 / 3, np.float32),
             tokens=np.array(["a", "b", "c"]), causal=np.array(True))  # fmt: skip


def _huge_word(path: Path) -> None:
    """A word number of 2**40 for a piece: counting words must not allocate that many."""
    np.savez(path, attentions=np.full((1, 1, 2, 2), 0.5, np.float32), tokens=np.array(["a", "b"]),
             word_of_piece=np.array([0, 2**40]), words=np.array(["a", "b"]))  # fmt: skip


def _encrypted(path: Path) -> None:
    np.savez(path, attentions=np.full((1, 1, 2, 2), 0.5, np.float32), tokens=np.array(["a", "b"]))
    data = bytearray(path.read_bytes())
    data[6] |= 1  # the first member's flags: encrypted, in its local header
    data[data.index(b"PK\x01\x02") + 8] |= 1  # and in the central directory
    path.write_bytes(bytes(data))


def _bad_header(path: Path) -> None:
    """A header that is not a Python literal (numpy reads it with ast.literal_eval)."""
    npy = io.BytesIO()
    np.save(npy, np.full((1, 1, 2, 2), 0.5, np.float32))
    with zipfile.ZipFile(path, "w") as archive:  # a true CRC: only the header is wrong
        archive.writestr(
            "attentions.npy", npy.getvalue().replace(b"'fortran_order':", b"'fortran_order'{")
        )
        archive.writestr("tokens.npy", _npy_header((1,), "<U1") + "a".encode("utf-32-le"))


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
    "scalar-tokens": (_scalar_tokens, "its 'tokens' array must be a list of str"),
    "causal": (_not_causal, "its 'causal' array is True, but some weights lie above"),
    "zip": (_not_zip, "cannot read"),
    "header": (_bad_header, "as an .npz file of arrays"),
    "encrypted": (_encrypted, "cannot read"),
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
    assert "array'" not in stderr and "pass normal" not in stderr  # no such flags
    assert "causal=None" not in stderr


def test_word_numbers_past_the_pieces_are_ignored_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "huge-word.npz"
    _huge_word(path)
    analysis = attnviz.load_attentions(path)  # no 2**40-entry count: the words are dropped
    assert [w.label for w in analysis.words] == ["a", "b"]


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
    from tests.render.test_html import Page, _browser

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


# ---------------------------------------------------------------- fuzz


@pytest.mark.slow  # 80 files read
def test_a_mangled_export_loads_or_is_one_line(tmp_path: Path, exported: Path) -> None:
    """Bytes of a real export overwritten at random: a result, or one AttnvizError line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from attnviz.errors import AttnvizError
    from attnviz.loading import load_attentions

    original = exported.read_bytes()
    headers = [i for i in range(len(original)) if original.startswith(b"\x93NUMPY", i)]
    near_a_header = st.sampled_from(headers).flatmap(lambda h: st.integers(h, h + 127))
    where = st.one_of(st.integers(0, len(original) - 1), near_a_header)  # headers: half the time

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        edits=st.lists(st.tuples(where, st.binary(min_size=1, max_size=8)), min_size=1, max_size=4)
    )
    def check(edits: list[tuple[int, bytes]]) -> None:
        data = bytearray(original)
        for at, new in edits:
            data[at : at + len(new)] = new
        path = tmp_path / "mangled.npz"
        path.write_bytes(bytes(data[: len(original)]))
        try:
            analysis = load_attentions(path)
        except AttnvizError as exc:
            assert "\n" not in str(exc)
            return
        analysis.view()  # what loaded draws

    check()


def test_random_arrays_give_an_analysis_or_one_line() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from attnviz.errors import BadInput

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        shape=st.lists(st.integers(0, 5), min_size=1, max_size=6),
        dtype=st.sampled_from(["float16", "float32", "float64", "int32", "bool", "complex64"]),
        fill=st.sampled_from(["softmax", "random", "nan", "negative", "zeros"]),
        count=st.integers(0, 6),
        keys=st.none() | st.integers(0, 6),
        normalised=st.booleans(),
    )
    def check(
        shape: list[int], dtype: str, fill: str, count: int, keys: int | None, normalised: bool
    ) -> None:
        rng = np.random.default_rng(0)
        values = rng.random(shape)
        if fill == "softmax" and values.ndim:
            values = values / np.maximum(values.sum(axis=-1, keepdims=True), 1e-9)
        elif fill == "nan" and values.size:
            values.flat[0] = np.nan
        elif fill == "negative" and values.size:
            values.flat[-1] = -1
        elif fill == "zeros":
            values = np.zeros(shape)
        with np.errstate(invalid="ignore"):  # NaN cast to an int: what a careless caller gives
            array = values.astype(dtype)
        key_tokens = None if keys is None else [f"k{i}" for i in range(keys)]
        try:
            analysis = attnviz.from_attentions(
                array, [f"t{i}" for i in range(count)], key_tokens=key_tokens, normalised=normalised
            )
        except BadInput as exc:
            assert "\n" not in str(exc)
            return
        analysis.view()
        analysis.heads()

    check()


def test_a_loaded_export_keeps_what_its_title_said(tmp_path: Path) -> None:
    """An export of an encoder-decoder's cross stack, computed by transformers, is titled as
    the run that wrote it was: loaded back, a cross stack is not shown as a plain model's."""
    path = tmp_path / "cross.npz"
    np.savez(path, attentions=np.full((1, 1, 2, 3), 1 / 3, np.float32),
             tokens=np.array(["<pad>", "O"]), key_tokens=np.array(["The", "cat", "</s>"]),
             model=np.array("./tiny-t5"), engine=np.array("transformers"),
             stack=np.array("cross"), generated=np.array(True))  # fmt: skip
    analysis = attnviz.load_attentions(path)
    assert analysis.engine == "transformers"  # the file's, in titles and in files written
    assert analysis.title == (
        "./tiny-t5 · cross-attention (target × source) · target generated by the model · "
        "transformers engine"
    )
    assert analysis.to_dict()["engine"] == "transformers"


def test_files_say_which_engine_computed_the_weights(tmp_path: Path, exported: Path) -> None:
    """attnviz's own export comes back as attnviz's engine's; arrays a caller gave, or a file
    another tool wrote, are "given", never claimed as computed by attnviz, and unmarked."""
    assert attnviz.load_attentions(exported).to_dict()["engine"] == "attnviz"
    weights = np.full((1, 1, 2, 2), 0.5, np.float32)
    given = attnviz.from_attentions(weights, ["a", "b"], model="mine")
    assert given.engine == "given" and given.title == "mine"
    given.save(tmp_path / "given.npz")
    with np.load(tmp_path / "given.npz") as saved:
        assert str(saved["engine"]) == "given"
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, attentions=weights, tokens=np.array(["a", "b"]))
    assert attnviz.load_attentions(foreign).engine == "given"

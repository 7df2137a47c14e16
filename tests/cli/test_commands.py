"""Every command through Typer's CliRunner, and every bad input it must refuse cleanly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz import analyse
from attnviz.cli import app
from attnviz.measures.select import merge_words, select
from tests.conftest import PT_SENTENCE, TinyFactory

runner = CliRunner()
SHORT = "Vi João e Maria ontem. Eles estavam juntos."


def run(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env={"COLUMNS": "100", **(env or {})})


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = run(*args, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


@pytest.fixture(scope="module")
def short_analysis():
    return analyse(SHORT)


def test_help_lists_every_command_with_an_example() -> None:
    out = ok("--help")
    for command in ("show", "heads", "tokens", "info", "export"):
        assert command in out
        assert "Example" in ok(command, "--help")


def test_version() -> None:
    assert ok("--version").strip() == "attnviz 0.1.0"


def test_show_without_text_uses_the_first_sample_sentence() -> None:
    """The default sentence is English, as the default model is: no note about the fit."""
    result = runner.invoke(app, ["show"])
    assert result.exit_code == 0 and result.stderr == ""
    out = result.stdout
    assert "all-MiniLM-L6-v2 · layer 5 · mean of 12 heads" in out
    for word in ("John", "thought", "seat", "[CLS]", "[SEP]"):
        assert word in out


def test_show_json_in_words_is_the_models_attention_merged(short_analysis) -> None:
    record = json.loads(ok("show", SHORT, "--layer", "-2", "--head", "3", "--json"))
    assert record["model"] == "all-MiniLM-L6-v2"
    assert record["layer"] == 4 and record["head"] == 3
    words = short_analysis.pieces.words()
    assert record["tokens"] == [w.label for w in words]
    expected = merge_words(select(short_analysis.attentions, 4, 3), [w.pieces for w in words])
    np.testing.assert_allclose(np.array(record["weights"]), expected, atol=1e-7)
    np.testing.assert_allclose(np.array(record["weights"]).sum(1), 1.0, atol=1e-5)


def test_show_json_in_tokens_with_head_mean(short_analysis) -> None:
    record = json.loads(ok("show", SHORT, "--units", "tokens", "--json"))
    assert record["head"] is None and record["layer"] == 5
    assert record["tokens"] == short_analysis.pieces.labels
    expected = short_analysis.attentions[5].mean(0)
    np.testing.assert_allclose(np.array(record["weights"]), expected, atol=1e-7)


def test_show_title_names_layer_and_head() -> None:
    out = ok("show", SHORT, "--layer", "2", "--head", "7")
    assert "layer 2 · head 7" in out and "Eles" in out


def test_heads_shows_every_head_of_the_layer() -> None:
    out = ok("heads", SHORT, "--layer", "3")
    assert "layer 3 · all 12 heads" in out
    for h in range(12):
        assert f"head {h}" in out


def test_tokens_lists_pieces_ids_words_and_spans() -> None:
    out = ok("tokens", PT_SENTENCE)
    assert "##ou" in out and "2 pensou" in out and "5–9" in out and "16304" in out


def test_info_describes_the_default_model() -> None:
    out = ok("info")
    for fact in ("BERT", "layers", "6", "12", "384", "32", "30522", "22,565,376", "embedded"):
        assert fact in out


def test_export_npz_holds_raw_pieces(tmp_path: Path, short_analysis) -> None:
    out = tmp_path / "a.npz"
    ok("export", SHORT, "--out", str(out))  # every layer over pieces: --layer, --units refused
    data = np.load(out, allow_pickle=False)
    assert data["attentions"].dtype == np.float32 and data["input_ids"].dtype == np.int64
    assert data["attentions"].shape == short_analysis.attentions.shape
    np.testing.assert_array_equal(data["attentions"], short_analysis.attentions)
    assert data["tokens"].dtype.kind == "U" and data["tokens"][0] == "[CLS]"
    assert list(data["input_ids"]) == short_analysis.pieces.ids


def test_export_json_holds_the_same(tmp_path: Path, short_analysis) -> None:
    out = tmp_path / "a.json"
    ok("export", SHORT, "-o", str(out))
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["tokens"] == short_analysis.pieces.tokens
    np.testing.assert_allclose(np.array(record["attentions"]), short_analysis.attentions)


@pytest.mark.slow  # 6 image files
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
@pytest.mark.parametrize("view", ["show", "heads"])
def test_export_images_open(tmp_path: Path, suffix: str, view: str) -> None:
    out = tmp_path / f"slide{suffix}"
    ok("export", SHORT, "--out", str(out), "--view", view, "--dpi", "60")
    data = out.read_bytes()
    if suffix == ".png":
        from PIL import Image

        with Image.open(out) as image:
            assert image.size[0] > 100 and image.size[1] > 100
    elif suffix == ".svg":
        assert b"<svg" in data[:2000] and b"Eles" in data
    else:
        assert data.startswith(b"%PDF")
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary file left


@pytest.mark.slow  # image files
def test_show_and_heads_write_images_instead_and_both_with_show(tmp_path: Path) -> None:
    from PIL import Image

    for command in ("show", "heads"):
        out = tmp_path / f"{command}.png"
        assert ok(command, SHORT, "--out", str(out), "--dpi", "50", "--theme", "dark") == ""
        terminal = ok(command, SHORT, "--out", str(out), "--dpi", "50", "--show")
        assert "Maria" in terminal
        with Image.open(out) as image:
            assert image.format == "PNG"


@pytest.mark.slow  # 512 pieces
def test_truncate_keeps_the_first_positions() -> None:
    text = "train " * 600
    result = run("show", text, "--truncate", "--units", "tokens", "--json")
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["tokens"]) == 512
    assert "dropped the last 90 pieces" in result.stderr


def test_model_option_and_env_var_choose_a_local_checkpoint(tiny_bert: TinyFactory) -> None:
    folder = str(tiny_bert())
    assert re.search(r"heads per layer +4\s", ok("info", "--model", folder))
    record = json.loads(ok("show", SHORT, "--json", env={"ATTNVIZ_MODEL": folder}))
    assert record["model"] == folder and record["layer"] == 1


# --- bad input ------------------------------------------------------------------------------


def _broken_model(tiny_bert: TinyFactory, tmp_path: Path, how: str) -> str:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_bert(), folder)
    if how == "no-config":
        (folder / "config.json").unlink()
    elif how == "no-weights":
        (folder / "model.safetensors").unlink()
    elif how == "corrupt":
        (folder / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    elif how == "no-tokenizer":
        for name in ("tokenizer.json", "vocab.txt"):
            (folder / name).unlink()
    elif how == "small-vocab":
        shutil.rmtree(folder)
        shutil.copytree(tiny_bert(vocab_size=1000), folder)
    elif how == "t5":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    elif how == "regex":  # a catastrophic pre-tokenizer regex: the Rust tokenizer panics
        tokenizer = json.loads((folder / "tokenizer.json").read_text())
        split = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated"}
        tokenizer["pre_tokenizer"] = {**split, "invert": False}
        (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    elif how == "no-unk":  # a vocab.txt without [UNK], and no tokenizer.json
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            (folder / name).unlink()
        vocab = (folder / "vocab.txt").read_text().splitlines()
        (folder / "vocab.txt").write_text("\n".join(v for v in vocab if v != "[UNK]") + "\n")
    elif how == "deep-config":  # nested past Python's recursion limit
        text = (folder / "config.json").read_text().rstrip().rstrip("}")
        (folder / "config.json").write_text(text + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif how == "huge-act":  # a 5 MB value must not be echoed whole
        config = json.loads((folder / "config.json").read_text())
        config["hidden_act"] = "x" * 5_000_000
        (folder / "config.json").write_text(json.dumps(config))
    elif how == "huge-config":
        with (folder / "config.json").open("a") as handle:
            handle.write(" " * 9 * 2**20)
    return str(folder)


BAD = [
    # (args, exit code, words the message must contain)
    (["show", ""], 2, "text is empty"),
    (["show", "   "], 2, "text is empty"),
    (["heads", "train " * 600], 2, "at most 512: shorten it or pass --truncate"),
    (["export", "", "--out", "{tmp}/x.npz"], 2, "the text is empty"),
    (["show", SHORT, "--layer", "6"], 2, "use 0..5"),
    (["show", SHORT, "--layer", "-7"], 2, "layer -7 is out of range"),
    (["show", SHORT, "--head", "12"], 2, "12 heads, use 0..11"),
    (["export", SHORT, "--out", "{tmp}/x.png", "--head", "-13"], 2, "head -13"),
    (["export", SHORT, "--out", "{tmp}/x.npz", "--layer", "0"], 2, "leave out --layer"),
    (["heads", SHORT, "--layer", "99"], 2, "6 layers"),
    (["show", SHORT, "--model", "{tmp}/missing"], 1, "does not exist"),
    (["info", "--model", "nobody/attnviz-no-such-model"], 1, "HF_HUB_OFFLINE"),
    (["show", SHORT, "--model", "@no-config"], 1, "no config.json"),
    (["show", SHORT, "--model", "@no-weights"], 1, "no model.safetensors"),
    (["show", SHORT, "--model", "@corrupt"], 1, "cannot read weights"),
    (["info", "--model", "@t5"], 1, "encoder-decoder model"),
    (
        ["export", SHORT, "--out", "{tmp}/x.jpg"],
        2,
        "use one of .png, .svg, .pdf, .html, .htm, .npz, .json",
    ),
    (["show", SHORT, "--out", "{tmp}/x.npz"], 2, "use one of .png, .svg, .pdf"),
    (["show", SHORT, "--out", "{tmp}/no/such/x.png"], 1, "does not exist"),
    (["export", SHORT, "--out", "{tmp}/.."], 2, "unknown extension"),
    (["export", SHORT, "--out", "/proc/attnviz-test.npz"], 1, "cannot write"),
    (["show", SHORT, "--out", "{tmp}/x.png", "--cmap", "viridsi"], 2, "viridis"),
    (["heads", SHORT, "--out", "{tmp}/x.png", "--dpi", "0"], 2, "--dpi 0 is out of range"),
    (["export", SHORT, "--out", "{tmp}/x.pdf", "--dpi", "-5"], 2, "use 10..1200"),
    (["export", SHORT, "--out", "{tmp}/x.svg", "--dpi", "100000"], 2, "use 10..1200"),
    (["show", SHORT, "--cmap", "magma"], 2, "--cmap only applies to images: add --out"),
    (["export", SHORT, "--out", "{tmp}/x.npz", "--cmap", "nope"], 2, ".npz is not an image"),
    (["export", SHORT, "--out", "{tmp}/x.json", "--dpi", "5"], 2, "--dpi only applies"),
    (["show", SHORT, "--out", "/etc/passwd/x.png"], 1, "is a file, not a folder"),
    (["heads", SHORT, "--dpi", "300", "--annotate"], 2, "--dpi, --annotate only apply"),
    (["show", "\u200b\u200b"], 2, "nothing the tokenizer keeps"),
    (["tokens", "\x01\x02"], 2, "nothing the tokenizer keeps"),
    (["show", "caf\udce9"], 2, "not valid UTF-8"),
    (["show", SHORT, "--model", ""], 2, "--model is empty"),
    (["show", SHORT, "--model", "@no-tokenizer"], 1, "no tokenizer.json or vocab.txt"),
    (["show", SHORT, "--model", "@small-vocab"], 1, "do not belong together"),
    # usage errors are one line too
    (["show", SHORT, "--lyer", "2"], 2, "No such option: --lyer"),
    (["show", SHORT, "--layer", "two"], 2, "'two' is not a valid int"),
    (["show", SHORT, "--mask", "future"], 2, "Invalid value for '--mask'"),
    (["show", SHORT, "--dtype", "int8"], 2, "Invalid value for '--dtype'"),
    (["export", SHORT], 2, "Missing option '--out'"),
    (["draw", SHORT], 2, "No such command 'draw'"),
    (["cache", "empty"], 2, "No such command 'empty'"),
    # the newer commands and options
    (["show", SHORT, "--pair", ""], 2, "--pair is empty"),
    (["heads", SHORT, "--heads", "0,,1"], 2, "not a list of head numbers"),
    (["model", SHORT, "--heads", "3,3"], 2, "names head 3 twice"),
    (["model", SHORT, "--out", "{tmp}/m.gif"], 2, "unknown extension .gif"),
    (["explain", SHORT, "--token", "Pedro"], 2, "Pedro"),
    (["explain", SHORT, "--index", "40"], 2, "40"),
    (["explain", SHORT], 2, "pass --token WORD or --index N"),
    (["rollout", SHORT, "--upto", "-9"], 2, "--upto -9 is out of range"),
    (["rollout", SHORT, "--top", "0"], 2, "Invalid value for '--top'"),
    (["stats", "--file", "{tmp}/none.txt"], 2, "no such file"),
    (["stats", "--file", "{tmp}"], 2, "it is a folder"),
    (["stats", "--threads", "0"], 2, "Invalid value for '--threads'"),
    (["stats", "--out", "{tmp}/s.npz"], 2, "unknown extension"),
    (["stats", SHORT, "--model", "@t5"], 1, "encoder-decoder model"),
    # hostile model folders (issue 14): a tokenizer that panics, configs that overflow
    (["tokens", "a" * 40 + "b", "--model", "@regex"], 1, "the model's tokenizer failed"),
    (["tokens", "hello ☃ 銀行", "--model", "@no-unk"], 1, "Missing [UNK] token"),
    (["info", "--model", "@deep-config"], 1, "nested too deeply"),
    (["info", "--model", "@huge-act"], 1, "hidden_act='xxxxx"),
    (["info", "--model", "@huge-config"], 1, "a config.json is a few kilobytes"),
    # numeric options out of range (attnviz.limits)
    (["stats", SHORT, "--threads", "100000"], 2, "Invalid value for '--threads'"),
    (["stats", SHORT, "--threads", "1000000000000"], 2, "Invalid value for '--threads'"),
    (["stats", SHORT, "--batch-size", "10000000"], 2, "Invalid value for '--batch-size'"),
    (["stats", SHORT, "--top", "10000000000"], 2, "Invalid value for '--top'"),
    (["rollout", SHORT, "--top", "10000000000"], 2, "Invalid value for '--top'"),
]


@pytest.mark.parametrize(("args", "code", "words"), BAD, ids=lambda v: str(v)[:40])
def test_bad_input_gets_one_line_and_no_file(
    args: list[str], code: int, words: str, tmp_path: Path, tiny_bert: TinyFactory
) -> None:
    args = [
        _broken_model(tiny_bert, tmp_path, a[1:]) if a.startswith("@") else a.format(tmp=tmp_path)
        for a in args
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message, message
    assert words in message and len(message) < 600
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


@pytest.mark.parametrize("command", ["show", "heads", "export"])
def test_output_path_that_is_a_folder(command: str, tmp_path: Path) -> None:
    (tmp_path / "slide.png").mkdir()
    result = run(command, SHORT, "--out", str(tmp_path / "slide.png"))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot write") and "it is a folder" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["slide.png"]


def test_env_var_model_is_named_in_its_error() -> None:
    result = run("show", SHORT, env={"ATTNVIZ_MODEL": "/no/such/model"})
    assert result.exit_code == 1 and "(ATTNVIZ_MODEL) does not exist" in result.stderr


def test_model_path_with_brackets_is_shown_literally(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "m[red]x"
    shutil.copytree(tiny_bert(), folder)
    assert "m[red]x" in ok("info", "--model", str(folder))


def test_malformed_option_gets_typers_usage_error() -> None:
    result = run("show", SHORT, "--units", "letters")
    assert result.exit_code == 2 and "letters" in result.stderr
    result = run("export", SHORT)
    assert result.exit_code == 2 and "--out" in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run("--debug", "show", SHORT, "--layer", "9")
    assert result.exit_code != 0 and "out of range" in str(result.exception)
    assert not isinstance(result.exception, SystemExit)
    result = run("show", SHORT, "--layer", "9", "--debug")
    assert not isinstance(result.exception, SystemExit)


# --- as a real process: stdin, python -m, import cost ---------------------------------------


def _process(*args: str, stdin: str | None = None, devnull: bool = False):
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "attnviz", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if devnull else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow  # subprocess
def test_text_from_a_pipe_and_default_from_dev_null() -> None:
    piped = _process("show", "--json", "--units", "tokens", stdin="The bank refused.\n")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["tokens"] == ["[CLS]", "The", "bank", "refused", ".", "[SEP]"]
    default = _process("tokens", devnull=True)
    assert default.returncode == 0 and "seat" in default.stdout  # the default, English sentence


@pytest.mark.slow  # subprocesses
def test_closed_pipe_stops_quietly_and_full_disk_is_one_line() -> None:
    long = "train " * 400
    command = f"{sys.executable} -m attnviz show '{long}' --units tokens --json"
    piped = subprocess.run(
        f"{command} | head -c 20", shell=True, capture_output=True, text=True, timeout=120
    )
    assert piped.stdout.startswith('{"model"') and piped.stderr == ""
    full = subprocess.run(
        f"{command} > /dev/full", shell=True, capture_output=True, text=True, timeout=120
    )
    assert full.returncode == 1
    assert full.stderr.strip() == "Error: No space left on device: check free space and permissions"


@pytest.mark.slow  # subprocess
def test_stdin_that_is_not_utf8_is_an_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "attnviz", "show"], input=b"caf\xe9\n", capture_output=True
    )
    assert result.returncode == 2
    assert result.stderr.decode().startswith("Error: standard input is not valid UTF-8")


@pytest.mark.slow  # subprocesses
def test_help_into_a_full_disk_is_one_line() -> None:
    for args in ("--help", "--version"):
        result = subprocess.run(
            f"{sys.executable} -m attnviz {args} > /dev/full",
            shell=True,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 1
        assert (
            result.stderr.strip()
            == "Error: No space left on device: check free space and permissions"
        )


@pytest.mark.slow  # subprocess
def test_empty_stdin_is_an_error() -> None:
    result = _process("show", stdin="  \n")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "Error: standard input is empty: pipe in some text, or pass it as an argument"
    )


def _heavy_modules_after(runs: list[list[str]], modules: tuple[str, ...]) -> str:
    """Run commands in a fresh interpreter; the heavy modules they imported, as printed."""
    code = (
        "import sys\n"
        "from attnviz.cli import app\n"
        f"for args in {runs!r}:\n"
        "    try:\n"
        "        app(args)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # subprocess
def test_help_and_tokens_import_no_heavy_module() -> None:
    runs = [["--help"], ["tokens", "ok"], ["info"]]
    assert _heavy_modules_after(runs, ("torch", "matplotlib", "transformers")) == "[]"


@pytest.mark.slow  # subprocess
def test_show_does_not_import_matplotlib_or_transformers() -> None:
    assert _heavy_modules_after([["show", "ok"]], ("matplotlib", "transformers")) == "[]"


@pytest.mark.slow  # 4 commands at 3 widths
@pytest.mark.parametrize("columns", ["5", "12", "20"])
def test_a_very_narrow_terminal_still_works(columns: str) -> None:
    """COLUMNS=5 is a degraded environment, not bad input: the smallest output that fits."""
    for args in (["show", SHORT], ["heads", SHORT], ["stats", SHORT], ["rollout", SHORT]):
        result = runner.invoke(app, args, env={"COLUMNS": columns})
        assert result.exit_code == 0, (args, result.stderr)
        assert "Traceback" not in result.output


@pytest.mark.parametrize("columns", ["0", "-3", "abc", "99999999999"])
def test_an_unusable_terminal_width_draws_at_80_columns(columns: str) -> None:
    """COLUMNS=0 made rich draw at width 0: every view printed nothing and exited 0."""
    for args in (["show", SHORT], ["rollout", SHORT, "--top", "1"]):
        result = runner.invoke(app, args, env={"COLUMNS": columns})
        assert result.exit_code == 0, (args, result.stderr)
        lines = result.stdout.splitlines()
        assert "Maria" in result.stdout and max(len(line) for line in lines) <= 80


def test_an_empty_corpus_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n", encoding="utf-8")
    result = run("stats", "--file", str(empty))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {empty} has no sentences: write one sentence a line"


@pytest.mark.slow  # subprocess
def test_heavy_imports_leave_the_garbage_collector_on() -> None:
    """torch and matplotlib are imported with the collector paused, which must come back on."""
    code = (
        "import gc\n"
        "from attnviz.cli import app\n"
        "try:\n"
        "    app(['show', 'ok', '--no-cache', '--out', {out!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "import torch, matplotlib\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 100_000)\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "x.png")
        result = subprocess.run(
            [sys.executable, "-c", code.format(out=out)], capture_output=True, text=True
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["True", "True"]

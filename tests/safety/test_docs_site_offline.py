"""The documentation site (`make docs`) from an attacker's side (issue 34): a page is
Markdown, and Markdown passes raw HTML through, so a page could load a script, a style
sheet, an image or a frame from the web when the site is opened. tests/house/test_docs.py
checks the home page; this checks every page the build writes: nothing is loaded from
elsewhere (a link to click, `<a href>`, is not a load)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A tag that makes the browser fetch: its src, href (link), srcset, data (object) or poster.
LOADS = re.compile(
    r"<(script|link|img|iframe|source|video|audio|embed|object|track)\b[^>]*?"
    r"\b(src|href|srcset|data|poster)\s*=\s*[\"']?\s*(https?:)?//",
    re.IGNORECASE,
)
CSS_IMPORT = re.compile(r"@import\s+(url\()?[\"']?(https?:)?//|url\([\"']?(https?:)?//", re.I)


@pytest.mark.slow  # mkdocs builds the whole site (about 6 s)
def test_no_page_of_the_site_loads_anything_from_the_web(tmp_path: Path) -> None:
    pytest.importorskip("material")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    site = tmp_path / "site"
    build(load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(site)))
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 20  # every page of the nav
    loading = {
        str(page.relative_to(site)): found[0]
        for page in pages
        if (found := LOADS.findall(page.read_text(encoding="utf-8")))
    }
    assert loading == {}
    sheets = [p for p in site.rglob("*.css") if CSS_IMPORT.search(p.read_text(encoding="utf-8"))]
    assert sheets == []

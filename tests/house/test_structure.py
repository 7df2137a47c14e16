"""The house in floors: imports point down, no loops, no private names across modules.

Every import counts: at module level, inside functions and under TYPE_CHECKING. The floors,
bottom to top, are the ground (errors, limits, reading, perf, i18n, lexicon, cache, output,
version), text/, model/, render/, measures/, the face (the package's `__init__`, api,
analysis, prepared, pipeline) and cli/. An arrow from a module to a higher floor is an arrow
running back up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "attnviz"

FLOORS = {  # a folder or a top-level module -> its floor, bottom (0) to top
    "errors": 0,
    "limits": 0,
    "perf": 0,
    "i18n": 0,
    "language": 0,
    "lexicon": 0,
    "cache": 0,
    "output": 0,
    "version": 0,
    "reading": 0,
    "extras": 0,
    "text": 1,
    "model": 2,
    "render": 3,
    "measures": 4,
    "explore": 4,  # the terminal explorer: reads an analysis through a protocol
    "": 5,  # the package's __init__
    "api": 5,
    "analysis": 5,
    "ablation": 5,
    "encdec": 5,
    "generation": 5,
    "prepared": 5,
    "pipeline": 5,
    "inputs": 5,
    "arrays": 5,
    "loading": 5,
    "arguments": 5,
    "corpus": 5,
    "roles": 5,
    "sharding": 5,
    "partials": 5,
    "cluster": 5,
    "long_input": 5,
    "details": 5,
    "cli": 6,
    "__main__": 7,
}
MAX_BACK_ARROWS = 3


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports() -> dict[str, dict[str, set[str]]]:
    """module -> {imported module -> the names it takes from it ("" for the module itself)}."""
    files = modules()
    edges: dict[str, dict[str, set[str]]] = {m: {} for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[tuple[str, str]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, "") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append((sub, "") if sub in files else (base, a.name))
            for target, name in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].setdefault(target, set()).add(name)
    return edges


def floor(module: str) -> int:
    parts = module.split(".")[1:]
    key = parts[0] if parts else ""
    assert key in FLOORS, f"{module} is on no floor: add it to FLOORS"
    return FLOORS[key]


def loops(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_loops() -> None:
    edges = {m: {t: n for t, n in e.items() if t != "attnviz"} for m, e in imports().items()}
    assert loops(edges) == []


def test_imports_point_down() -> None:
    back = sorted(f"{a} -> {b}" for a, e in imports().items() for b in e if floor(b) > floor(a))
    assert len(back) <= MAX_BACK_ARROWS, "\n".join(back)


def test_no_private_names_across_modules() -> None:
    private = sorted(
        f"{a} takes {name} from {b}"
        for a, e in imports().items()
        for b, names in e.items()
        for name in names
        if name.startswith("_") and not name.startswith("__")
    )
    assert private == []


def test_every_module_is_on_a_floor() -> None:
    for module in modules():
        floor(module)


@pytest.mark.parametrize("folder", ["text", "model", "measures", "render"])
def test_lower_floors_do_not_import_the_face_or_the_command_line(folder: str) -> None:
    for module, targets in imports().items():
        if module.startswith(f"attnviz.{folder}"):
            up = [t for t in targets if floor(t) >= FLOORS["api"]]
            assert up == [], f"{module} imports {up}"


def test_the_readme_draws_every_module_on_its_floor() -> None:
    """README's "How it works" names every module, under the folder (floor) that holds it."""
    readme = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How it works", 1)[1].split("\n## ", 1)[0]
    tree = section.split("attnviz/\n", 1)[1].split("```", 1)[0]
    floors: dict[str, str] = {}  # folder -> its lines in the drawing
    current = ""
    for line in tree.splitlines():
        head = line.strip().split(" ", 1)[0]
        if line.startswith("  ") and not line.startswith("   ") and head.endswith("/"):
            current = head.rstrip("/")
        elif line.startswith("  ") and not line.startswith("   "):
            current = ""
        floors[current] = floors.get(current, "") + line + "\n"
    for path in sorted(ROOT.rglob("*.py")):
        folder = path.parent.name if path.parent != ROOT else ""
        if path.name in ("__init__.py", "__main__.py"):
            continue
        assert path.name in floors.get(folder, ""), f"README's drawing lacks {folder}/{path.name}"

"""The tests mirror the package: each test file sits in the folder of what it tests."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "attnviz"
# A folder of tests -> what it tests: a folder of the package, or one of three that are not.
OTHERS = {
    "api": "the face: attnviz/__init__.py, api.py and the modules beside it",
    "safety": "hostile files, fuzzing, running out of memory, wrong-typed calls",
    "house": "the package as a whole: floors, start-up, packaging, the README",
}


def test_no_test_file_outside_a_folder() -> None:
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert loose == [], f"put each of {loose} in the folder of what it tests"


def test_every_folder_of_tests_is_a_floor_of_the_package_or_named_here() -> None:
    folders = {p.parent.name for p in TESTS.rglob("test_*.py")}
    floors = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= floors | set(OTHERS), folders - floors - set(OTHERS)


def test_test_file_names_are_unique() -> None:
    # pytest imports each test file by its name alone (no __init__.py in tests/)
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)

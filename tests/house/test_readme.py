"""The README is a newcomer's five minutes: short, its links and pictures there, its numbers the
model's. Its examples run in tests/house/test_docs.py, with every page's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = [
    "show",
    "heads",
    "model",
    "find",
    "distance",
    "explain",
    "rollout",
    "compare-measures",
    "stats",
    "tokens",
    "info",
    "generate",
    "export",
    "cache",
]


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 300
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "make install" in setup and "make test" in setup  # CI reads `make test`


def test_readme_links_every_command_to_its_page_and_every_link_is_there() -> None:
    links = re.findall(r"\]\((docs/[^)#]*)(?:#[^)]*)?\)", README)
    for command in COMMANDS:
        assert f"[`{command}`](docs/{command}.md)" in README, command
    for link in links:
        assert (ROOT / link).exists(), link


def test_readme_picture_exists_and_is_small() -> None:
    images = re.findall(r"!\[[^]]*\]\((docs/[^)]+\.png)\)", README)
    assert images == ["docs/john-layer3-head7.png"]
    for name in images:
        image = ROOT / name
        assert image.is_file() and image.stat().st_size < 200_000, name


def test_every_docs_picture_is_small_and_used() -> None:
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    for image in (ROOT / "docs").glob("*.png"):
        assert image.stat().st_size < 200_000, image.name
        assert f"]({image.name})" in pages, f"no page shows {image.name}"


@pytest.mark.slow  # the default model over the shipped English pronoun set
def test_readme_numbers_are_the_models() -> None:
    """The headline's weight, and what layer 3, head 7 and the best head score over the shipped
    English pronoun set, are what the default model gives."""
    import attnviz

    flat = " ".join(README.split())
    match = re.search(r"`he` puts ([\d.]+) of its attention on `John`", flat)
    assert match
    result = CliRunner().invoke(app, ["show", "--layer", "3", "--head", "7", "--json"])
    record = json.loads(result.stdout)
    row = record["weights"][record["tokens"].index("he")]
    assert f"{row[record['tokens'].index('John')]:.2f}" == match.group(1)
    assert "layer 3, head 7, where `he` puts 0.70 on `John`" in flat
    assert "28 pieces" in flat  # the Portuguese sentence on the default model
    found = attnviz.head_roles("sample_sentences/pronouns-en.jsonl").to_dict()
    (h37,) = [h for h in found["heads"] if (h["layer"], h["head"]) == (3, 7)]
    said = f"antecedent in {h37['accuracy']:.2f} of them (95% interval {h37['low']:.2f}–"
    assert said + f"{h37['high']:.2f})" in flat
    best, base, held = found["heads"][0], found["baselines"], found["held_out"]
    assert (held["layer"], held["head"]) == (best["layer"], best["head"])
    line = (
        f"| all-MiniLM-L6-v2 | pronouns-en ({found['examples']}) | L{best['layer']} "
        f"H{best['head']} | {best['accuracy']:.2f} ({best['low']:.2f}–{best['high']:.2f}) | "
        f"{held['accuracy']:.2f} | {base['nearest']:.2f} / {base['first']:.2f} / "
        f"{base['random']:.2f} |"
    )
    assert line in README


def test_readme_keeps_the_floors() -> None:
    """tests/house/test_structure.py reads the drawing of the floors under "How it works"."""
    section = README.split("## How it works", 1)[1]
    assert "attnviz/\n" in section and "families/" in section

"""A wheel install carries what attnviz needs at run time, sample sentences included."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel with pip, runs it in a subprocess

ROOT = Path(__file__).parents[2]


def test_wheel_carries_the_sample_sentences(tmp_path: Path) -> None:
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("attnviz-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {
            "attnviz/sample_sentences/pt.txt",
            "attnviz/render/terminal.py",
            "attnviz/render/web/common.js",
        } <= names
        # The licence the metadata names travels with the wheel.
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: MIT" in archive.read(metadata).decode()
        archive.extractall(tmp_path / "site")
    # The installed package, away from the checkout, finds its default sentence.
    code = (
        "import attnviz.text.samples as s; print(s.__file__); print(s.sample_dir()); "
        "print(s.default_sentence())"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site")},
    )
    assert run.returncode == 0, run.stderr
    first = (ROOT / "sample_sentences" / "en.txt").read_text(encoding="utf-8").splitlines()[0]
    module, folder, sentence = run.stdout.strip().splitlines()
    assert module.startswith(str(tmp_path / "site"))
    assert folder == str(tmp_path / "site" / "attnviz" / "sample_sentences")
    assert sentence == first

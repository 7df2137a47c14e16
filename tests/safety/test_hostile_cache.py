"""The attention cache in a hostile folder: one class of attack per test (issue 24).

- a folder owned by someone else, or writable by its group or by others: not used
  (one warning), `cache clear` refuses in one line and removes nothing, unless
  ATTNVIZ_CACHE_SHARED=1 says so on purpose;
- planted links (an entry, the secret, the tokenizers folder, the folder itself): never
  followed, and what they point to survives reads, writes, eviction and `cache clear`;
- forged entries (valid archives of other numbers, a genuine entry under another key,
  one signed by another user's secret) and tampered bytes: discarded with a warning,
  computed again, never shown;
- weights rewritten with the same size and their old mtime restored: a new key.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnviz.cache import contents, entries, keys, names, notices, settings, tokenizers
from attnviz.cache.arrays import entry_mac
from attnviz.cache.secret import SECRET, SECRET_BYTES
from attnviz.cli import app
from tests.cache.test_cache import attentions, key  # an entry's arrays, and a key
from tests.conftest import TinyFactory

runner = CliRunner()
TEXT = "O trem estava cheio, mas ele conseguiu uma cadeira livre."
OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another uid needs root"
)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    for name in ("ATTNVIZ_CACHE_MB", "ATTNVIZ_NO_CACHE", settings.SHARED_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(notices, "warned", set())
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the cache holding files an attacker would like destroyed."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return folder


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folder` (links not followed): mode and content digest."""
    found = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else os.fsencode(str(st.st_mode))
        found[str(path.relative_to(folder))] = (st.st_mode, hashlib.sha256(data).hexdigest())
    return found


def warnings_of(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


# --- whom the folder belongs to -------------------------------------------------------------


def _refused(folder: Path, capsys: pytest.CaptureFixture[str], problem: str) -> None:
    """Nothing is read from or written to `folder`; one warning says why and what to do."""
    before = snapshot(folder)
    assert entries.load(key(1)) is None  # a genuine entry is there, but not to be trusted
    entries.store(key(2), *attentions(2))
    assert snapshot(folder) == before
    lines = warnings_of(capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: not using the attention cache in {folder}: ")
    assert problem in lines[0] and settings.SHARED_ENV in lines[0]
    result = runner.invoke(app, ["cache", "clear"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"Error: not clearing the attention cache in {folder}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(folder) == before
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0 and "not used: " + problem in info.stdout.replace("\n", " ")


@pytest.mark.parametrize(("mode", "who"), [(0o770, "its group"), (0o707, "others")])
def test_a_folder_others_can_write_is_not_used(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str], mode: int, who: str
) -> None:
    entries.store(key(1), *attentions(1))
    cache_in_tmp.chmod(mode)
    _refused(cache_in_tmp, capsys, f"it is writable by {who}")
    assert "chmod go-w" in runner.invoke(app, ["cache", "clear"]).stderr


@as_root
def test_a_folder_owned_by_someone_else_is_not_used(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries.store(key(1), *attentions(1))
    os.chown(cache_in_tmp, OTHER_UID, -1)
    _refused(cache_in_tmp, capsys, f"it is owned by uid {OTHER_UID}, not by you")


@as_root
def test_a_link_to_a_folder_owned_by_someone_else_is_not_used(
    tmp_path: Path, cache_in_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / f"{key(1)}.npz").write_bytes(b"planted")
    os.chown(theirs, OTHER_UID, -1)
    cache_in_tmp.symlink_to(theirs)
    _refused(cache_in_tmp, capsys, f"it is owned by uid {OTHER_UID}")
    assert (theirs / f"{key(1)}.npz").read_bytes() == b"planted"


def test_a_shared_folder_is_used_when_asked_for(
    cache_in_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)
    cache_in_tmp.mkdir(mode=0o700)
    cache_in_tmp.chmod(0o770)
    monkeypatch.setenv(settings.SHARED_ENV, "1")
    entries.store(key(1), att, ids)
    got = entries.load(key(1), expect_ids=ids)
    assert got is not None and np.array_equal(got, att)
    assert warnings_of(capsys) == []
    assert stat.S_IMODE((cache_in_tmp / SECRET).stat().st_mode) == 0o640  # the group's
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 0
    assert not (cache_in_tmp / f"{key(1)}.npz").exists()


def test_the_folder_entries_and_secret_are_private(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0o002)  # a user-private-group umask: mkdir would give 0775
    try:
        entries.store(key(1), *attentions(1))
    finally:
        os.umask(old)
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in (cache_in_tmp, *cache_in_tmp.iterdir())
    }
    assert modes == {"cache": 0o700, f"{key(1)}.npz": 0o600, SECRET: 0o600}
    assert entries.load(key(1)) is not None and warnings_of(capsys) == []


@pytest.mark.parametrize("how", ["readable", "wrong size", "link", "fifo", "not mine"])
def test_a_secret_that_is_not_private_is_not_used(
    cache_in_tmp: Path, outside: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    if how == "not mine" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    entries.store(key(1), *attentions(1))
    secret = cache_in_tmp / SECRET
    if how == "readable":
        secret.chmod(0o644)
    elif how == "wrong size":
        secret.write_bytes(b"short")
    elif how == "link":
        (outside / "their.key").write_bytes(secret.read_bytes())
        secret.unlink()
        secret.symlink_to(outside / "their.key")
    elif how == "fifo":
        secret.unlink()
        os.mkfifo(secret)
    else:
        os.chown(secret, OTHER_UID, -1)
    before = snapshot(outside)
    assert entries.load(key(1)) is None  # quickly: a FIFO never blocks
    entries.store(key(2), *attentions(2))
    assert not (cache_in_tmp / f"{key(2)}.npz").exists()
    lines = warnings_of(capsys)
    assert len(lines) == 1 and f"its {SECRET} cannot be trusted" in lines[0], lines
    assert "attnviz cache clear" in lines[0]
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 0  # the way out it names
    assert snapshot(outside) == before
    entries.store(key(3), *attentions(3))
    assert entries.load(key(3)) is not None


# --- links: never followed ------------------------------------------------------------------


def test_an_entry_that_is_a_link_is_never_followed(
    cache_in_tmp: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    genuine = cache_in_tmp / f"{key(1)}.npz"
    shutil.copy(genuine, outside / "copy.npz")  # a valid, signed entry, but outside
    genuine.unlink()
    genuine.symlink_to(outside / "copy.npz")
    before = snapshot(outside)
    assert entries.load(key(1), expect_ids=ids) is None
    (line,) = warnings_of(capsys)
    assert "symbolic link" in line and "discarded" in line
    assert not genuine.is_symlink() and snapshot(outside) == before  # the link went, not its target


@pytest.mark.parametrize("operation", ["clear", "evict", "store over it", "cli clear"])
def test_a_planted_link_survives_with_its_target(
    cache_in_tmp: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
) -> None:
    """`x.npz -> passwd`: clearing, evicting or writing that entry never deletes or truncates
    the file it points to."""
    for n in (1, 2, 3):
        entries.store(key(n), *attentions(n))
    planted = cache_in_tmp / f"{key(9)}.npz"
    planted.symlink_to(outside / "passwd")
    os.utime(planted, ns=(0, 0), follow_symlinks=False)  # the oldest: evicted first if followed
    (cache_in_tmp / f".{key(8)}.npz.x.tmp").symlink_to(outside / "passwd")  # a "stale temp"
    before = snapshot(outside)
    if operation == "clear":
        assert contents.clear()[0] == 3
    elif operation == "cli clear":
        result = runner.invoke(app, ["cache", "clear"])
        assert result.exit_code == 0 and "removed 3 entries" in result.stdout
    elif operation == "evict":
        size = (cache_in_tmp / f"{key(1)}.npz").stat().st_size
        monkeypatch.setenv("ATTNVIZ_CACHE_MB", repr(1.5 * size / settings.MB))
        entries.store(key(4), *attentions(4))
        assert len(list(cache_in_tmp.glob("*.npz"))) == 2  # key 4, and the link
    else:
        entries.store(key(9), *attentions(9))
        assert not planted.is_symlink() and entries.load(key(9)) is not None
    assert snapshot(outside) == before
    assert (outside / "passwd").read_text().startswith("root:")
    assert contents.info().entries == len(list(cache_in_tmp.glob("*.npz"))) - planted.is_symlink()


def test_a_tokenizers_folder_that_is_a_link_is_never_followed(
    cache_in_tmp: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "ab" * 32 + ".json"
    victim = outside / name
    victim.write_text("the user's own file, named like a converted tokenizer")
    entries.store(key(1), *attentions(1))
    (cache_in_tmp / names.TOKENIZERS).symlink_to(outside)
    before = snapshot(outside)
    path = cache_in_tmp / names.TOKENIZERS / name
    tokenizers.store_tokenizer_json(path, '{"model": "planted"}')  # not written through the link
    assert tokenizers.load_tokenizer_json(path) is None  # nor read through it
    assert contents.clear()[0] == 1
    assert snapshot(outside) == before
    lines = warnings_of(capsys)
    assert lines and all("tokenizers" in line and "symbolic link" in line for line in lines)


def test_a_converted_tokenizer_is_signed(cache_in_tmp: Path) -> None:
    path = tokenizers.tokenizer_path(cache_in_tmp.parent)  # any folder will do for a name
    tokenizers.store_tokenizer_json(path, '{"model": "real"}')
    assert tokenizers.load_tokenizer_json(path) == '{"model": "real"}'
    first, body = path.read_bytes().split(b"\n", 1)
    path.write_bytes(first + b"\n" + body.replace(b"real", b"fake"))  # tampered
    assert tokenizers.load_tokenizer_json(path) is None
    path.write_bytes(b'{"model": "fake"}')  # planted without a signature
    assert tokenizers.load_tokenizer_json(path) is None


# --- forged and tampered entries ------------------------------------------------------------


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


def _forge_other_numbers(path: Path) -> None:
    """A valid archive: right names, shapes and dtypes, attention rows summing to 1."""
    other, _ = attentions(42)
    _rewrite(path, attentions=other)


def _forge_without_mac(path: Path) -> None:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if name != "mac"}
    arrays["attentions"] = attentions(42)[0]
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


def _forge_with_a_guessed_mac(path: Path) -> None:
    _rewrite(path, attentions=attentions(42)[0], mac=np.zeros(32, np.uint8))


def _another_keys_entry(path: Path) -> None:
    """A genuine, signed entry of another text copied under this key."""
    att, _ = attentions(1)
    entries.store(key(7), att, list(range(101, 108)))  # the same ids, other numbers
    shutil.copy(path.parent / f"{key(7)}.npz", path)


def _another_users_secret(path: Path) -> None:
    """An entry signed with a secret of its own (another user's cache, copied in)."""
    att, _ = attentions(42)
    arrays = {"attentions": att, "ids": np.asarray(list(range(101, 108)), np.int64)}
    mac = entry_mac(os.urandom(SECRET_BYTES), key(1), arrays)
    with path.open("wb") as handle:
        np.savez(handle, **arrays, mac=mac)


def _tampered_bytes(path: Path) -> None:
    """Two weights of a row swapped in place: still attention, not the computed one."""
    with np.load(path) as data:
        att = data["attentions"]
    raw = bytearray(path.read_bytes())
    a, b = att[0, 0, 0, 0].tobytes(), att[0, 0, 0, 1].tobytes()
    at = raw.find(a + b)  # np.savez stores uncompressed: the floats are there as they are
    assert at > 0
    raw[at : at + 8] = b + a
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "forge",
    [
        _forge_other_numbers,
        _forge_without_mac,
        _forge_with_a_guessed_mac,
        _another_keys_entry,
        _another_users_secret,
        _tampered_bytes,
    ],
)
def test_a_forged_or_tampered_entry_is_discarded_and_computed_again(
    forge, cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    path = cache_in_tmp / f"{key(1)}.npz"
    forge(path)
    assert entries.load(key(1), expect_ids=ids, expect_shape=(2, 3)) is None
    lines = warnings_of(capsys)
    assert len(lines) == 1 and lines[0].startswith(f"warning: cached attentions {path}"), lines
    assert "discarded, computing again" in lines[0]
    assert not path.exists()
    entries.store(key(1), att, ids)
    got = entries.load(key(1), expect_ids=ids)
    assert got is not None and np.array_equal(got, att)


def _show_json(*args: str) -> tuple[dict, str]:
    result = runner.invoke(app, ["show", *args, "--json", "--quiet"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout), result.stderr


def test_a_forged_entry_is_never_shown(cache_in_tmp: Path) -> None:
    """Through the command: the entry a text seen before finds (pieces and all) is forged."""
    truth, _ = _show_json(TEXT, "--head", "1")
    (entry,) = cache_in_tmp.glob("*.npz")
    with np.load(entry) as data:
        att = data["attentions"]
    forged = np.full_like(att, 1 / att.shape[-1])  # uniform attention: valid, and a lie
    _rewrite(entry, attentions=forged)
    again, warning = _show_json(TEXT, "--head", "1")
    assert again == truth
    assert "integrity check failed" in warning and len(warning.splitlines()) == 1


# --- content keys ---------------------------------------------------------------------------


@pytest.mark.slow  # torch and a tiny model, twice
def test_weights_rewritten_with_the_same_size_and_mtime_are_computed_again(
    cache_in_tmp: Path, tiny_bert: TinyFactory
) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    folder = cache_in_tmp.parent / "model"
    shutil.copytree(tiny_bert("safetensors"), folder)
    before, _ = _show_json(TEXT, "--model", str(folder), "--head", "0")
    path = folder / "model.safetensors"
    st = path.stat()
    state = load_file(str(path))
    name = next(k for k in state if k.endswith("layer.1.attention.self.query.weight"))
    state[name] = torch.randn_like(state[name]) * 3  # same shape: the same size
    save_file(state, str(path), metadata={"format": "pt"})
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    after, _ = _show_json(TEXT, "--model", str(folder), "--head", "0")
    assert not np.allclose(before["weights"], after["weights"], atol=1e-4)
    fresh, _ = _show_json(TEXT, "--model", str(folder), "--head", "0", "--no-cache")
    np.testing.assert_allclose(after["weights"], fresh["weights"], atol=1e-7)


KEY_ARGS = dict(text="x", pair=None, causal=False, dtype="float32", truncate=False)


@pytest.mark.parametrize(
    "where", ["safetensors header", "first byte of data", "middle sample", "last byte"]
)
def test_a_big_weight_file_is_keyed_by_its_header_and_samples(tmp_path: Path, where: str) -> None:
    """A file above WHOLE_FILE_BYTES is sampled; a change where a sample falls, with the size
    and mtime restored, is a new key."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    header = json.dumps(
        {"w": {"dtype": "F32", "shape": [3 * 2**20], "data_offsets": [0, 12 * 2**20]}}
    )
    blob = bytearray(len(header).to_bytes(8, "little") + header.encode())
    data_start = len(blob)
    blob += np.random.default_rng(0).bytes(12 * 2**20)
    weights = folder / "model.safetensors"
    weights.write_bytes(bytes(blob))
    st = weights.stat()
    first = keys.cache_key(folder, **KEY_ARGS)
    at = {
        "safetensors header": 20,
        "first byte of data": data_start,
        "middle sample": (len(blob) - keys.SAMPLE_BYTES) * 8 // (keys.SAMPLES - 1),
        "last byte": len(blob) - 1,
    }[where]
    blob[at] ^= 0xFF
    weights.write_bytes(bytes(blob))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert keys.cache_key(folder, **KEY_ARGS) != first


def test_a_key_is_the_content_not_the_place_nor_the_time(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_hidden_layers": 2}')
    (folder / "model.safetensors").write_bytes(os.urandom(5 * 2**20))
    first = keys.cache_key(folder, **KEY_ARGS)
    os.utime(folder / "model.safetensors", ns=(0, 0))  # touched
    assert keys.cache_key(folder, **KEY_ARGS) == first
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)  # the same files elsewhere
    assert keys.cache_key(copy, **KEY_ARGS) == first
    (copy / "config.json").write_text('{"num_hidden_layers": 3}')
    assert keys.cache_key(copy, **KEY_ARGS) != first


def test_a_fifo_in_the_model_folder_does_not_block_the_key(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    os.mkfifo(folder / "model.safetensors")
    assert len(keys.cache_key(folder, **KEY_ARGS)) == 64  # skipped, as before: no hang


def test_cache_info_says_a_secret_others_can_read_stops_the_cache(cache_in_tmp: Path) -> None:
    entries.store(key(1), *attentions(1))
    (cache_in_tmp / SECRET).chmod(0o644)
    info = runner.invoke(app, ["cache", "info"], env={"COLUMNS": "200"})
    assert info.exit_code == 0
    assert "not used: its secret.key cannot be trusted" in info.stdout
    assert "attnviz cache clear" in info.stdout and "status   on" not in info.stdout
    assert runner.invoke(app, ["cache", "clear"]).exit_code == 0
    assert "status   on" in runner.invoke(app, ["cache", "info"]).stdout


def test_a_cache_of_zero_megabytes_is_off_without_a_word(
    cache_in_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries.store(key(1), *attentions(1))
    monkeypatch.setenv("ATTNVIZ_CACHE_MB", "0")
    assert settings.cache_enabled(False) is False
    assert "off (ATTNVIZ_CACHE_MB is 0)" in runner.invoke(app, ["cache", "info"]).stdout
    assert warnings_of(capsys) == []


def test_a_folder_under_an_entrys_name_is_one_warning_naming_it(
    cache_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    att, ids = attentions(1)
    entries.store(key(1), att, ids)
    entry = cache_in_tmp / f"{key(1)}.npz"
    entry.unlink()
    entry.mkdir()
    for _ in range(2):  # a lookup before tokenizing, and one before computing
        assert entries.load(key(1), expect_ids=ids) is None
    entries.store(key(1), att, ids)
    lines = warnings_of(capsys)
    assert len(lines) == 1, lines
    assert str(entry) in lines[0] and "remove it" in lines[0]
    assert entry.is_dir()  # the user's to remove: never rmtree'd

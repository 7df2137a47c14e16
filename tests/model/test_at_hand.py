"""The models at hand, found offline (`attnviz.models_at_hand`, `attnviz models`): the default
and the installed extras, GGUF files and model folders in a folder the user names, the local
Hugging Face cache; hostile folders listed or passed over, never a crash."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import attnviz
from attnviz.model import at_hand
from attnviz.model.locate import locate
from tests.gguf_files import write_gguf


def _folder(at: Path, config: dict, card: str | None = None) -> Path:
    at.mkdir(parents=True)
    (at / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (at / "model.safetensors").write_bytes(b"\0" * 1000)
    if card is not None:
        (at / "README.md").write_text(card, encoding="utf-8")
    return at


@pytest.fixture()
def no_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.delenv("ATTNVIZ_MODELS", raising=False)
    return hub


def test_the_default_and_the_installed_gemma_are_listed_with_the_value_to_pass(
    no_hub: Path,
) -> None:
    found = attnviz.models_at_hand()
    by_model = {m.model: m for m in found.models}
    default = by_model["all-MiniLM-L6-v2"]
    assert (default.kind, default.family, default.source) == ("encoder", "bert", "embedded")
    assert default.bytes > 80_000_000
    gemma = by_model["gemma-3-270m"]  # installed by `make install` (the gemma extra)
    assert (gemma.kind, gemma.family, gemma.languages) == ("decoder", "gemma3", ("multilingual",))
    assert gemma.bytes > 200_000_000
    # the value listed is one --model takes
    assert locate(default.model).origin == "embedded"
    assert found.searched == () and json.loads(json.dumps(found.to_dict()))["models"]


def test_a_folder_of_models_lists_folders_and_gguf_files(
    tmp_path: Path, no_hub: Path, embedded_folder: Path
) -> None:
    root = tmp_path / "models"
    bert = json.loads((embedded_folder / "config.json").read_text(encoding="utf-8"))
    _folder(root / "org" / "my-bert", bert, card="---\nlanguage: [pt, en]\n---\n# a card\n")
    _folder(root / "t5-small", {"model_type": "t5", "d_model": 8, "num_layers": 1})
    _folder(root / "deberta", {"model_type": "deberta-v2", "hidden_size": 8})
    _folder(root / "hostile", {"model_type": ["llama"]})
    write_gguf(root / "tiny.gguf", "llama")
    _folder(root / ".hidden" / "x", bert)
    _folder(root / "a" / "b" / "too-deep", bert)  # three levels down: past the scan's depth
    found = attnviz.models_at_hand(root)
    by_name = {m.name: m for m in found.models}
    mine = by_name["my-bert"]
    assert (mine.kind, mine.languages, mine.source) == ("encoder", ("pt", "en"), "folder")
    assert mine.model == str(root / "org" / "my-bert") and mine.bytes == 1000
    assert (by_name["t5-small"].kind, by_name["t5-small"].engine) == ("encoder-decoder", "attnviz")
    assert (by_name["deberta"].kind, by_name["deberta"].engine) == ("encoder", "transformers")
    assert by_name["hostile"].kind == "unknown" and by_name["hostile"].note
    assert (by_name["tiny.gguf"].family, by_name["tiny.gguf"].kind) == ("llama", "decoder")
    assert "x" not in by_name and "too-deep" not in by_name
    assert found.searched == (str(root),)


def test_the_hugging_face_cache_is_read_by_its_refs(tmp_path: Path, no_hub: Path) -> None:
    repo = no_hub / "models--someone--tiny-gpt2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123", encoding="ascii")
    _folder(repo / "snapshots" / "abc123", {"model_type": "gpt2", "n_embd": 8})
    (no_hub / "datasets--x--y").mkdir()
    found = attnviz.models_at_hand()
    hub = [m for m in found.models if m.source == "hugging face cache"]
    assert [m.model for m in hub] == ["someone/tiny-gpt2"]
    assert found.searched == (str(no_hub),)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_links_and_huge_folders_are_bounded(
    tmp_path: Path, no_hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "models"
    root.mkdir()
    (root / "loop").symlink_to(root, target_is_directory=True)  # never followed
    for n in range(50):
        (root / f"junk{n}").mkdir()
    monkeypatch.setattr(at_hand, "MODELS_SCAN_ENTRIES", 20)
    found = attnviz.models_at_hand(root)
    assert found.passed_over > 0
    assert [m.source for m in found.models] == ["embedded", "installed"]


def test_a_folder_argument_of_the_wrong_type_is_one_line() -> None:
    with pytest.raises(attnviz.BadInput, match="folder must be a path"):
        attnviz.models_at_hand(3)  # type: ignore[arg-type]


def test_a_gguf_path_that_is_not_there_gets_a_gguf_message_not_a_hub_look_up() -> None:
    for spec in ("./nope.gguf", "SmolLM2-135M-Instruct.Q8_0.gguf"):
        with pytest.raises(attnviz.AttnvizError, match="GGUF file .* does not exist"):
            locate(spec)


def test_the_listed_folder_opens(tmp_path: Path, no_hub: Path, embedded_folder: Path) -> None:
    copy = tmp_path / "models" / "minilm"
    shutil.copytree(embedded_folder, copy)
    (entry,) = [m for m in attnviz.models_at_hand(copy.parent).models if m.source == "folder"]
    assert attnviz.model_info(entry.model).shape.layers == 6


def test_a_listed_kind_is_the_one_transformers_engine_reads() -> None:
    """`models` says what the model is as the engine will read it: by its model type, never
    a lying `architectures` entry or an is_decoder flag on a type that is only an encoder."""
    from attnviz.model.at_hand import classify

    lying = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForCausalLM"]}
    assert classify(lying)[1:] == ("encoder", "transformers")
    assert classify({**lying, "is_decoder": True})[1:] == ("encoder", "transformers")

"""Finding and loading checkpoints: the key mapping, the strict check, and refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnviz.errors import AttnvizError
from attnviz.model.config import ACTIVATION_NAMES
from attnviz.model.families import read_config
from attnviz.model.layers import ACTIVATIONS
from attnviz.model.locate import EMBEDDED_NAME, locate
from attnviz.model.weights import (
    convert_state_dict,
    count_parameters,
    hf_name,
    load_encoder,
    safetensors_shapes,
)
from tests.conftest import TinyFactory


def _copy(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def _edit_config(folder: Path, **changes: object) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_default_is_the_embedded_model_and_env_var_chooses_another(
    tiny_bert: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = locate(None)
    assert default.name == EMBEDDED_NAME and (default.folder / "model.safetensors").is_file()
    folder = tiny_bert()
    monkeypatch.setenv("ATTNVIZ_MODEL", str(folder))
    assert locate(None).folder == folder
    assert locate(str(default.folder)).folder == default.folder  # --model wins over the env var


def test_key_mapping_drops_heads_prefix_and_buffers_and_renames_legacy_names() -> None:
    state = {
        "bert.embeddings.word_embeddings.weight": 1,
        "bert.embeddings.LayerNorm.gamma": 2,
        "bert.embeddings.position_ids": 3,
        "bert.pooler.dense.weight": 4,
        "cls.predictions.bias": 5,
        "bert.encoder.layer.11.attention.self.query.bias": 6,
        "bert.encoder.layer.0.output.LayerNorm.beta": 7,
        "classifier.weight": 8,
        "qa_outputs.bias": 9,
        "bert.something.else": 10,
    }
    assert convert_state_dict(state) == {
        "embeddings.word.weight": 1,
        "embeddings.norm.weight": 2,
        "layers.11.attention.q_proj.bias": 6,
        "layers.0.ff_norm.bias": 7,
        "something.else": 10,
    }
    assert convert_state_dict({"encoder.layer.2.output.dense.weight": 1, "extra": 2}) == {
        "layers.2.ff_out.weight": 1,
        "extra": 2,
    }


def test_default_model_parameter_count_excludes_the_pooler(embedded_folder: Path) -> None:
    encoder = load_encoder(embedded_folder)
    counted = sum(p.numel() for p in encoder.parameters())
    assert count_parameters(embedded_folder) == counted == 22_565_376


def test_safetensors_shapes_read_by_hand_are_the_librarys(
    embedded_folder: Path, tiny_bert: TinyFactory
) -> None:
    from safetensors import safe_open

    for path in (embedded_folder / "model.safetensors", tiny_bert() / "model.safetensors"):
        with safe_open(str(path), framework="np") as handle:
            theirs = {key: handle.get_slice(key).get_shape() for key in handle.keys()}  # noqa: SIM118
        assert safetensors_shapes(path) == theirs


@pytest.mark.parametrize("keep", [5, 8, 40, -100])  # in the length, at it, in the header, data
def test_a_cut_safetensors_file_is_refused_by_its_header(
    tiny_bert: TinyFactory, tmp_path: Path, keep: int
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(ValueError):
        safetensors_shapes(path)
    with pytest.raises(AttnvizError, match="cannot read weights from .*model.safetensors"):
        count_parameters(folder)


def test_loading_builds_no_random_weights(tiny_bert: TinyFactory) -> None:
    from safetensors.torch import load_file

    folder = tiny_bert()
    encoder = load_encoder(folder)
    expected = load_file(folder / "model.safetensors")["encoder.layer.1.attention.self.key.weight"]
    assert torch.equal(encoder.layers[1].attention.k_proj.weight, expected)
    assert not any(p.is_meta for p in encoder.parameters())


def test_missing_and_unexpected_keys_are_named(tiny_bert: TinyFactory, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    folder = _copy(tiny_bert(), tmp_path)
    state = load_file(folder / "model.safetensors")
    state.pop("encoder.layer.1.output.dense.bias")
    state["encoder.layer.1.extra.weight"] = torch.zeros(2)
    save_file(state, folder / "model.safetensors")
    with pytest.raises(AttnvizError) as info:
        load_encoder(folder)
    message = str(info.value)
    assert "missing: encoder.layer.1.output.dense.bias" in message  # the checkpoint's names
    assert "unexpected: encoder.layer.1.extra.weight" in message


def test_extra_layers_of_a_prefixed_checkpoint_are_named_as_stored(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(arch="classifier"), tmp_path)
    _edit_config(folder, num_hidden_layers=1)
    with pytest.raises(AttnvizError, match=r"unexpected: bert\.encoder\.layer\.1\.attention"):
        load_encoder(folder)


def test_shape_mismatch_is_named(tiny_bert: TinyFactory, tmp_path: Path) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _edit_config(folder, intermediate_size=64)
    expected = (
        r"wrong shape: encoder\.layer\.0\.intermediate\.dense\.bias \(48,\) \(expected \(64,\)\)"
    )
    with pytest.raises(AttnvizError, match=expected):
        load_encoder(folder)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"model_type": "t5"},
            "computes BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT",
        ),
        ({"is_decoder": True}, "decoder"),
        ({"position_embedding_type": "relative_key"}, "absolute"),
        ({"hidden_act": "mish"}, "hidden_act='mish'"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers=1000000000"),
        ({"hidden_size": 30}, "not divisible"),
        ({"layer_norm_eps": "abc"}, "layer_norm_eps='abc'"),
    ],
)
def test_unsupported_configs_are_refused_before_loading(
    tiny_bert: TinyFactory, tmp_path: Path, changes: dict, expected: str
) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(AttnvizError, match=expected):
        read_config(folder)


def test_names_map_back_to_the_checkpoints_own() -> None:
    assert (
        hf_name("layers.7.attention.out_proj.weight")
        == "encoder.layer.7.attention.output.dense.weight"
    )
    assert hf_name("embeddings.token_type.weight") == "embeddings.token_type_embeddings.weight"


def test_folder_without_config_or_weights(tiny_bert: TinyFactory, tmp_path: Path) -> None:
    folder = _copy(tiny_bert(), tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(AttnvizError, match="no model.safetensors or pytorch_model.bin"):
        load_encoder(folder)
    (folder / "config.json").unlink()
    with pytest.raises(AttnvizError, match="no config.json"):
        read_config(folder)


@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin"])
def test_corrupt_weights_fail_cleanly(tiny_bert: TinyFactory, tmp_path: Path, name: str) -> None:
    folder = _copy(tiny_bert(fmt="bin" if name.endswith("bin") else "safetensors"), tmp_path)
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 3])
    with pytest.raises(AttnvizError, match=f"cannot read weights from .*{name}"):
        load_encoder(folder)


class _Exploit:
    """Pickles into a call of os.system: a checkpoint that would run code on load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_pickle_that_would_run_code_is_refused_and_runs_nothing(
    tiny_bert: TinyFactory, tmp_path: Path
) -> None:
    folder = _copy(tiny_bert(fmt="bin"), tmp_path)
    marker = tmp_path / "pwned"
    torch.save(
        {"embeddings.word_embeddings.weight": _Exploit(marker)}, folder / "pytorch_model.bin"
    )
    with pytest.raises(AttnvizError, match="cannot read weights"):
        load_encoder(folder)
    assert not marker.exists()


def test_unknown_local_path_and_unreachable_hub(tmp_path: Path) -> None:
    with pytest.raises(AttnvizError, match="does not exist"):
        locate(str(tmp_path / "nowhere"))
    with pytest.raises(AttnvizError, match="HF_HUB_OFFLINE"):
        locate("someone/no-such-model-attnviz")  # the Hub is off in tests: not in the cache


def test_config_check_knows_exactly_the_activations_the_encoder_computes() -> None:
    assert set(ACTIVATION_NAMES) == set(ACTIVATIONS)


def test_describe_gives_the_embedded_models_shape_without_torch(embedded_folder: Path) -> None:
    from attnviz.model.families import ModelShape, describe

    shape = describe(read_config(embedded_folder))
    assert shape == ModelShape(
        family="BERT",
        layers=6,
        heads=12,
        hidden=384,
        head_size=32,
        intermediate=1536,
        vocab=30522,
        max_tokens=512,
        activation="gelu",
        embedding_size=384,
        type_vocab_size=2,
    )
    probe = (
        "import sys, pathlib; from attnviz.model.families import describe, read_config; "
        f"describe(read_config(pathlib.Path({str(embedded_folder)!r}))); "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_memory_that_runs_out_reading_the_weights_blames_the_weights(
    tiny_bert: TinyFactory, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A MemoryError while attnviz's own engine reads a checkpoint says the weights are too
    big for this process, never the generic line that tells the user to shorten the text."""
    folder = tiny_bert(fmt=fmt)

    def refuse(*args: object, **kwargs: object) -> None:
        raise MemoryError

    if fmt == "safetensors":
        import safetensors

        monkeypatch.setattr(safetensors, "safe_open", refuse)
    else:
        monkeypatch.setattr(torch, "load", refuse)
    with pytest.raises(AttnvizError, match="out of memory reading the weights of") as caught:
        load_encoder(folder)
    assert "shorten" not in str(caught.value)

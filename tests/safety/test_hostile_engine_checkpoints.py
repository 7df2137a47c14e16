"""Checkpoints whose config.json lies about them, read by transformers' engine.

A DeBERTa-v2 whose `architectures` claims a causal LM is still an encoder (its model type
decides); a config that builds fewer or more layers than the checkpoint stores is refused
(transformers would drop the others, or draw them at random); a position table transformers
computes in Python is bounded before the model is built; a model_type that is not a string,
and memory that runs out while the weights are read, end in one line that names the cause.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import AttnvizError
from attnviz.model.hf_engine import stacks
from tests.conftest import TinyFactory

runner = CliRunner()
TEXT = "The bank refused the loan because it had no funds."
DEBERTA = dict(
    relative_attention=True,
    pos_att_type="p2c|c2p",
    max_relative_positions=64,
    initializer_range=0.3,
)


def _deberta(tiny_model: TinyFactory) -> Path:
    return tiny_model("deberta-v2", arch="mlm", **DEBERTA)  # keys under `deberta.`


def _edited(source: Path, folder: Path, **changes: object) -> str:
    """A copy of the checkpoint `source` whose config.json has `changes`."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return str(folder)


def _wordpiece(folder: Path) -> Path:
    """A new folder holding the embedded model's WordPiece tokenizer (30,522 pieces)."""
    from attnviz.model.locate import locate

    folder.mkdir()
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(locate(None).folder / name, folder / name)
    return folder


def _one_line(*args: str, says: str) -> None:
    result = runner.invoke(app, list(args), env={"COLUMNS": "100"})
    assert result.exit_code != 0, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert says in lines[0], lines[0]
    assert "shorten the text" not in lines[0]


def test_layer_stacks_are_read_from_the_tensor_names() -> None:
    names = [
        "deberta.encoder.layer.0.attention.self.query_proj.weight",
        "deberta.encoder.layer.1.output.dense.bias",
        "deberta.embeddings.word_embeddings.weight",
        "h.11.attn.c_attn.weight",  # GPT-2
        "model.decoder.layers.2.self_attn.k_proj.weight",  # BART
        "encoder.block.3.layer.1.DenseReluDense.wi.weight",  # T5: blocks of sub-layers
        "shared.weight",
        "encoder.layer_norm.weight",  # not a layer index
        "high.7.x",  # `h` is a whole name component, never a word's end
    ]
    assert stacks(names, prefix="deberta") == {
        "encoder.layer": 2,
        "h": 12,
        "model.decoder.layers": 3,
        "encoder.block": 4,
        "encoder.block.3.layer": 2,
    }


@pytest.mark.slow
def test_an_encoder_is_read_as_an_encoder_whatever_its_architectures_claims(
    tiny_model, tmp_path
) -> None:
    """A DeBERTa-v2 whose config says DebertaV2ForCausalLM (no such class): transformers
    computes an encoder, and every cell holds a weight; none may be drawn masked."""
    import torch
    from transformers import AutoModel

    folder = _edited(
        _deberta(tiny_model), tmp_path / "claims", architectures=["DebertaV2ForCausalLM"]
    )
    analysis = attnviz.analyse(TEXT, model=folder, cache=False)
    assert not analysis.model.decoder
    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.tensor([analysis.pieces.ids]), output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)
    np.testing.assert_allclose(analysis.attentions, expected, atol=1e-6)
    assert np.triu(analysis.attentions, 1).max() > 0.05  # later pieces are attended to
    view = analysis.view(1, 0, units="tokens")
    assert view.masked is None or not view.masked.any()


def test_the_kind_comes_from_the_model_type() -> None:
    """Torch-free: an encoder type stays one under a causal claim or is_decoder; a type that
    transformers turns causal with is_decoder (BERT) follows it; a decoder type is one."""
    from attnviz.model.foreign import describe_foreign

    sizes = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, vocab_size=100)
    for claim in ({"architectures": ["DebertaV2ForCausalLM"]}, {"is_decoder": True}):
        shape = describe_foreign({"model_type": "deberta-v2", **sizes, **claim})
        assert not shape.foreign_decoder, claim
    assert describe_foreign({"model_type": "bert", "is_decoder": True, **sizes}).foreign_decoder
    assert not describe_foreign(
        {"model_type": "bert", "architectures": ["BertLMHeadModel"], **sizes}
    ).foreign_decoder
    assert describe_foreign(
        {"model_type": "olmo", "architectures": ["OlmoForMaskedLM"], **sizes}
    ).foreign_decoder


@pytest.mark.slow  # imports transformers' mappings
def test_a_causal_claim_on_a_type_the_tables_do_not_know_is_checked_by_transformers() -> None:
    """esmc is outside attnviz's tables: config.json's claim of a causal head is believed
    torch-free, and transformers' mapping (a masked LM, no causal one) refuses it at load."""
    from attnviz.model.hf_engine import check_kind

    with pytest.raises(AttnvizError, match="transformers computes model type esmc as an encoder"):
        check_kind({"model_type": "esmc"}, True, "config.json")
    check_kind({"model_type": "esmc"}, False, "config.json")
    check_kind({"model_type": "bert", "is_decoder": True}, True, "config.json")
    check_kind({"model_type": "olmo"}, True, "config.json")
    with pytest.raises(AttnvizError, match="as a decoder"):
        check_kind({"model_type": "olmo"}, False, "config.json")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layers", "says"),
    [(1, "stores 2 layers in encoder.layer, but its config.json builds 1"), (3, "builds 3")],
)
def test_a_config_of_other_layer_counts_than_the_checkpoint_is_refused(
    tiny_model, tmp_path, layers: int, says: str
) -> None:
    folder = _edited(_deberta(tiny_model), tmp_path / "layers", num_hidden_layers=layers)
    for args in (("show", TEXT), ("show", TEXT, "--json", "--no-cache")):
        _one_line(*args, "--model", folder, says=says)
    with pytest.raises(AttnvizError, match="num_hidden_layers="):
        attnviz.analyse(TEXT, model=folder, cache=False)


@pytest.mark.slow
@pytest.mark.parametrize("key", ["encoder_layers", "decoder_layers"])
def test_an_encoder_decoder_with_fewer_layers_than_its_checkpoint_is_refused(
    tmp_path, key: str
) -> None:
    from tests.model.test_encoder_decoder import write_seq2seq

    source = tmp_path / "bart"
    source.mkdir()
    write_seq2seq(source, "bart")
    folder = _edited(source, tmp_path / "fewer", **{key: 1})
    stack = key.split("_")[0] + ".layers"
    _one_line("show", "the bank", "--target", "la banque", "--model", folder, "--no-cache",
              says=f"in {stack}, but its config.json builds 1 ({key}=1)")  # fmt: skip
    # the decoder starts from the model's own start token: none to leave out
    _one_line("show", "the bank", "--target", "la banque", "--model", str(source), "--no-bos",
              says="--no-bos changes nothing here")  # fmt: skip


@pytest.mark.slow
def test_reading_an_encoder_without_a_start_token_is_refused(tiny_model) -> None:
    """An encoder has no start token to leave out: bos=False (--no-bos) is refused, never
    ignored, on attnviz's own engine and on transformers'."""
    from attnviz.errors import BadInput

    for folder in (None, str(_deberta(tiny_model))):
        with pytest.raises(BadInput, match=r"an encoder, which reads no start token: bos=False"):
            attnviz.analyse(TEXT, model=folder, bos=False)
        args = ("show", TEXT) if folder is None else ("show", TEXT, "--model", folder)
        _one_line(*args, "--no-bos", says="--no-bos leaves out a decoder's")


@pytest.mark.slow
def test_a_computed_position_table_is_bounded_before_the_model_is_built(tmp_path) -> None:
    """A RoFormer asking for 65,536 positions of 64 sinusoid features: transformers would build
    the table as a Python list (gigabytes) before reading a weight; one line instead."""
    import resource

    import transformers

    source = _wordpiece(tmp_path / "roformer")
    config = transformers.RoFormerConfig(
        vocab_size=30522, hidden_size=64, embedding_size=64, num_hidden_layers=1,
        num_attention_heads=1, intermediate_size=37, max_position_embeddings=64,
    )  # fmt: skip
    transformers.RoFormerModel(config).save_pretrained(source)
    folder = _edited(source, tmp_path / "long", max_position_embeddings=65536)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(AttnvizError, match=r"position tables of 4,194,304 numbers"):
        attnviz.analyse("the bank", model=folder, cache=False)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200  # MB
    _one_line("show", "the bank", "--model", folder, says="max_position_embeddings=65536")
    assert attnviz.analyse("the bank", model=str(source), cache=False).attentions.shape[0] == 1


@pytest.mark.parametrize("command", ["info", "show"])
def test_a_model_type_that_is_not_a_string_is_refused_naming_the_key(tmp_path, command) -> None:
    from attnviz.model.seq2seq_config import is_seq2seq

    folder = tmp_path / "listed"
    folder.mkdir()
    sizes = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, vocab_size=100)
    (folder / "config.json").write_text(json.dumps({"model_type": ["llama"], **sizes}))
    args = (command, *([TEXT] if command == "show" else []), "--model", str(folder))
    _one_line(*args, says="model_type=['llama']")
    assert not is_seq2seq({"model_type": ["t5"]})
    (folder / "config.json").write_text(
        json.dumps({"model_type": "t5", "is_encoder_decoder": "yes"})
    )
    _one_line(*args, says="is_encoder_decoder='yes'")


_SHORT_OF_MEMORY = """
import resource, sys
import attnviz
from attnviz.errors import AttnvizError
from transformers import AutoModel, DebertaV2Model  # their code loaded before the bound
attnviz.prepare("the bank", model=sys.argv[1], cache=False)  # and the tokenizer's
size = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize"))
limit = size * 1024 + 16 * 2**20  # 16 MB more address space: less than the weights take
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    attnviz.analyse("the bank", model=sys.argv[1], cache=False)
except AttnvizError as exc:
    print(exc)
"""


@pytest.mark.slow
def test_memory_that_runs_out_reading_the_weights_blames_the_weights(tmp_path) -> None:
    """A 64 MB DeBERTa-v2 in a process short of memory: the line says the weights are too
    big for the memory, never to shorten the text."""
    import torch
    import transformers

    folder = _wordpiece(tmp_path / "wide")
    config = transformers.DebertaV2Config(
        vocab_size=30522, hidden_size=512, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.DebertaV2Model(config)
    model = model.to_empty(device="cpu")
    for weight in model.parameters():
        torch.nn.init.normal_(weight, std=0.02)
    model.save_pretrained(folder)
    out = subprocess.run(
        [sys.executable, "-c", _SHORT_OF_MEMORY, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = out.stdout.strip()
    assert line.startswith("out of memory while reading the weights of"), (line, out.stderr[-500:])
    assert "too big for this machine's memory" in line and "shorten" not in line


@pytest.mark.slow
def test_a_decoder_storing_a_layer_its_config_leaves_out_is_refused(tiny_decoder, tmp_path) -> None:
    """An OLMo checkpoint with a third layer its config (2 layers) never builds is refused; the
    same layer declared as a multi-token-prediction layer (num_nextn_predict_layers, as
    DeepSeek-V3 stores its own) is left out by transformers, and the model reads."""
    from safetensors.torch import load_file, save_file

    source = tiny_decoder("olmo")
    folder = Path(_edited(source, tmp_path / "extra"))
    weights = load_file(folder / "model.safetensors")
    third = {
        k.replace("layers.1.", "layers.2."): v.clone()
        for k, v in weights.items()
        if "layers.1." in k
    }
    save_file({**weights, **third}, folder / "model.safetensors", metadata={"format": "pt"})
    _one_line("show", TEXT, "--model", str(folder), "--no-cache",
              says="stores 3 layers in layers, but its config.json builds 2")  # fmt: skip
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_nextn_predict_layers": 1}))
    reads = attnviz.analyse(TEXT, model=str(folder), cache=False)
    np.testing.assert_allclose(
        reads.attentions, attnviz.analyse(TEXT, model=str(source), cache=False).attentions
    )

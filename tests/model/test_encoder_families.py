"""Every BERT-family encoder attnviz computes gives transformers' attention weights within 1e-5.

Tiny random checkpoints of BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT
are written here with transformers (with real tokenizer files), loaded by attnviz's
own loader, and compared with transformers' eager attention. The same file checks that
other architectures and absurd configs are refused in one line before anything is
allocated, that a pickle cannot run code, and that half-precision weights load.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel

from attnviz.errors import AttnvizError, BadInput
from attnviz.model.families import describe, read_config
from attnviz.model.weights import count_parameters, load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import FAMILY_TYPES, PT_SENTENCE, TinyFactory

TOLERANCE = 1e-5
PAIR = ("O banco negou o empréstimo.", "Ele estava sem fundos!")
DISPLAY = {
    "bert": "BERT",
    "roberta": "RoBERTa",
    "xlm-roberta": "XLM-RoBERTa",
    "distilbert": "DistilBERT",
    "electra": "ELECTRA",
    "albert": "ALBERT",
}


def _reference(folder: Path) -> torch.nn.Module:
    """transformers' own encoder for `folder`, eager attention, in float32."""
    return AutoModel.from_pretrained(
        str(folder), attn_implementation="eager", dtype=torch.float32
    ).eval()


def _has_type_ids(family: str) -> bool:
    return family != "distilbert"


def _compare(folder: Path, family: str, text: str, pair: str | None = None, **load) -> float:
    """Largest difference between our attentions and transformers' on `text` (and `pair`)."""
    pieces = tokenize(load_tokenizer(folder), text, pair=pair, max_positions=60)
    ids = torch.tensor([pieces.ids])  # (1, T)
    types = torch.tensor([pieces.type_ids])  # (1, T)
    encoder = load_encoder(folder, **load)
    with torch.inference_mode():
        ours = encoder(ids, types).attentions.float()  # (L, 1, nh, T, T)
        extra = {"token_type_ids": types} if _has_type_ids(family) else {}
        theirs = torch.stack(_reference(folder)(ids, output_attentions=True, **extra).attentions)
    assert ours.shape == theirs.shape == (2, 1, 4, len(pieces), len(pieces))
    return (ours - theirs).abs().max().item()


@pytest.mark.parametrize("family", FAMILY_TYPES)
def test_one_sentence_matches_transformers(tiny_model: TinyFactory, family: str) -> None:
    assert _compare(tiny_model(family), family, PT_SENTENCE) <= TOLERANCE


@pytest.mark.parametrize("family", FAMILY_TYPES)
def test_sentence_pair_matches_transformers(tiny_model: TinyFactory, family: str) -> None:
    folder = tiny_model(family)
    pieces = tokenize(load_tokenizer(folder), PAIR[0], pair=PAIR[1], max_positions=60)
    if family in ("bert", "electra", "albert", "distilbert"):  # WordPiece / ALBERT mark segment B
        assert pieces.type_ids[-1] == 1
    assert _compare(folder, family, *PAIR) <= TOLERANCE


@pytest.mark.parametrize(
    ("family", "arch", "fmt"),
    [
        ("roberta", "mlm", "safetensors"),
        ("roberta", "model", "bin"),
        ("xlm-roberta", "classifier", "safetensors"),
        ("distilbert", "mlm", "safetensors"),
        ("distilbert", "classifier", "bin"),
        ("electra", "pretraining", "safetensors"),
        ("electra", "classifier", "safetensors"),
        ("albert", "pretraining", "safetensors"),
        ("albert", "mlm", "bin"),
    ],
)
def test_prefixed_checkpoints_load_without_their_heads(
    tiny_model: TinyFactory, family: str, arch: str, fmt: str
) -> None:
    folder = tiny_model(family, fmt=fmt, arch=arch)
    assert _compare(folder, family, PT_SENTENCE) <= TOLERANCE


def test_electra_with_embeddings_as_wide_as_hidden_has_no_projection(
    tiny_model: TinyFactory,
) -> None:
    folder = tiny_model("electra", embedding_size=32)
    assert load_encoder(folder).embeddings.project is None
    assert _compare(folder, "electra", PT_SENTENCE) <= TOLERANCE


def test_roberta_positions_count_after_padding_in_a_padded_batch(tiny_model: TinyFactory) -> None:
    """Right-padded with RoBERTa's pad id: real tokens keep positions pad+1, pad+2, ..."""
    folder = tiny_model("roberta")
    tokenizer = load_tokenizer(folder)
    encoded = [tokenize(tokenizer, s, max_positions=60).ids for s in (PT_SENTENCE, PAIR[0])]
    width = max(map(len, encoded))
    ids = torch.tensor([e + [1] * (width - len(e)) for e in encoded])  # (2, T), pad id 1
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    with torch.inference_mode():
        ours = load_encoder(folder)(ids, attention_mask=mask).attentions
        theirs = torch.stack(
            _reference(folder)(ids, attention_mask=mask, output_attentions=True).attentions
        )
    for b, e in enumerate(encoded):
        n = len(e)  # real query rows; pad rows are arbitrary in both
        assert (ours[:, b, :, :n] - theirs[:, b, :, :n]).abs().max().item() <= TOLERANCE


def test_albert_shares_one_layer_and_counts_it_once(tiny_model: TinyFactory) -> None:
    folder = tiny_model("albert")
    encoder = load_encoder(folder)
    assert encoder.layers[0] is encoder.layers[1]
    assert encoder.layers[1].attention.q_proj.weight.shape == (32, 32)
    ours = sum(p.numel() for p in encoder.parameters())
    pooler = 32 * 32 + 32
    theirs = sum(p.numel() for p in _reference(folder).parameters()) - pooler
    assert count_parameters(folder) == ours == theirs


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("bert", dict(layers=2, heads=4, hidden=32, head_size=8, max_tokens=64, embedding_size=32)),
        ("roberta", dict(max_tokens=62, type_vocab_size=1, vocab=400)),  # 64 - pad (1) - 1
        ("xlm-roberta", dict(max_tokens=62, type_vocab_size=1)),
        ("distilbert", dict(layers=2, heads=4, intermediate=48, max_tokens=64, type_vocab_size=0)),
        ("electra", dict(hidden=32, embedding_size=16, max_tokens=64, type_vocab_size=2)),
        ("albert", dict(embedding_size=16, activation="gelu_new", max_tokens=64)),
    ],
)
def test_describe_names_the_family_and_its_real_length_limit(
    tiny_model: TinyFactory, family: str, expected: dict
) -> None:
    shape = describe(read_config(tiny_model(family)))
    assert shape.family == DISPLAY[family]
    assert {k: getattr(shape, k) for k in expected} == expected


def test_roberta_takes_exactly_max_tokens_pieces(tiny_model: TinyFactory) -> None:
    folder = tiny_model("roberta")
    limit = describe(read_config(folder)).max_tokens
    text = " ".join(["O trem estava cheio."] * 40)
    pieces = tokenize(load_tokenizer(folder), text, max_positions=limit, truncate=True)
    assert len(pieces) == limit == 62
    ids = torch.tensor([pieces.ids])
    with torch.inference_mode():  # the last piece sits at position 63, the table's last row
        ours = load_encoder(folder)(ids).attentions
        theirs = torch.stack(_reference(folder)(ids, output_attentions=True).attentions)
    assert (ours - theirs).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize("name", ["t5", "vit", "falcon"])
def test_other_architectures_are_refused_in_one_line(tmp_path: Path, name: str) -> None:
    import transformers

    configs = {
        "t5": transformers.T5Config,
        "vit": transformers.ViTConfig,
        "falcon": transformers.FalconConfig,
    }
    configs[name]().save_pretrained(tmp_path)
    with pytest.raises(AttnvizError) as info:
        read_config(tmp_path)
    message = str(info.value)
    assert "\n" not in message and name in message
    assert "BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA and ALBERT" in message
    assert "GPT-2, Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and Gemma 3 decoders" in message


def test_config_without_model_type_is_bert_only_when_shaped_like_bert(
    tiny_bert: TinyFactory,
) -> None:
    raw = json.loads((tiny_bert() / "config.json").read_text())
    raw.pop("model_type")
    assert describe(raw).family == "BERT"
    with pytest.raises(AttnvizError, match="without model_type that is not shaped like BERT"):
        describe({"d_model": 512, "num_layers": 6, "vocab_size": 32000})


def _edited(folder: Path, tmp_path: Path, **changes: object) -> Path:
    target = tmp_path / "model"
    shutil.copytree(folder, target)
    config = json.loads((target / "config.json").read_text())
    config.update(changes)
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize(
    ("family", "changes", "expected"),
    [
        ("bert", {"num_hidden_layers": 10**9}, "num_hidden_layers=1000000000"),
        ("distilbert", {"n_layers": 10**9}, "n_layers=1000000000"),
        ("roberta", {"hidden_size": 30}, "hidden_size=30, not divisible by num_attention_heads"),
        ("distilbert", {"dim": 30}, "dim=30, not divisible by n_heads=4"),
        ("albert", {"embedding_size": -16}, "embedding_size=-16"),
        ("electra", {"vocab_size": 10**12}, "vocab_size=1000000000000"),
        ("electra", {"intermediate_size": "48"}, "intermediate_size='48'"),
        ("xlm-roberta", {"num_attention_heads": 4.0}, "num_attention_heads=4.0"),
        ("bert", {"hidden_size": True}, "hidden_size=True"),
        ("distilbert", {"activation": "mish"}, "activation='mish'"),
        ("albert", {"num_hidden_groups": 2}, "num_hidden_groups=2"),
        ("albert", {"inner_group_num": 2}, "inner_group_num=2"),
        ("roberta", {"pad_token_id": 63}, "pad_token_id=63"),
        ("roberta", {"is_decoder": True}, "decoder"),
    ],
)
def test_absurd_configs_are_refused_in_one_line_before_loading(
    tiny_model: TinyFactory, tmp_path: Path, family: str, changes: dict, expected: str
) -> None:
    folder = _edited(tiny_model(family), tmp_path, **changes)
    for attempt in (read_config, load_encoder):  # the loader refuses before building anything
        with pytest.raises(AttnvizError) as info:
            attempt(folder)
        assert expected in str(info.value) and "\n" not in str(info.value)


def _write_marker(path: str) -> None:
    Path(path).write_text("this ran")


class _Exploit:
    """Pickles into a call of a function that writes a file: a checkpoint that runs code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (_write_marker, (str(self.marker),))


def test_pickle_that_would_run_code_is_refused_in_one_line(
    tiny_model: TinyFactory, tmp_path: Path
) -> None:
    folder = _edited(tiny_model("distilbert", fmt="bin"), tmp_path)
    marker = tmp_path / "ran"
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    state["embeddings.word_embeddings.weight"] = _Exploit(marker)
    torch.save(state, folder / "pytorch_model.bin")
    with pytest.raises(AttnvizError) as info:
        load_encoder(folder)
    assert "never runs code stored in a checkpoint" in str(info.value)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_no_code_asks_transformers_for_remote_code() -> None:
    package = Path(__file__).parents[2] / "attnviz"
    for path in package.rglob("*.py"):
        assert "trust_remote_code" not in path.read_text(encoding="utf-8"), path


@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_half_precision_weights_are_computed_in_float32(
    tiny_model: TinyFactory, stored: str
) -> None:
    folder = tiny_model("electra", dtype=stored)
    encoder = load_encoder(folder)
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
    # transformers in float32 on the same (upcast) weights
    assert _compare(folder, "electra", PT_SENTENCE) <= TOLERANCE


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_asked_for_half_precision_computes_in_it(tiny_model: TinyFactory, dtype: str) -> None:
    folder = tiny_model("roberta")
    ids = torch.tensor([tokenize(load_tokenizer(folder), PT_SENTENCE, max_positions=60).ids])
    with torch.inference_mode():
        full = load_encoder(folder)(ids).attentions
        half = load_encoder(folder, dtype=dtype)(ids).attentions
    assert half.dtype == getattr(torch, dtype)
    assert (half.float() - full).abs().max().item() < 2e-2  # half precision, same attention


def test_unknown_dtype_and_uncomputable_half_are_refused_in_one_line(
    tiny_model: TinyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_model("bert")
    with pytest.raises(BadInput, match="dtype 'float64' is not one attnviz computes in"):
        load_encoder(folder, dtype="float64")

    from attnviz.model import encoder as model

    def no_half_kernel(*args: object, **kwargs: object) -> None:
        raise RuntimeError("\"LayerNormKernelImpl\" not implemented for 'Half'")

    monkeypatch.setattr(model.Encoder, "forward", no_half_kernel)
    with pytest.raises(BadInput) as info:
        load_encoder(folder, dtype="float16")
    assert "cannot compute the encoder in float16" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_query_that_may_see_nothing_gets_zeros_not_nan(tiny_model: TinyFactory) -> None:
    encoder = load_encoder(tiny_model("distilbert"))
    ids = torch.tensor([[101, 7592, 102], [101, 7592, 102]])  # (2, 3)
    mask = torch.tensor([[1, 1, 1], [0, 0, 0]])  # the second row hides every key
    with torch.inference_mode():
        out = encoder(ids, attention_mask=mask)
    assert not torch.isnan(out.attentions).any() and not torch.isnan(out.hidden_states).any()
    assert torch.all(out.attentions[:, 1] == 0)
    assert torch.allclose(out.attentions[:, 0].sum(-1), torch.ones(2, 4, 3))


def test_the_same_pickle_does_run_code_when_loaded_unsafely(tmp_path: Path) -> None:
    """The payload is real: plain unpickling runs it, so the refusal above can fail."""
    marker = tmp_path / "ran"
    path = tmp_path / "pytorch_model.bin"
    torch.save({"weight": _Exploit(marker)}, path)
    torch.load(path, weights_only=False)
    assert marker.read_text() == "this ran"


@pytest.mark.parametrize(
    ("family", "drop", "add", "expected"),
    [
        (
            "albert",
            "encoder.albert_layer_groups.0.albert_layers.0.ffn.bias",
            "encoder.albert_layer_groups.1.albert_layers.0.ffn.bias",
            "missing: encoder.albert_layer_groups.0.albert_layers.0.ffn.bias; "
            "unexpected: encoder.albert_layer_groups.1.albert_layers.0.ffn.bias",
        ),
        (
            "distilbert",
            "transformer.layer.1.sa_layer_norm.weight",
            "transformer.layer.2.sa_layer_norm.weight",
            "missing: transformer.layer.1.sa_layer_norm.weight; "
            "unexpected: transformer.layer.2.sa_layer_norm.weight",
        ),
        (
            "electra",
            "embeddings_project.weight",
            "embeddings_project.extra",
            "missing: embeddings_project.weight; unexpected: embeddings_project.extra",
        ),
    ],
)
def test_missing_and_unexpected_keys_are_named_as_the_family_stores_them(
    tiny_model: TinyFactory, tmp_path: Path, family: str, drop: str, add: str, expected: str
) -> None:
    from safetensors.torch import load_file, save_file

    folder = _edited(tiny_model(family), tmp_path)
    state = load_file(folder / "model.safetensors")
    state[add] = state.pop(drop)
    save_file(state, folder / "model.safetensors")
    with pytest.raises(AttnvizError, match=f"{DISPLAY[family]} encoder") as info:
        load_encoder(folder)
    assert expected in str(info.value)


def test_integer_weights_are_named_not_loaded(tiny_model: TinyFactory, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    folder = _edited(tiny_model("roberta"), tmp_path)
    state = load_file(folder / "model.safetensors")
    key = "encoder.layer.0.attention.self.query.bias"
    state[key] = state[key].long()
    save_file(state, folder / "model.safetensors")
    with pytest.raises(AttnvizError, match=f"not floating point: {key} \\(int64\\)"):
        load_encoder(folder)


@pytest.mark.slow  # every command on 5 families
@pytest.mark.parametrize(
    ("family", "name"),
    [
        ("roberta", "RoBERTa"),
        ("xlm-roberta", "XLM-RoBERTa"),
        ("distilbert", "DistilBERT"),
        ("electra", "ELECTRA"),
        ("albert", "ALBERT"),
    ],
)
def test_every_command_runs_on_each_family(
    family: str, name: str, tiny_model: TinyFactory, tmp_path: Path
) -> None:
    """info names the family; show, stats and explain give the family's own attention."""
    from typer.testing import CliRunner

    from attnviz import analyse
    from attnviz.cli import app

    folder = str(tiny_model(family))
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(app, list(args), env={"COLUMNS": "100"})
        assert result.exit_code == 0, (args, result.stderr)
        return result.stdout

    info = ok("info", "--model", folder)
    assert re.search(rf"family +{re.escape(name)}\b", info)
    text = "the bank refused the loan"
    record = json.loads(ok("show", text, "--model", folder, "--units", "tokens", "--json"))
    expected = analyse(text, model=folder).attentions[-1].mean(axis=0)
    np.testing.assert_allclose(record["weights"], expected, atol=1e-6)
    assert len(json.loads(ok("stats", text, "the loan", "--model", folder, "--json"))) > 0
    ok("explain", text, "--model", folder, "--token", "bank", "--lang", "en")
    ok("rollout", text, "--model", folder)

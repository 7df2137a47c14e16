"""Every head ablated: attnviz's batched runs against a loop of hooked transformers forwards.

Both compute logit(target) − logit(foil) of the next token after a 20-piece prompt with each
head's output zeroed in turn, on random checkpoints in the shapes of SmolLM2-135M (30 layers ×
9 heads) and Gemma 3 270M (18 × 4, vocabulary 262,144), float32, with 2 torch threads, both
models loaded before the clock. attnviz (`attnviz.model.ablation.head_effects`) runs the prompt
once, keeping each layer's input, and then every head of a layer (and of the layers before) in
one batch from that layer on. The reference is what a user writes with transformers: a forward
pre-hook on the layer's output projection (self_attn.o_proj) that zeroes the head's slice, one
whole forward per head (`logits_to_keep=1`: the last position's logits only), plus the clean
forward. The two must agree to 1e-3 (the tests hold them to 1e-4). Nothing downloads.

    python benchmarks/ablate.py [--rounds 3] [--only smollm2,gemma3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Gemma 3 270M's config.json, the sizes that matter here.
GEMMA3_270M = dict(
    hidden_size=640,
    intermediate_size=2048,
    num_hidden_layers=18,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=256,
    vocab_size=262144,
    max_position_embeddings=32768,
    query_pre_attn_scalar=256,
    sliding_window=512,
    rope_theta=1_000_000.0,
    rope_local_base_freq=10_000.0,
    tie_word_embeddings=True,
)
TARGET, FOIL = 40, 90  # two pieces of the test tokenizer


def write_gemma(folder: Path) -> Path:
    """A random Gemma3ForCausalLM in Gemma 3 270M's shape, float32, in `folder`."""
    import torch
    import transformers

    from tests.conftest import decoder_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    decoder_tokenizer(folder, bos=True)
    torch.manual_seed(0)
    config = transformers.Gemma3TextConfig(**GEMMA3_270M, initializer_range=0.3)
    transformers.Gemma3ForCausalLM(config).eval().save_pretrained(folder)
    return folder


def hooked_loop(model: Any, ids: list[int], nh: int, hs: int) -> tuple[float, Any]:
    """The reference: the clean forward, then one hooked forward per head."""
    import torch

    def difference(hook: Any = None, layer: int = 0) -> float:
        layers = model.model.layers if hasattr(model, "model") else model.transformer.h
        projection = layers[layer].self_attn.o_proj
        handle = projection.register_forward_pre_hook(hook) if hook is not None else None
        try:
            with torch.inference_mode():
                logits = model(torch.tensor([ids]), logits_to_keep=1).logits[0, -1]
        finally:
            if handle is not None:
                handle.remove()
        return float(logits[TARGET] - logits[FOIL])

    clean = difference()
    L = model.config.num_hidden_layers
    out = torch.zeros(L, nh)
    for layer in range(L):
        for h in range(nh):

            def zero(module: Any, args: tuple, h: int = h) -> tuple:
                x = args[0].clone()
                x[..., h * hs : (h + 1) * hs] = 0
                return (x,)

            out[layer, h] = difference(zero, layer)
    return clean, out


def measure(folder: Path, rounds: int) -> dict[str, float]:
    """Seconds of each (medians of `rounds`), and their largest difference."""
    import torch
    from transformers import AutoModelForCausalLM

    from attnviz.model.ablation import head_effects
    from attnviz.model.weights import load_encoder
    from attnviz.text.tokenize import load_tokenizer, tokenize
    from benchmarks.decoder import SHORT

    torch.set_num_threads(2)
    ids = tokenize(load_tokenizer(folder), SHORT, max_positions=8192).ids[:20]
    reference = AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ).eval()
    decoder = load_encoder(folder)
    nh, hs = decoder.config.num_heads, decoder.config.head_size
    ours, theirs, gap = [], [], 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        effects = head_effects(decoder, ids, TARGET, FOIL, method="zero")
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        clean, loop = hooked_loop(reference, ids, nh, hs)
        theirs.append(time.perf_counter() - start)
        gap = max(abs(effects.clean - clean), float((effects.logit_diffs - loop).abs().max()))
    assert gap <= 1e-3, gap
    return {
        "attnviz": statistics.median(ours),
        "transformers": statistics.median(theirs),
        "gap": gap,
        "heads": decoder.config.num_layers * nh,
        "pieces": len(ids),
    }


def rows(folder: Path, rounds: int, only: set[str]) -> list[tuple[str, dict[str, float]]]:
    """Each shape's measurement, its checkpoint written under `folder`."""
    from benchmarks.decoder import write_decoder

    out = []
    if "smollm2" in only:
        smol = write_decoder(folder / "smol-ablate", dtype="float32")
        out.append(("SmolLM2-135M's shape (30 × 9 heads)", measure(smol, rounds)))
    if "gemma3" in only:
        gemma = write_gemma(folder / "gemma-ablate")
        out.append(("Gemma 3 270M's shape (18 × 4 heads)", measure(gemma, rounds)))
    return out


def print_rows(measured: list[tuple[str, dict[str, float]]]) -> None:
    print("\n| every head zeroed, 20 pieces, 2 threads | attnviz s | hooked loop s | speed-up "
          "| target |")  # fmt: skip
    print("|---|---:|---:|---:|---|")
    for name, m in measured:
        ratio = m["transformers"] / m["attnviz"]
        print(
            f"| {name}, {m['heads']:.0f} heads | {m['attnviz']:.2f} | {m['transformers']:.2f} "
            f"| {ratio:.1f}× | ≥ 3×: {'met' if ratio >= 3 else 'MISSED'} (max gap "
            f"{m['gap']:.1e}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="smollm2,gemma3")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print_rows(rows(Path(folder), args.rounds, set(args.only.split(","))))


if __name__ == "__main__":
    main()

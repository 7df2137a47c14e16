"""Tokens per second of `attnviz.generate` against transformers' `generate`, the same model.

Both write the same number of tokens greedily after the same prompt, keeping every
step's attention (transformers: `output_attentions=True, return_dict_in_generate=True`,
eager attention), with one torch thread, in one process, alternately, medians of
`rounds`. `attnviz.generate` is timed whole (it reads the weights at each call, as a
script's call does); transformers' model is loaded once, before the clock, and so is the
model of the third row, attnviz's writing loop alone. The model is a random
LlamaForCausalLM in SmolLM2-135M's shape (benchmarks/decoder.py), stored in float32;
nothing downloads.

    python benchmarks/generate.py [--new 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PROMPT = "John thought: the train was full, but he found a free seat near the window"


def measure(folder: Path, new: int, rounds: int) -> dict[str, float]:
    """Tokens per second of each, and how many tokens each wrote (the same, greedy)."""
    import torch
    from transformers import AutoModelForCausalLM

    import attnviz
    from attnviz.model.weights import load_encoder
    from attnviz.model.writing import write
    from attnviz.text.tokenize import load_tokenizer, tokenize

    torch.set_num_threads(1)
    ids = tokenize(load_tokenizer(folder), PROMPT, max_positions=8192).ids
    reference = AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=torch.float32
    ).eval()
    attnviz.generate(PROMPT, model=folder, max_new=2)  # the files read once, into the OS cache
    decoder = load_encoder(folder)
    ours, loop, theirs = [], [], []
    written_ours = written_theirs = 0
    for _ in range(rounds):
        start = time.perf_counter()
        g = attnviz.generate(PROMPT, model=folder, max_new=new)
        ours.append(len(g.new_ids) / (time.perf_counter() - start))
        written_ours = len(g.new_ids)
        start = time.perf_counter()
        written = write(decoder, ids, max_new=new, eos_ids=[2])  # the loop alone, loaded once
        loop.append(len(written.ids) / (time.perf_counter() - start))
        start = time.perf_counter()
        with torch.inference_mode():
            out = reference.generate(
                torch.tensor([ids]),
                max_new_tokens=new,
                do_sample=False,
                output_attentions=True,
                return_dict_in_generate=True,
            )
        written_theirs = out.sequences.shape[1] - len(ids)
        theirs.append(written_theirs / (time.perf_counter() - start))
    return {
        "attnviz": statistics.median(ours),
        "loop": statistics.median(loop),
        "transformers": statistics.median(theirs),
        "written_attnviz": written_ours,
        "written_transformers": written_theirs,
        "prompt": len(ids),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=32, help="tokens written per run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.decoder import write_decoder

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_decoder(Path(tmp) / "smol", dtype="float32")
        result = measure(folder, args.new, args.rounds)
    print_rows(result, args.new)


def print_rows(result: dict[str, float], new: int) -> None:
    ratio = result["attnviz"] / result["transformers"]
    print(
        f"\nWriting {new} tokens after {result['prompt']:.0f} pieces, greedy, every step's "
        "attention kept, 1 thread; a random model in SmolLM2-135M's shape (30 layers, 9 × 3 "
        "heads)\n"
    )
    print("| generate | tokens/s | tokens written | target |")
    print("|---|---:|---:|---|")
    print(
        f"| attnviz.generate | {result['attnviz']:.1f} | {result['written_attnviz']:.0f} "
        f"| ≥ 1× transformers: {ratio:.2f}× {'met' if ratio >= 1 else 'MISSED'} |"
    )
    loop = result["loop"] / result["transformers"]
    print(
        f"| attnviz's writing loop alone (the model loaded once) | {result['loop']:.1f} "
        f"| {result['written_attnviz']:.0f} | {loop:.2f}× transformers |"
    )
    print(
        f"| transformers generate(output_attentions=True) | {result['transformers']:.1f} "
        f"| {result['written_transformers']:.0f} | |"
    )


if __name__ == "__main__":
    main()

"""Attention extraction throughput: attnviz's encoder against transformers' BertModel.

Both run the same padded batches of sentences of about `tokens` pieces, with the
same batch size and torch threads, in alternating rounds; each reports
sentences per second and GFLOP/s. A square float32 matmul at the same threads
is the roof. Run on its own with `python benchmarks/throughput.py`, or through
`make bench`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from attnviz.pipeline import Corpus, prepare_corpus
from attnviz.text.samples import sample_sentences


@dataclass(frozen=True)
class Throughput:
    name: str
    seconds: float  # median over rounds, for all sentences
    sentences: int
    gflop: float  # total work for all sentences

    @property
    def per_second(self) -> float:
        return self.sentences / self.seconds

    @property
    def gflops(self) -> float:
        return self.gflop / self.seconds


def corpus_of(count: int, tokens: int) -> Corpus:
    """`count` sentences of `tokens` pieces or a few less, made of the sample sentences."""
    from attnviz.model.locate import locate
    from attnviz.text.tokenize import load_tokenizer

    tokenizer = load_tokenizer(locate(None).folder)
    samples = sample_sentences()
    texts = []
    for i in range(count):
        words: list[str] = []
        j = i
        while len(tokenizer.encode(" ".join(words))) < tokens:
            words.extend(samples[j % len(samples)].split())
            j += 1
        while len(tokenizer.encode(" ".join(words))) > tokens:
            words.pop()
        texts.append(" ".join(words))
    return prepare_corpus(texts)


def work_gflop(corpus: Corpus) -> float:
    """2 × encoder linear parameters × tokens + 4 × T² × hidden × layers, summed."""
    cfg = corpus.config
    C, inter = int(cfg["hidden_size"]), int(cfg["intermediate_size"])
    L = int(cfg["num_hidden_layers"])
    linear = L * (4 * C * C + 2 * C * inter)
    total = 0.0
    for pieces in corpus.pieces:
        T = len(pieces)
        total += 2 * linear * T + 4 * T * T * C * L
    return total / 1e9


def _batches(corpus: Corpus, batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The corpus in padded batches of `batch_size`, as transformers takes them."""
    from attnviz.pipeline import padded

    pad = int(corpus.config.get("pad_token_id") or 0)
    out = []
    for start in range(0, len(corpus.pieces), batch_size):
        ids, _, real = padded(corpus.pieces[start : start + batch_size], pad)
        out.append((ids, real))
    return out


def ours(corpus: Corpus, batch_size: int) -> Callable[[], None]:
    from attnviz.model.weights import load_encoder
    from attnviz.perf import reuse_freed_memory
    from attnviz.pipeline import compute_batches

    reuse_freed_memory()  # as `attnviz stats` does

    encoder = load_encoder(corpus.model.folder, corpus.config)

    def run() -> None:
        batches = compute_batches(corpus, batch_size=batch_size, device="cpu", encoder=encoder)
        for batch in batches:
            assert batch.attentions.ndim == 5

    return run


def transformers_eager(corpus: Corpus, batch_size: int) -> Callable[[], None]:
    from transformers import BertModel

    model = BertModel.from_pretrained(str(corpus.model.folder), attn_implementation="eager")
    model.eval()
    batches = _batches(corpus, batch_size)

    def run() -> None:
        with torch.inference_mode():
            for ids, real in batches:
                out = model(ids, attention_mask=real, output_attentions=True)
                attentions = torch.stack(out.attentions).numpy()  # (L, B, H, T, T)
                assert attentions.ndim == 5

    return run


def matmul_roof(size: int = 2048, repeats: int = 10) -> float:
    """GFLOP/s of a size × size float32 matmul at the current thread count (best run)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size**3 / min(times) / 1e9


ENGINES = {"attnviz": ours, "transformers": transformers_eager}


def _worker(engine: str, count: int, tokens: int, batch_size: int, threads: int) -> float:
    """Seconds for one timed pass of `engine` over the corpus, after a warm-up pass."""
    torch.set_num_threads(threads)
    if engine == "roof":
        return matmul_roof()
    run = ENGINES[engine](corpus_of(count, tokens), batch_size)
    run()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _in_fresh_process(engine: str, count: int, tokens: int, batch_size: int, threads: int) -> float:
    command = [
        sys.executable,
        __file__,
        "--worker",
        engine,
        *("--sentences", str(count), "--tokens", str(tokens)),
        *("--batch-size", str(batch_size), "--threads", str(threads)),
    ]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(result.stdout.strip().splitlines()[-1])


def measure(count: int, tokens: int, batch_size: int, threads: int, rounds: int) -> dict:
    """Both engines, each in a fresh process per round, alternating; medians over rounds.

    Separate processes keep one engine's memory and thread state from helping or
    hurting the other, as for a user who runs either attnviz or a notebook.
    """
    times: dict[str, list[float]] = {name: [] for name in ENGINES}
    for _ in range(rounds):
        for name in ENGINES:
            times[name].append(_in_fresh_process(name, count, tokens, batch_size, threads))
    corpus = corpus_of(count, tokens)
    gflop = work_gflop(corpus)
    results = {
        name: Throughput(name, statistics.median(t), len(corpus.pieces), gflop)
        for name, t in times.items()
    }
    roof = max(_in_fresh_process("roof", count, tokens, batch_size, threads) for _ in range(2))
    return {
        "results": results,
        "roof": roof,
        "mean_tokens": statistics.mean(len(p) for p in corpus.pieces),
        "threads": threads,
        "batch_size": batch_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", choices=[*ENGINES, "roof"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(_worker(args.worker, args.sentences, args.tokens, args.batch_size, args.threads))
        return
    m = measure(args.sentences, args.tokens, args.batch_size, args.threads, args.rounds)
    print(
        f"{args.sentences} sentences, mean {m['mean_tokens']:.0f} pieces, batch {m['batch_size']}, "
        f"{m['threads']} threads; matmul roof {m['roof']:.1f} GFLOP/s"
    )
    for r in m["results"].values():
        print(
            f"{r.name:13} {r.seconds:6.2f} s  {r.per_second:7.1f} sentences/s  "
            f"{r.gflops:6.1f} GFLOP/s ({r.gflops / m['roof']:.0%} of roof)"
        )
    a, t = m["results"]["attnviz"], m["results"]["transformers"]
    print(f"attnviz / transformers: {a.per_second / t.per_second:.2f}×")


if __name__ == "__main__":
    main()

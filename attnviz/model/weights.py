"""Read a checkpoint's weights and load them into the from-scratch encoder or decoder.

Weights are read straight from safetensors (or a `pytorch_model.bin` through
`torch.load(weights_only=True)`), sharded or not, never through transformers' model
classes, and never with remote code. Each family's names are mapped to this project's
by one pure function (`convert_state_dict`), and loading checks every key and shape.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeGuard, TypeVar

from attnviz.errors import PASS_THROUGH, AttnvizError, BadInput, quiet_panics, short_reason
from attnviz.limits import INDEX_BYTES, SAFETENSORS_HEADER_BYTES, shown
from attnviz.model.config import DecoderConfig
from attnviz.model.families import DECODERS, FAMILIES, describe, encoder_config_for, read_config
from attnviz.model.gguf.convert import source as gguf_source
from attnviz.model.gguf.convert import state_dict as gguf_state_dict
from attnviz.reading import open_regular, read_json

if TYPE_CHECKING:
    import torch

    from attnviz.model.decoder import Decoder
    from attnviz.model.encoder import Encoder

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# A sharded checkpoint: an index naming the file that holds each tensor.
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
MAX_SHARDS = 4096
DTYPES = ("float32", "float16", "bfloat16")

V = TypeVar("V")


def weight_files(folder: Path) -> list[Path]:
    """The files that hold a checkpoint's weights: one, or the shards its index names.

    An index is input from a stranger: its shard names must be plain file names in the
    folder, and every one must exist.
    """
    for name in (*WEIGHT_FILES, *INDEX_FILES):
        path = folder / name
        if path.exists() and not path.is_file():
            raise AttnvizError(
                f"{path} is not a regular file (a folder, a device or a pipe): put the "
                "checkpoint's weights there, as saved by transformers"
            )
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return [folder / name]
    for name in INDEX_FILES:
        index = folder / name
        if index.is_file():
            return _shards(index)
    raise AttnvizError(
        f"{folder} has no model.safetensors or pytorch_model.bin (nor a sharded index): put the "
        "checkpoint's weights next to its config.json"
    )


def _shards(index: Path) -> list[Path]:
    def bad(why: str) -> AttnvizError:
        return AttnvizError(f"cannot read {index}: {why}; restore or re-download the checkpoint")

    raw = read_json(index, INDEX_BYTES, "index of shards")
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise bad("it has no weight_map of tensor names to files")
    if not all(isinstance(v, str) for v in weight_map.values()):
        raise bad("its weight_map holds values that are not file names")
    names = sorted(set(weight_map.values()))
    if len(names) > MAX_SHARDS:
        raise bad(f"it names {len(names)} shards (attnviz reads at most {MAX_SHARDS})")
    suffix = ".safetensors" if index.name.startswith("model.safetensors") else ".bin"
    paths = []
    for name in names:
        if Path(name).name != name or name in (".", "..") or not name.endswith(suffix):
            raise bad(f"shard {name[:60]!r} is not a {suffix} file name in its folder")
        path = index.parent / name
        if path.exists() and not path.is_file():
            raise bad(f"its shard {name} is not a regular file")
        if not path.is_file():
            raise bad(f"its shard {name} is missing")
        paths.append(path)
    return paths


def read_state_dict(folder: Path, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors, from safetensors or (safely) pytorch_model.bin, shards merged;
    for a folder converted from a GGUF file, dequantized (or kept from a run before).

    `dtype`: each floating-point tensor of a safetensors file is converted to it as it is
    read, so that a bfloat16 checkpoint computed in float32 never holds both copies of every
    weight at once (SmolLM2-135M: 0.27 GB less at the peak of loading)."""
    about = gguf_source(folder)
    if about is not None:
        return gguf_state_dict(folder, about)
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(folder):
        state.update(_read_file(path, dtype))
    return state


def _read_file(path: Path, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The tensors of one weights file: safetensors (floats converted to `dtype` one tensor at
    a time, when given), or a weights-only pickle.

    The file is opened once, checked to be a regular file (`reading.open_regular`), and read
    through that descriptor: a FIFO or device put in its place cannot hang or flood the read.
    """
    with os.fdopen(open_regular(path, "weights file"), "rb") as handle:
        if path.suffix == ".safetensors":
            return _read_safetensors(path, handle.fileno(), dtype)
        return _read_pickle(path, handle)


def _read_safetensors(
    path: Path, fd: int, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, floats converted to `dtype` when given.

    The library maps the whole file and copies each tensor out of the mapping; every page read
    stays in the process's memory until the file is closed. So the file is opened anew for
    each MAPPED_BYTES of tensors: the pages read are let go as the weights are built, and the
    peak holds the weights once (plus MAPPED_BYTES), not twice.
    """
    # The library takes a file name: /proc/self/fd/N names the file already opened and checked.
    opened = Path(f"/proc/self/fd/{fd}")
    name = opened if opened.exists() else path
    try:
        from safetensors import safe_open

        with quiet_panics():
            with safe_open(name, framework="pt") as weights:
                keys = list(weights.offset_keys())  # in file order
                sizes = [_nbytes(weights.get_slice(key)) for key in keys]  # the header only
            state: dict[str, torch.Tensor] = {}
            done = 0
            while done < len(keys):
                with safe_open(name, framework="pt") as weights:
                    mapped = 0
                    while done < len(keys) and (not mapped or mapped + sizes[done] <= MAPPED_BYTES):
                        tensor = weights.get_tensor(keys[done])
                        if (
                            dtype is not None
                            and tensor.is_floating_point()
                            and tensor.dtype != dtype
                        ):
                            tensor = tensor.to(dtype)  # the stored copy goes before the next
                        state[keys[done]] = tensor
                        mapped += sizes[done]
                        done += 1
            return state
    except MemoryError as exc:  # the weights, not the text, are too big: said so here
        raise _out_of_memory(path, exc) from exc
    except PASS_THROUGH:
        raise
    except BaseException as exc:  # a Rust panic too (see PASS_THROUGH)
        import errno

        from attnviz.errors import exhaustion

        if exhaustion(exc) or getattr(exc, "errno", None) == errno.ENOMEM or "error 12" in str(exc):
            raise _out_of_memory(path, exc) from exc
        raise AttnvizError(
            f"cannot read weights from {path} ({short_reason(exc)}): the "
            "file is corrupt or incomplete; re-download it"
        ) from exc


def _out_of_memory(path: Path, exc: BaseException) -> AttnvizError:
    """A mapping or a tensor refused for memory while reading `path`: the file is fine, and
    the text has nothing to do with it (the generic line would say to shorten it)."""
    reason = short_reason(exc) if str(exc) else type(exc).__name__
    return AttnvizError(
        f"out of memory reading the weights of {path} ({reason}): this process may not hold "
        "them (an address-space limit such as ulimit -v, or too little free memory); raise the "
        "limit, close other programs, or use a smaller model"
    )


def _nbytes(part: Any) -> int:
    """The bytes a tensor of a safetensors file holds, from its slice's header entry."""
    count = _DTYPE_BITS.get(part.get_dtype(), 64)
    for n in part.get_shape():
        count *= n
    return count // 8


def _read_pickle(path: Path, handle: BinaryIO) -> dict[str, torch.Tensor]:
    import torch

    try:
        with warnings.catch_warnings():  # torch's advice on legacy files is not for the user
            warnings.simplefilter("ignore")
            state = torch.load(handle, map_location="cpu", weights_only=True)
    except MemoryError as exc:
        raise _out_of_memory(path, exc) from exc
    except PASS_THROUGH:
        raise
    except BaseException as exc:
        raise AttnvizError(
            f"cannot read weights from {path}: it is corrupt, or not a plain PyTorch "
            "state dict (attnviz never runs code stored in a checkpoint); re-download it "
            "or convert it to model.safetensors"
        ) from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AttnvizError(
            f"cannot read weights from {path}: it does not hold a state dict of "
            "tensors; save the model with save_pretrained"
        )
    return state


def _rules(pairs: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """Prefix-rewriting rules from `{i}` templates: the number is captured and put back."""
    return [
        (re.compile("^" + re.escape(src).replace(r"\{i\}", r"(\d+)")), dst.replace("{i}", r"\1"))
        for src, dst in pairs
    ]


# Parts of a checkpoint that are not the encoder: pooler, MLM / NSP heads, buffers.
# (Patterns as text: `re` compiles and caches them on first use.)
_IGNORED = r"^(pooler\.|cls\.|embeddings\.position_ids$|embeddings\.token_type_ids$)"


def _layout(model_type: str) -> tuple[str, str, list[tuple[str, str]], str]:
    """(family name, prefix in a *For* checkpoint, name templates, names to ignore)."""
    if model_type in FAMILIES:
        family = FAMILIES[model_type]
        return family.name, family.prefix, family.names, _IGNORED
    decoder = DECODERS[model_type]
    return decoder.name, decoder.prefix, decoder.names, decoder.ignored


# Per model_type: checkpoint names -> ours, and ours -> checkpoint names; compiled on
# first use, since most commands never rename a weight.
@cache
def _to_ours(model_type: str) -> list[tuple[re.Pattern[str], str]]:
    return _rules(_layout(model_type)[2])


@cache
def _to_hf(model_type: str) -> list[tuple[re.Pattern[str], str]]:
    return _rules([(ours, hf) for hf, ours in _layout(model_type)[2]])


# A *ForCausalLM checkpoint's LM head, beside the decoder's prefix: (V, C), as nn.Linear.
_LM_HEAD = "lm_head.weight"

# Slots 1.. of a shared-layer encoder (ALBERT): the checkpoint stores only slot 0.
_LATER_SLOT = r"^layers\.(?!0\.)\d+\."


def _rename(name: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in rules:
        renamed, count = pattern.subn(replacement, name)
        if count:
            return renamed
    return name


def hf_name(name: str, model_type: str = "bert") -> str:
    """The checkpoint's (transformers') name of one of this project's parameter names."""
    return _rename(name, _to_hf(model_type))


def convert_state_dict(
    state: dict[str, V], model_type: str = "bert", decoder: DecoderConfig | None = None
) -> dict[str, V]:
    """Map a transformers state dict of `model_type` onto `attnviz.model.encoder.Encoder`'s names.

    A `*For*` checkpoint keeps its encoder under the family's prefix (`bert.`,
    `roberta.`, `distilbert.`, `electra.`, `albert.`); everything else in it (MLM,
    classification, QA, discriminator heads, Gemma 3's vision tower) is not the encoder
    and is dropped; a decoder's `lm_head.weight` is kept (`load_encoder` decides whether
    the model reads it). Unknown keys are kept under their own name so that the strict
    check reports them. Phi-3's fused weights are split by `decoder`'s widths.
    """
    prefix, ignored = _prefix(state, model_type), _layout(model_type)[3]
    prefixed = any(key.startswith(prefix) for key in state)
    converted: dict[str, V] = {}
    for key, tensor in state.items():
        if key == _LM_HEAD and model_type not in FAMILIES:  # a decoder's own LM head, if any
            converted[key] = tensor
            continue
        if prefixed and not key.startswith(prefix):
            continue
        name = key.removeprefix(prefix)
        if re.match(ignored, name):
            continue
        name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
        split = DECODERS[model_type].split if model_type in DECODERS else None
        parts = split(name, tensor, decoder) if split is not None else [(name, tensor)]
        for part, value in parts:
            converted[_rename(part, _to_ours(model_type))] = value
    return converted


def _prefix(state: dict[str, Any], model_type: str) -> str:
    """Where a checkpoint of `model_type` keeps the model: the family's prefix, or the one of
    Gemma 3's multimodal layouts that `state` uses."""
    for prefix in DECODERS[model_type].prefixes if model_type in DECODERS else ():
        if any(key.startswith(prefix) for key in state):
            return prefix
    return _layout(model_type)[1]


def _stored_name(name: str, model_type: str) -> str:
    """The checkpoint's name of one of ours, where the family fuses several into one (GPT-2's
    q, k and v in one c_attn, Phi-3's in one qkv_proj)."""
    hf = hf_name(name, model_type)
    fused = DECODERS[model_type].stored_name if model_type in DECODERS else None
    return fused(hf) if fused is not None else hf


def _stored_shape(
    key: str, ours: tuple[int, ...], model_type: str, decoder: DecoderConfig | None = None
) -> tuple[int, ...]:
    """The shape a checkpoint stores for `key` when ours is `ours` (GPT-2: fused, transposed;
    Phi-3: fused)."""
    stored = DECODERS[model_type].stored_shape if model_type in DECODERS else None
    return stored(key, ours, decoder) if stored is not None else ours


def _check_keys(
    expected: dict[str, torch.Tensor],
    got: dict[str, torch.Tensor],
    original: dict[str, str],
    folder: Path,
    model_type: str,
    stored: dict[str, torch.Tensor] | None = None,
    decoder: DecoderConfig | None = None,
) -> None:
    """Strict key, shape and dtype check; names are reported as the checkpoint spells them.

    `original` maps each converted name back to the checkpoint's key; a missing
    key has none, so it gets its transformers name (with the family's prefix if
    the file uses it). `stored` (the checkpoint's own tensors) gives a wrong shape as
    stored, where the conversion split or transposed it (GPT-2).
    """
    family_name = _layout(model_type)[0]
    family_prefix = _prefix(dict.fromkeys(original.values()), model_type)
    kind = "encoder" if model_type in FAMILIES else "decoder"
    uses_prefix = any(key.startswith(family_prefix) for key in original.values())
    prefix = family_prefix if uses_prefix else ""
    missing = sorted({prefix + _stored_name(k, model_type) for k in set(expected) - set(got)})
    unexpected = sorted({original[k] for k in set(got) - set(expected)})

    def shape_of(k: str) -> tuple[int, ...]:
        if stored is not None and original[k] in stored:
            return tuple(stored[original[k]].shape)
        return tuple(got[k].shape)

    wrong = sorted(
        {
            f"{original[k]} {shape_of(k)} (expected "
            f"{_stored_shape(original[k], tuple(expected[k].shape), model_type, decoder)})"
            for k in set(expected) & set(got)
            if got[k].shape != expected[k].shape
        }
    )
    not_float = sorted(
        {
            f"{original[k]} ({str(got[k].dtype).removeprefix('torch.')})"
            for k in set(expected) & set(got)
            if not got[k].is_floating_point()
        }
    )
    problems = []
    for label, items in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("wrong shape", wrong),
        ("not floating point", not_float),
    ):
        if items:
            shown = ", ".join(items[:4]) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
            problems.append(f"{label}: {shown}")
    if problems:
        raise AttnvizError(
            f"the weights in {folder} do not fit a {family_name} {kind} with its config.json "
            f"({'; '.join(problems)}): check that config.json and the weights belong together"
        )


@contextlib.contextmanager
def _without_random_init() -> Iterator[None]:
    """Turn torch.nn.init's fills into no-ops while modules are built on the meta device.

    The weights are replaced from the checkpoint anyway; on the meta device the
    fills would only cost time (they pull in torch's compiler stack).
    """
    from torch.nn import init

    names = ("normal_", "uniform_", "kaiming_uniform_", "ones_", "zeros_", "trunc_normal_")
    saved = {name: getattr(init, name) for name in names}
    for name in names:
        setattr(init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def compute_dtype(dtype: str | None) -> torch.dtype:
    """The torch dtype for `dtype` (None is float32); BadInput for any other name."""
    import torch

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    if dtype is None:
        return torch.float32
    if dtype not in dtypes:
        raise BadInput(
            f"{{dtype}} {dtype!r} is not one attnviz computes in: use float32 (the default), "
            "float16 or bfloat16",
            param="dtype",
        )
    return dtypes[dtype]


def load_encoder(
    folder: Path, config: dict[str, Any] | None = None, dtype: str | None = None
) -> Encoder | Decoder:
    """Build the from-scratch encoder (or decoder) for `folder` and load its weights, strictly.

    `config` is the folder's config.json when the caller has already read it.
    Weights stored in float16 or bfloat16 are computed in float32 unless `dtype`
    ("float32", "float16" or "bfloat16") asks otherwise.
    """
    import torch

    from attnviz.model.decoder import Decoder
    from attnviz.model.encoder import Encoder

    target = compute_dtype(dtype)
    raw_config = config if config is not None else read_config(folder)
    shape = describe(raw_config)
    cfg = encoder_config_for(shape)
    stored = read_state_dict(folder, target)
    state = convert_state_dict(stored, shape.model_type, shape.decoder)
    original = convert_state_dict({key: key for key in stored}, shape.model_type, shape.decoder)
    # A decoder reads the checkpoint's LM head unless it ties the head to the embedding
    # (as transformers does); a checkpoint without one still gives every attention weight.
    head = shape.decoder is not None and not shape.decoder.tie_word_embeddings
    head = head and _LM_HEAD in state
    if not head:
        state.pop(_LM_HEAD, None)
        original.pop(_LM_HEAD, None)
    encoder: Encoder | Decoder
    with torch.device("meta"), _without_random_init():
        # no memory, no random initialisation
        encoder = Decoder(shape.decoder, head) if shape.decoder is not None else Encoder(cfg)
    expected = encoder.state_dict()
    if cfg.shared_layers:  # one stored layer fills every slot
        expected = {k: v for k, v in expected.items() if not re.match(_LATER_SLOT, k)}
    _check_keys(expected, state, original, folder, shape.model_type, stored, shape.decoder)
    state = {k: v.to(target) for k, v in state.items()}
    if cfg.shared_layers:
        state = _fill_slots(state, cfg.num_layers)
    encoder.load_state_dict(state, strict=True, assign=True)
    encoder.eval()
    encoder.fuse_projections()  # one Q/K/V matmul per layer
    if target != torch.float32:
        _check_computes(encoder, dtype)
    return encoder


def load_writer(
    folder: Path, config: dict[str, Any] | None, dtype: str | None, *, to: str
) -> Decoder:
    """The decoder in `folder` with its LM head (`load_encoder`), for a caller that has refused
    an encoder already; a decoder without its head is refused, saying it is needed `to` (e.g.
    "write with it")."""
    from attnviz.model.decoder import Decoder

    decoder = load_encoder(folder, config, dtype)
    assert isinstance(decoder, Decoder)  # the caller refused an encoder
    if not decoder.can_write:
        raise AttnvizError(
            f"{folder} holds a decoder without its LM head (no lm_head.weight, "
            "and config.json does not tie it to the embedding): save the model with its head "
            f"(AutoModelForCausalLM ... save_pretrained) to {to}"
        )
    return decoder


def _fill_slots(state: dict[str, V], num_layers: int) -> dict[str, V]:
    """Slot 0's tensors under every slot's name, for a module shared by all slots."""
    filled = dict(state)
    for key, tensor in state.items():
        if key.startswith("layers.0."):
            for i in range(1, num_layers):
                filled[f"layers.{i}." + key.removeprefix("layers.0.")] = tensor
    return filled


def _check_computes(encoder: Encoder | Decoder, dtype: str | None) -> None:
    """Run two pieces through the encoder: an old torch may lack half-precision CPU kernels."""
    import torch

    try:
        with torch.inference_mode():
            encoder(torch.zeros(1, 2, dtype=torch.long))
    except (RuntimeError, NotImplementedError) as exc:
        raise BadInput(
            f"this torch cannot compute the encoder in {dtype} on this machine "
            f"({short_reason(exc)}): use float32 (the default) or bfloat16"
        ) from exc


MAPPED_BYTES = 64 * 2**20  # a safetensors file's data read per opening (_read_safetensors)

# A safetensors file starts with its header's length (8 bytes, little-endian) and the header:
# JSON mapping each tensor's name to its dtype, shape and byte range in the data that follows.
# Bits per number of each dtype the safetensors library loads into torch (F6_* it cannot).
_DTYPE_BITS = {
    **dict.fromkeys(("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0"), 8),
    **dict.fromkeys(("F8_E4M3FNUZ", "F8_E5M2FNUZ"), 8),
    **dict.fromkeys(("I16", "U16", "F16", "BF16"), 16),
    **dict.fromkeys(("I32", "U32", "F32"), 32),
    **dict.fromkeys(("I64", "U64", "F64", "C64"), 64),
    "F4": 4,
}
_NOT_FLOAT = ("BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "C64")


def safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Each tensor's shape in a safetensors file, from its header, read with the standard
    library (the safetensors package opens it for numpy, and imports numpy to do so).

    The header is checked as the safetensors library checks it when the weights are
    loaded, so that what `info` counts is what `show` loads: a header longer than the file
    or than the format allows, not a JSON object, a tensor without a known dtype, a shape
    or a byte range, a byte range that does not hold exactly its shape's numbers, or ranges
    that leave a gap, overlap or do not end where the file does raise ValueError. A file
    that is not a regular one is refused (AttnvizError, see `reading.open_regular`).
    """
    return {key: shape for key, (_, shape) in _safetensors_header(path).items()}


def _safetensors_header(path: Path) -> dict[str, tuple[str, list[int]]]:
    """(dtype, shape) of each tensor in a safetensors file, its header checked (see above)."""
    with os.fdopen(open_regular(path, "weights file"), "rb") as file:
        data = os.fstat(file.fileno()).st_size - 8
        head = file.read(8)
        if len(head) != 8:
            raise ValueError("shorter than a safetensors header")
        (size,) = struct.unpack("<Q", head)
        if size > min(data, SAFETENSORS_HEADER_BYTES):
            raise ValueError(f"its header claims {size:,} bytes, more than the file holds")
        raw = file.read(size)
    if len(raw) != size:
        raise ValueError("it is shorter than its header says")
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("its header is nested too deeply") from None
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    data -= size
    tensors: dict[str, tuple[str, list[int]]] = {}
    spans: list[tuple[int, int, str]] = []
    for key, entry in header.items():
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise ValueError("its __metadata__ is not a map of text")
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        span = entry.get("data_offsets") if isinstance(entry, dict) else None
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if not (_whole_numbers(shape) and _whole_numbers(span) and len(span) == 2):
            raise ValueError(
                f"tensor {shown(key, 60)} has no valid shape and byte range in the header (each "
                "a list of whole numbers of at least 0)"
            )
        if not isinstance(dtype, str) or dtype not in _DTYPE_BITS:
            raise ValueError(
                f"tensor {shown(key, 60)} has dtype {shown(dtype, 30)}, which is not a "
                "safetensors dtype"
            )
        bits = _DTYPE_BITS[dtype]
        for n in shape:
            bits *= n  # Python ints: a lying shape cannot wrap around
        if bits % 8 or span[1] < span[0] or span[1] - span[0] != bits // 8:
            raise ValueError(
                f"tensor {key!r} of shape {shown(shape, 40)} and dtype {dtype} does not fill "
                f"its byte range {shown(span, 40)}"
            )
        tensors[key] = (dtype, shape)
        spans.append((span[0], span[1], key))
    end = 0
    for start, stop, key in sorted(spans):
        if start != end:
            raise ValueError(f"tensor {key!r} overlaps another or leaves a gap before it")
        end = stop
    if end != data:
        raise ValueError(
            f"its tensors hold {end:,} bytes of data but the file has {data:,} after the header"
        )
    return tensors


def _whole_numbers(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
    )


def count_parameters(folder: Path) -> int:
    """The number of encoder parameters in a checkpoint (pooler and heads excluded).

    ALBERT's shared layer counts once. For safetensors only the file header is read,
    so this needs no torch; the header is checked as loading checks it, and a weight
    that loading would refuse as not floating point is refused here too, so a file
    `show` cannot load is never counted.
    """
    described = describe(read_config(folder))
    model_type = described.model_type
    shapes: dict[str, list[int]] = {}
    dtypes: dict[str, str] = {}
    about = gguf_source(folder)
    if about is not None:  # a GGUF file's tensors, from its header (all dequantize to float)
        shapes = dict(about["shapes"])
        dtypes = dict.fromkeys(shapes, "F32")
    for path in weight_files(folder) if about is None else []:
        if path.suffix != ".safetensors":
            for key, tensor in _read_file(path).items():
                shapes[key] = list(tensor.shape)
                dtypes[key] = "F32" if tensor.is_floating_point() else "I64"
            continue
        try:
            header = _safetensors_header(path)
        except (OSError, ValueError) as exc:
            raise AttnvizError(
                f"cannot read weights from {path} ({short_reason(exc)}): the file is corrupt; "
                "re-download it"
            ) from exc
        shapes.update({key: shape for key, (_, shape) in header.items()})
        dtypes.update({key: dtype for key, (dtype, _) in header.items()})
    converted = convert_state_dict(shapes, model_type, described.decoder)
    stored = convert_state_dict({key: key for key in shapes}, model_type, described.decoder)
    not_float = sorted({stored[k] for k in converted if dtypes[stored[k]] in _NOT_FLOAT})
    if not_float:
        listed = ", ".join(f"{key} ({dtypes[key]})" for key in not_float[:4])
        raise AttnvizError(
            f"the weights in {folder} hold tensors that are not floating point ({listed}): "
            "they are not a model's weights; re-download them"
        )
    total = 0
    for shape in converted.values():
        count = 1
        for size in shape:
            count *= size
        total += count
    return total

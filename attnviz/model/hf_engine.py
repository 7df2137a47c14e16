"""The transformers engine: transformers' own eager model computes the attention of a model
type attnviz does not re-implement (DeBERTa-v2, MPNet, ModernBERT, OLMo, Falcon, ...).

`load_model` reads a local folder only (`local_files_only=True`), safetensors first or a
weights-only torch file, never running code stored with a checkpoint (a config that
asks for it, `auto_map`, is refused first); the config has been checked by
`model.foreign.describe_foreign` before (sizes, attention, no remote code), and the weight
files are checked here before transformers reads them (regular files, valid safetensors
headers, at most `WEIGHT_BYTES`). `attentions` runs it with `attn_implementation="eager"`
and `output_attentions=True` and returns the weights as attnviz holds them,
`(L, B, H, T, T)`. Nothing here can explain the steps: the model's internals are
transformers'.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import (
    OUT_OF_MEMORY,
    PASS_THROUGH,
    AttnvizError,
    exhausted,
    exhaustion,
    short_reason,
)
from attnviz.limits import COMPUTED_TABLE_NUMBERS, amount
from attnviz.model.foreign import NAMES, describe_foreign, model_class

if TYPE_CHECKING:
    import torch

# The weight files transformers' engine reads at most (on disk): a 7B model in bfloat16 is
# 14 GB. Checked by the files' sizes before a byte is read.
WEIGHT_BYTES = 32 * 2**30
_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")


def check_weights(folder: Path) -> bool:
    """Check the weight files transformers will read: regular files (`weights.weight_files`),
    safetensors headers that hold what they say, and `WEIGHT_BYTES` at most in all. True
    when they are safetensors (else a torch file, read weights-only)."""
    from attnviz.model.weights import weight_files

    files = weight_files(folder)
    total = sum(path.stat().st_size for path in files)
    if total > WEIGHT_BYTES:
        raise AttnvizError(
            f"the weights in {folder} take {amount(total)}, more than transformers' engine "
            f"loads ({amount(WEIGHT_BYTES)}): use a smaller model"
        )
    safetensors = all(path.suffix == ".safetensors" for path in files)
    for path in files if safetensors else []:
        _shapes(path)
    return safetensors


def _shapes(path: Path) -> dict[str, list[int]]:
    """The tensors' shapes in the safetensors file `path`, its header checked; one line
    when it is corrupt."""
    from attnviz.model.weights import safetensors_shapes

    try:
        return safetensors_shapes(path)
    except (OSError, ValueError) as exc:
        raise AttnvizError(
            f"cannot read weights from {path} ({short_reason(exc)}): the file is corrupt; "
            "re-download it"
        ) from exc


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings, progress bars and load reports are not for attnviz's user."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    bars = logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def load_model(folder: Path, config: dict[str, Any], dtype: str = "float32") -> Any:
    """transformers' base model for `folder` (AutoModel), eager attention, in eval mode.

    `config` is the folder's config.json, read and checked by attnviz. Every weight of the
    base model must be in the checkpoint: transformers would fill a missing one at random,
    and show attention the model never had (a pooler, which comes after every layer, aside).
    """
    from transformers import AutoModel

    where = str(folder / "config.json")
    shape = describe_foreign(config, where=where)
    check_kind(config, shape.foreign_decoder, where)
    return load_checked(folder, AutoModel, dtype, model_class(config))


def check_kind(config: dict[str, Any], decoder: bool, where: str) -> None:
    """Refuse a config read as a decoder (`decoder`) that transformers computes as an encoder,
    or the reverse: its model type decides (transformers has a causal LM of it and no masked
    LM: a decoder; a masked LM and no causal one: an encoder; both: is_decoder says), never an
    `architectures` entry, which attnviz's tables believe only for a type they do not know."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    kind = config.get("model_type")
    causal, masked = (
        kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )
    if not causal and not masked:
        return  # transformers names no language model of the type: config.json's word stands
    computed = causal and (not masked or config.get("is_decoder") is True)
    if computed == decoder:
        return
    name = NAMES.get(str(kind), str(kind))
    said, is_ = ("a decoder", "an encoder") if decoder else ("an encoder", "a decoder")
    raise AttnvizError(
        f"{where} reads as {said} (its architectures or is_decoder), but transformers computes "
        f"model type {name} as {is_}: the config does not describe its checkpoint; remove the "
        "entry that says otherwise"
    )


def load_checked(folder: Path, auto: Any, dtype: str, name: str) -> Any:
    """transformers' model of the Auto class `auto` (AutoModel, AutoModelForSeq2SeqLM) for
    `folder`, eager attention, in eval mode, loaded safely: local files only, the weight
    files checked (`check_weights`), the config's size against the checkpoint's
    (`check_size`) before anything is allocated, and refused when the checkpoint lacks any
    weight (a pooler aside). `name` says what is loaded in a refusal."""
    import torch

    from attnviz.model.weights import compute_dtype

    safetensors = check_weights(folder)
    check_size(folder, stored_shapes(folder), auto)
    try:
        with quiet_transformers():
            model, info = auto.from_pretrained(
                folder,
                local_files_only=True,
                use_safetensors=safetensors,
                weights_only=True,
                attn_implementation="eager",
                dtype=compute_dtype(dtype),
                output_loading_info=True,
            )
    except AttnvizError:
        raise
    except Exception as exc:  # MemoryError included: the weights', never the text's
        if exhaustion(exc) == OUT_OF_MEMORY:
            raise _weights_too_big(folder, dtype) from None
        raise AttnvizError(
            f"transformers cannot load {folder} as {name} ({short_reason(exc, 160)}): the "
            "checkpoint is corrupt, or this transformers does not have its model type"
        ) from exc
    # A pooler (after the last layer, over [CLS]) changes no attention weight: a masked-LM
    # checkpoint has none, and transformers draws it at random, unused here.
    missing = sorted(k for k in info.get("missing_keys") or () if not k.startswith("pooler."))
    if missing:
        listed = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise AttnvizError(
            f"the checkpoint in {folder} lacks weights of {type(model).__name__} ({listed}): "
            "transformers would draw them at random; use the complete checkpoint"
        )
    if not isinstance(model, torch.nn.Module):  # pragma: no cover - Auto classes give modules
        raise AttnvizError(f"transformers gave no model for {folder}")
    return model.eval()


def _weights_too_big(folder: Path, dtype: str) -> AttnvizError:
    """The line for memory that ran out while the weights were read: the model, never the
    text, is too big."""
    from attnviz.model.weights import weight_files

    size = amount(sum(path.stat().st_size for path in weight_files(folder)))
    half = " or {dtype} bfloat16 to halve it" if dtype == "float32" else ""
    return AttnvizError(
        f"out of memory while reading the weights of {folder} ({size} on disk): the model is "
        f"too big for this machine's memory; use a smaller model{half}, or close what else "
        "holds memory",
        param="dtype" if half else None,
    )


def _no_init() -> contextlib.AbstractContextManager[None]:
    """transformers' switch that builds a model without filling its weights (a sinusoid
    table among them, computed in Python): `transformers.initialization` in transformers 5,
    `modeling_utils` before."""
    import importlib

    for module in ("transformers.initialization", "transformers.modeling_utils"):
        with contextlib.suppress(ImportError):
            switch = getattr(importlib.import_module(module), "no_init_weights", None)
            if switch is not None:
                return switch()
    return contextlib.nullcontext()  # pragma: no cover - every transformers attnviz takes has one


def check_size(folder: Path, stored: int | dict[str, list[int]], auto: Any = None) -> None:
    """Refuse a config that asks for more weights than the checkpoint holds (`stored`: its
    count, or each tensor's shape by name), before any is allocated: transformers' model
    (`auto`, an Auto class; AutoModel when None) is built on the meta device (no memory),
    unfilled, and counted. transformers would otherwise allocate, and draw at random, what
    the checkpoint lacks: a config of absurd sizes could take all the memory there is before
    a weight is read. Tied weights count once; a pooler (never needed for attention) and
    sinusoidal position tables (computed, never stored) not at all, but those tables are
    bounded (`COMPUTED_TABLE_NUMBERS`: transformers computes them in Python). With the
    shapes, each stack's layers are set against the config's (`check_layers`)."""
    import torch
    from transformers import AutoConfig, AutoModel

    try:
        with quiet_transformers(), torch.device("meta"), _no_init():
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
            skeleton = (auto or AutoModel).from_config(config, attn_implementation="eager")
            skeleton.tie_weights()  # what the unfilled build skipped: tied weights count once
    except PASS_THROUGH:
        raise
    except Exception as exc:
        raise AttnvizError(
            f"transformers cannot build the model {folder}'s config describes "
            f"({short_reason(exc, 160)}): the config is corrupt"
        ) from None
    computed = {
        id(p)
        for module in skeleton.modules()
        if "Sinusoidal" in type(module).__name__
        for p in module.parameters()
    }
    tables = sum(p.numel() for p in skeleton.parameters() if id(p) in computed)
    if tables > COMPUTED_TABLE_NUMBERS:
        positions = getattr(config, "max_position_embeddings", None)
        raise AttnvizError(
            f"the config in {folder} asks for position tables of {tables:,} numbers "
            f"(max_position_embeddings={positions}), which transformers computes number by "
            f"number; attnviz's bound is {COMPUTED_TABLE_NUMBERS:,}: the config is corrupt, or "
            "asks for far more positions than the model reads"
        )
    if isinstance(stored, dict):
        check_layers(folder, skeleton, stored, config.to_dict())
        stored = _count(stored)
    needed = sum(
        p.numel()
        for name, p in skeleton.named_parameters()
        if id(p) not in computed and not name.startswith("pooler.")
    )
    if needed > stored:
        raise AttnvizError(
            f"the config in {folder} describes a {type(skeleton).__name__} of {needed:,} weights, "
            f"but its checkpoint holds {stored:,}: the config and the weights do not belong "
            "together"
        )


def check_layers(
    folder: Path, skeleton: Any, stored: dict[str, list[int]], config: dict[str, Any]
) -> None:
    """Refuse a config whose layer counts differ from the checkpoint's: each stack the model
    builds (`skeleton`, on the meta device) and the checkpoint (`stored`, its tensors by name)
    both hold has as many layers in each (`stacks`). transformers would drop the
    layers past the config's count without a word (attnviz's own engine refuses them)."""
    prefix = str(getattr(skeleton, "base_model_prefix", "") or "")
    built = stacks((name for name, _ in skeleton.named_parameters()), prefix)
    held = stacks(stored, prefix)
    # Multi-token-prediction layers (DeepSeek-V3's, GLM-4.5's) are stored after the others
    # and left out by transformers, as their config says.
    extra = next((config[k] for k in _PREDICTION_KEYS if isinstance(config.get(k), int)), 0)
    for stack, count in built.items():
        if stack in held and held[stack] not in (count, count + extra):
            key = _count_key(config, stack)
            raise AttnvizError(
                f"the checkpoint in {folder} stores {held[stack]} layers in {stack}, but its "
                f"config.json builds {count}{key}: transformers would "
                f"{'drop the others' if held[stack] > count else 'draw the missing at random'}; "
                "use the config the checkpoint was saved with"
            )


# A layer index in a tensor's name (`encoder.layer.3.`, `model.decoder.layers.5.`, `h.11.`,
# `encoder.block.0.layer.1.`): `layer`, `layers`, `h`, `block` or `blocks`, a whole name
# component each, then the index and more of the name.
_LAYER = re.compile(r"(?<![^.])(layers?|h|blocks?)\.(\d{1,9})(?=\.)")


def stacks(names: Iterable[str], prefix: str = "") -> dict[str, int]:
    """Each stack's layer count (its highest index + 1) in the tensor names `names`, by the
    stack's name (`encoder.layer`, `decoder.layers`, `encoder.block.0.layer`), torch-free;
    `prefix` (a base model's, `deberta`) is taken off the names that start with it, so that a
    head model's checkpoint and its base model's names agree."""
    counts: dict[str, int] = {}
    lead = prefix + "." if prefix else ""
    for name in names:
        if lead and name.startswith(lead):
            name = name[len(lead) :]
        for match in _LAYER.finditer(name):
            stack = name[: match.end(1)]
            counts[stack] = max(counts.get(stack, 0), int(match[2]) + 1)
    return counts


_PREDICTION_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


def _count_key(config: dict[str, Any], stack: str) -> str:
    """` (encoder_layers=1)`: the config key that sets the layers of `stack`, where one does."""
    side = "decoder" if "decoder" in stack else "encoder" if "encoder" in stack else ""
    keys: tuple[str, ...] = (f"{side}_layers",) if side else ()
    keys += ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    key = next((k for k in keys if isinstance(config.get(k), int)), None)
    return f" ({key}={config[key]})" if key else ""


def attentions(
    model: Any,
    ids: torch.Tensor,
    type_ids: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    expect: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Every layer's attention weights (L, B, H, T, T) of the ids (B, T), from transformers'
    eager model run with `output_attentions=True`; `mask` (B, T) is 1 for real pieces.

    A model that returns no weights for a layer (one that is not an attention layer), or
    (with `expect`, the config's (layers, heads)) other counts than its config.json gives, is
    refused in one line.
    """
    import torch

    accepts = inspect.signature(model.forward).parameters
    inputs: dict[str, Any] = {"input_ids": ids, "output_attentions": True}
    if mask is not None:
        inputs["attention_mask"] = mask
    if type_ids is not None and "token_type_ids" in accepts and bool(type_ids.any()):
        inputs["token_type_ids"] = type_ids
    if "use_cache" in accepts:
        inputs["use_cache"] = False
    try:
        with torch.inference_mode(), quiet_transformers():
            out = model(**inputs)
    except PASS_THROUGH:
        raise
    except Exception as exc:
        error = exhausted(exc)
        if error is not None:  # out of memory: said as attnviz says it elsewhere
            raise error from None
        dtype = next(model.parameters()).dtype
        hint = "; use {dtype} float32" if dtype != torch.float32 else ""
        raise AttnvizError(
            f"transformers' {type(model).__name__} failed on this input ({short_reason(exc)})"
            f"{hint}",
            param="dtype" if hint else None,
        ) from exc
    layers = getattr(out, "attentions", None)
    B, T = ids.shape
    if not layers or not all(
        isinstance(a, torch.Tensor) and a.dim() == 4 and a.shape[0] == B and a.shape[2:] == (T, T)
        for a in layers
    ):
        raise AttnvizError(
            f"transformers' {type(model).__name__} returned no attention weights of shape "
            f"(batch, heads, {T}, {T}) for every layer: attnviz shows models whose every layer "
            "attends"
        )
    stacked = torch.stack(list(layers))  # (L, B, H, T, T)
    if expect is not None and (stacked.shape[0], stacked.shape[2]) != expect:
        raise AttnvizError(
            f"transformers' {type(model).__name__} returned {stacked.shape[0]} layers of "
            f"{stacked.shape[2]} heads, but its config.json says {expect[0]} of {expect[1]}: the "
            "config is not the one this model reads"
        )
    return stacked


def count_parameters(folder: Path) -> int:
    """Every number in the checkpoint's weight files (heads included: transformers' model
    is whatever the checkpoint holds), from safetensors headers without torch; a torch file
    is read weights-only."""
    return _count(stored_shapes(folder))


def stored_shapes(folder: Path) -> dict[str, list[int]]:
    """Each tensor's shape in the checkpoint's weight files, by name: from safetensors headers
    without torch; a torch file is read weights-only."""
    from attnviz.model.weights import read_state_dict, weight_files

    files = weight_files(folder)
    if not all(path.suffix == ".safetensors" for path in files):
        return {name: list(t.shape) for name, t in read_state_dict(folder).items()}
    shapes: dict[str, list[int]] = {}
    for path in files:
        shapes.update(_shapes(path))
    return shapes


def _count(shapes: dict[str, list[int]]) -> int:
    """The numbers the tensors of `shapes` hold together."""
    total = 0
    for shape in shapes.values():
        count = 1
        for size in shape:
            count *= size
        total += count
    return total

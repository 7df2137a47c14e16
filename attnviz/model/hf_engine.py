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
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import PASS_THROUGH, AttnvizError, exhausted, short_reason
from attnviz.limits import amount
from attnviz.model.foreign import describe_foreign, model_class

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

    describe_foreign(config, where=str(folder / "config.json"))
    return load_checked(folder, AutoModel, dtype, model_class(config))


def load_checked(folder: Path, auto: Any, dtype: str, name: str) -> Any:
    """transformers' model of the Auto class `auto` (AutoModel, AutoModelForSeq2SeqLM) for
    `folder`, eager attention, in eval mode, loaded safely: local files only, the weight
    files checked (`check_weights`), the config's size against the checkpoint's
    (`check_size`) before anything is allocated, and refused when the checkpoint lacks any
    weight (a pooler aside). `name` says what is loaded in a refusal."""
    import torch

    from attnviz.model.weights import compute_dtype

    safetensors = check_weights(folder)
    check_size(folder, count_parameters(folder), auto)
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
    except (*PASS_THROUGH, AttnvizError):
        raise
    except Exception as exc:
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


def check_size(folder: Path, stored: int, auto: Any = None) -> None:
    """Refuse a config that asks for more weights than the checkpoint holds (`stored`), before
    any is allocated: transformers' model (`auto`, an Auto class; AutoModel when None) is
    built on the meta device (no memory) and counted. transformers would otherwise allocate,
    and draw at random, what the checkpoint lacks: a config of absurd sizes could take all
    the memory there is before a weight is read. Tied weights count once; a pooler (never
    needed for attention) and sinusoidal position tables (computed, never stored) not at all."""
    import torch
    from transformers import AutoConfig, AutoModel

    try:
        with quiet_transformers(), torch.device("meta"):
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
            skeleton = (auto or AutoModel).from_config(config, attn_implementation="eager")
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
    from attnviz.model.weights import read_state_dict, weight_files

    files = weight_files(folder)
    if not all(path.suffix == ".safetensors" for path in files):
        return sum(int(t.numel()) for t in read_state_dict(folder).values())
    total = 0
    for path in files:
        for shape in _shapes(path).values():
            count = 1
            for size in shape:
                count *= size
            total += count
    return total

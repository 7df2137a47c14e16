"""Head ablation and activation patching on a decoder: the logit difference without one head.

The measure is the next token's logit(target) − logit(foil) after the prompt. A head is
removed by replacing its slice of the output projection's input (its output before W_O) at
every position: by zeros ("zero") or by its mean over the prompt's positions ("mean").
Patching runs a corrupted prompt with one head's output taken from the clean prompt's run.

Every layer's input is computed once (`Decoder.trace`); the copies that change one head run
from that head's layer on, all the heads of a layer and of the layers before in one batch
(`Decoder.head_replaced`), not one whole run per head.

Names as in attnviz.model.attention: T tokens, C hidden size, nh heads, hs head size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from attnviz.model.decoder import Decoder, HeadValues

__all__ = ["METHODS", "HeadEffects", "head_effects"]

METHODS = ("zero", "mean")
# Bytes the copies of one batch may hold (their activations and attention weights): the layers
# are taken a group at a time so that the batch at the group's last layer stays under it.
BATCH_BYTES = 256 << 20


class HeadEffects(NamedTuple):
    """The logit differences, clean and with each head changed."""

    clean: float  # logit(target) − logit(foil) on the clean prompt
    corrupted: float | None  # the same on the corrupted prompt (patching), else None
    logit_diffs: torch.Tensor  # (len(layers), nh): with head (layer, h) removed or patched


def head_effects(
    decoder: Decoder,
    ids: Sequence[int],
    target: int,
    foil: int,
    *,
    method: str = "zero",
    corrupted_ids: Sequence[int] | None = None,
    layers: Sequence[int] | None = None,
) -> HeadEffects:
    """The logit difference with each head of `layers` (default: all) removed by `method`;
    with `corrupted_ids` (as many pieces as `ids`), on the corrupted prompt with each head's
    output patched in from the clean run."""
    cfg = decoder.config
    nh, hs = cfg.num_heads, cfg.head_size
    layers = list(range(cfg.num_layers)) if layers is None else sorted(layers)
    device = decoder.tokens.weight.device
    pair = [target, foil]

    def difference(hidden: torch.Tensor) -> torch.Tensor:
        logits = decoder.logits(hidden, pair).float()  # (..., 2)
        return logits[..., 0] - logits[..., 1]  # (...,)

    with torch.inference_mode():
        clean = decoder.trace(torch.tensor([list(ids)], device=device))
        T = clean.inputs.shape[1]
        base, corrupted = clean, None
        if corrupted_ids is not None:
            base = decoder.trace(torch.tensor([list(corrupted_ids)], device=device))
            corrupted = float(difference(base.last))
        values = _replacement(method if corrupted_ids is None else "patch", clean.joined, nh, hs)
        diffs = [
            difference(decoder.head_replaced(base.inputs, group, values))  # (len(group), nh)
            for group in _groups(layers, _copy_bytes(decoder, T), nh)
        ]
        return HeadEffects(float(difference(clean.last)), corrupted, torch.cat(diffs).cpu())


def _replacement(method: str, clean: torch.Tensor, nh: int, hs: int) -> HeadValues:
    """What each head's output becomes, (nh, T, hs), from the joined outputs (T, nh·hs) its
    layer computed: zeros, their mean over the positions, or the clean run's (`clean`
    (L, T, nh·hs), patching)."""

    def zero(layer: int, joined: torch.Tensor) -> torch.Tensor:
        return joined.new_zeros(nh, joined.shape[0], hs)  # (nh, T, hs)

    def mean(layer: int, joined: torch.Tensor) -> torch.Tensor:
        T = joined.shape[0]
        means = joined.view(T, nh, hs).mean(dim=0)  # (nh, hs): each head over the positions
        return means[:, None, :].expand(nh, T, hs)  # (nh, T, hs)

    def patch(layer: int, joined: torch.Tensor) -> torch.Tensor:
        T = joined.shape[0]
        return clean[layer].view(T, nh, hs).transpose(0, 1)  # (nh, T, hs): the clean run's

    return {"zero": zero, "mean": mean, "patch": patch}[method]


def _copy_bytes(decoder: Decoder, T: int) -> int:
    """About what one copy holds while a layer runs: its activations and attention weights."""
    cfg = decoder.config
    width = 6 * cfg.hidden_size + 3 * cfg.intermediate_size + 4 * cfg.num_heads * cfg.head_size
    size = decoder.tokens.weight.element_size()
    return T * width * size + 2 * cfg.num_heads * T * T * 4


def _groups(layers: list[int], copy_bytes: int, nh: int) -> list[list[int]]:
    """`layers` in runs short enough that their nh copies a layer fit `BATCH_BYTES` together
    (at least one layer a run)."""
    size = max(1, BATCH_BYTES // (copy_bytes * nh))
    return [layers[i : i + size] for i in range(0, len(layers), size)]

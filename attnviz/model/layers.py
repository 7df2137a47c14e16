"""What the encoder and the decoders share around their layers.

`ACTIVATIONS` are the feed-forward activations, `EncoderOutput` what a model returns,
and `run_layers` the loop over the layers: it keeps the attention of the layers asked
for, each written by its softmax straight into its slot, and runs no layer after the
last of them, since a later layer cannot change an earlier one's attention.

Names as in attnviz.model.attention: B batch, T tokens, C hidden size, nh heads, L layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F


def _quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


# The feed-forward activations the layers compute, by their names in config.json (the
# torch-free list of names is attnviz.model.config.ACTIVATION_NAMES).
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": lambda x: F.gelu(x, approximate="tanh"),
    "quick_gelu": _quick_gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


class EncoderOutput(NamedTuple):
    """What the encoder and the decoders return."""

    hidden_states: torch.Tensor  # (B, T, C), the last layer's output
    attentions: torch.Tensor  # (L, B, nh, T, T), or (len(layers), B, nh, T, T)
    layer_inputs: torch.Tensor | None  # (L, B, T, C), what each layer read (keep_inputs=True)


# One layer's step: (layer number, x (B, T, C), where its weights may go (B, nh, T, T) or
# None) -> (x (B, T, C), its weights (B, nh, T, T)).
LayerStep = Callable[[int, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor]]


def run_layers(
    x: torch.Tensor,
    step: LayerStep,
    num_layers: int,
    num_heads: int,
    layers: Sequence[int] | None = None,
    keep_inputs: bool = False,
    past: int = 0,
    keep_weights: bool = True,
) -> EncoderOutput:
    """Run `step` over layers 0, 1, ... from `x` (B, T, C), the embedded tokens.

    `layers` (default: all) are the layers whose attention is returned, in that order, as
    (len, B, nh, T, T); the layers after the last of them are not run, and `hidden_states`
    is the last run's output. `keep_inputs` also returns what each layer run read.
    `past` is how many earlier tokens each query also sees (a decoder's key/value cache):
    the weights are then (len, B, nh, T, past + T). `keep_weights=False` runs the layers up
    to the last of `layers` and keeps no weights (a long input's blocked run, which hands
    them over a block at a time): nothing of (nh, T, T) is reserved, not even address space.
    """
    B, T, _ = x.shape
    keep = list(range(num_layers)) if layers is None else list(layers)
    last = max(keep, default=-1)
    if not keep_weights:
        keep = []
    # Each layer's softmax writes straight into its slot: no copy of T·T arrays.
    weights = x.new_empty(len(keep), B, num_heads, T, past + T)  # (len(keep), B, nh, T, Tk)
    inputs = []
    for i in range(min(last + 1, num_layers)):
        if keep_inputs:
            inputs.append(x)
        slot = keep.index(i) if i in keep else None
        x, w = step(i, x, weights[slot] if slot is not None else None)
        if slot is not None and w.data_ptr() != weights[slot].data_ptr():
            weights[slot] = w  # a path that could not write in place (autograd)
        del w  # a layer not kept: its T·T weights go before the next layer makes its own
    return EncoderOutput(x, weights, torch.stack(inputs) if keep_inputs else None)

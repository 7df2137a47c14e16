"""A BERT-family encoder written from scratch on the attention of attnviz.model.attention.

The BERT family differs only around that attention: RoBERTa and XLM-RoBERTa
number positions after the padding index, DistilBERT has no token types,
ELECTRA and ALBERT embed in a narrower width E and project up to C, and ALBERT
runs one layer's weights L times. `EncoderConfig` names each difference.

Names used throughout: B batch, T tokens, C embedding width (hidden size),
E embedding table width, nh heads, hs head size (C // nh), L layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from attnviz.model.attention import MultiHeadAttention
from attnviz.model.config import EncoderConfig
from attnviz.model.layers import ACTIVATIONS, EncoderOutput, run_layers


class Embeddings(nn.Module):
    """Word + position (+ token type) embeddings, LayerNorm, then (ELECTRA, ALBERT) E -> C."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        E = cfg.embedding_width
        self.pad_position = cfg.pad_position
        self.word = nn.Embedding(cfg.vocab_size, E)
        self.position = nn.Embedding(cfg.max_positions, E)
        self.token_type = nn.Embedding(cfg.type_vocab_size, E) if cfg.type_vocab_size else None
        self.norm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.project = nn.Linear(E, cfg.hidden_size) if cfg.project_embeddings else None

    def positions(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Each piece's row in the position table: (1, T) counting from 0, or (B, T) RoBERTa's."""
        if self.pad_position is None:
            return torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # (1, T)
        real = (input_ids != self.pad_position).long()  # (B, T): 1 for a real token
        # RoBERTa (after fairseq): real tokens count from pad + 1, padding stays at pad.
        return real.cumsum(dim=1) * real + self.pad_position  # (B, T)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        x = self.word(input_ids)  # (B, T, E)
        if self.token_type is not None:
            if token_type_ids is None or self.token_type.num_embeddings == 1:
                token_type_ids = torch.zeros_like(input_ids)  # one segment: every piece is type 0
            x = x + self.token_type(token_type_ids)  # (B, T, E)
        x = x + self.position(self.positions(input_ids))  # (B, T, E) + (1 or B, T, E)
        x = self.norm(x)  # (B, T, E)
        return self.project(x) if self.project is not None else x  # (B, T, C)


class EncoderLayer(nn.Module):
    """Self-attention, residual + LayerNorm, feed-forward, residual + LayerNorm."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(cfg.hidden_size, cfg.num_heads)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.ff_in = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ff_out = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.ff_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.activation = ACTIVATIONS[cfg.hidden_act]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        weights_out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attention(x, x, x, mask, weights_out)  # (B, T, C), (B, nh, T, T)
        x = self.attention_norm(x + attended)  # (B, T, C)
        hidden = self.activation(self.ff_in(x))  # (B, T, intermediate)
        x = self.ff_norm(x + self.ff_out(hidden))  # (B, T, C)
        return x, weights


def hiding_mask(
    attention_mask: torch.Tensor | None, causal: bool, T: int, device: torch.device
) -> torch.Tensor | None:
    """The bool mask the attention takes (True hides a key), or None when nothing is hidden.

    `attention_mask` (B, T) is 1 for real tokens and 0 for padding; `causal` also
    hides the keys after each query.
    """
    mask = None
    if attention_mask is not None:
        mask = (attention_mask == 0)[:, None, None, :]  # (B, 1, 1, T): True hides a pad key
    if causal:
        later = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)  # (T, T): key > query
        mask = later if mask is None else mask | later  # (B, 1, T, T) or (T, T)
    return mask


class Encoder(nn.Module):
    """A BERT-family encoder that returns its last hidden states and every attention weight.

    With `shared_layers` (ALBERT) the same `EncoderLayer` object fills all L slots.
    """

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        if cfg.shared_layers:
            shared = EncoderLayer(cfg)
            self.layers = nn.ModuleList([shared] * cfg.num_layers)
        else:
            self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        causal: bool = False,
        keep_inputs: bool = False,
        layers: Sequence[int] | None = None,
        keep_weights: bool = True,
        weights_only: bool = False,
    ) -> EncoderOutput:
        """`input_ids` (B, T); `attention_mask` (B, T) is 1 for real tokens, 0 for padding.

        `token_type_ids` (B, T) default to 0; a family with one segment (RoBERTa) or none
        (DistilBERT) ignores them. `causal` hides every later key from each query, a
        what-if the real model never does. `keep_inputs` also returns what each layer read
        (up to the last layer run). `layers` (default: all) are the layers whose attention
        is returned, in that order, as (len, B, nh, T, T); the layers after the last of them
        are not run (and `hidden_states` is then the last run's output). `keep_weights=False`
        keeps none (`run_layers`). `weights_only` (a speed-up for callers that read only the
        attention, such as the statistics): the last layer run stops at its weights, without
        its values, output projection and feed-forward, and `hidden_states` is what it read.
        """
        mask = hiding_mask(attention_mask, causal, input_ids.shape[1], input_ids.device)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, C)
        L, nh = len(self.layers), self.config.num_heads
        last = L - 1 if layers is None else max(layers, default=-1)

        def step(i: int, x: torch.Tensor, out: torch.Tensor | None) -> tuple[Tensor, Tensor]:
            layer = self.layers[i]
            assert isinstance(layer, EncoderLayer)
            if weights_only and i == last:  # nothing after this layer's weights is read
                return x, layer.attention.self_weights(x, mask, out)  # (B, nh, T, T)
            return layer(x, mask, out)  # (B, T, C), (B, nh, T, T)

        return run_layers(x, step, L, nh, layers, keep_inputs, keep_weights=keep_weights)

    def fuse_projections(self) -> None:
        """One Q/K/V matmul per layer from now on (see MultiHeadAttention.fuse_projections)."""
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.fuse_projections()

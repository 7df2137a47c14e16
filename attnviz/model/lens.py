"""The logit lens (nostalgebraist 2020): each layer's guess at the next token.

A decoder's last layer is read by the final norm and the LM head. The lens reads every
layer's output the same way, as if the model stopped there: where in depth the final
answer first appears, and what the layers guessed before it.

Names as in attnviz.model.attention: T tokens, C hidden size, L layers, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnviz.model.decoder import Decoder

CHUNK = 64  # positions read at a time: (CHUNK, V) logits, not (T, V), in memory


def logit_lens(decoder: Decoder, ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """For each layer and position: the top next-token id and its probability, (L, T) each.

    Layer l's guess is logits(final_norm(output of layer l)); at the last layer this is
    the model's own next-token distribution.
    """
    device = decoder.tokens.weight.device
    tokens = torch.tensor([list(ids)], device=device)  # (1, T)
    with torch.inference_mode():
        out = decoder(tokens, keep_inputs=True)
        assert out.layer_inputs is not None
        # What layer l wrote is what layer l + 1 read; the last layer's, final-normed, is
        # the model's output.
        outputs = [*out.layer_inputs[1:, 0], None]  # L entries of (T, C); None: the last
        top_ids, top_p = [], []
        for hidden in outputs:
            normed = out.hidden_states[0] if hidden is None else decoder.final_norm(hidden)
            layer_ids, layer_p = [], []
            for start in range(0, normed.shape[0], CHUNK):
                logits = decoder.logits(normed[None, start : start + CHUNK])[0]  # (chunk, V)
                p, i = torch.softmax(logits.float(), dim=-1).max(dim=-1)  # (chunk,) each
                layer_ids.append(i)
                layer_p.append(p)
            top_ids.append(torch.cat(layer_ids))  # (T,)
            top_p.append(torch.cat(layer_p))  # (T,)
    return torch.stack(top_ids), torch.stack(top_p)  # (L, T), (L, T)

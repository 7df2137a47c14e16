"""A decoder writes: one new token per step, each step a single query against cached keys.

The prompt runs once, whole, filling each layer's key/value cache (`PastKeys`); its last
row of logits gives the first new token. Every later step feeds only the token just
written: its query scores the cached keys of the prompt and the earlier new tokens, at
its own position (rotary angle or position row), inside the sliding window where the
layer has one. So step k costs one token's work, not a re-run of P + k tokens.

Each step keeps what the model looked at while writing: the attention row of the query
that wrote the token, (L, nh, 1, P + k) over the prompt and the k tokens written before.

Names as in attnviz.model.attention: P prompt tokens, L layers, nh heads, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from attnviz.model.attention import PastKeys
from attnviz.model.decoder import Decoder


@dataclass
class Written:
    """What `write` returns: the new tokens and the attention of each step."""

    ids: list[int] = field(default_factory=list)  # the new tokens, in order
    prompt_attention: torch.Tensor | None = None  # (L, nh, P, P): the prompt read whole
    rows: list[torch.Tensor] = field(default_factory=list)  # step k: (L, nh, 1, P + k)
    logits: list[torch.Tensor] = field(default_factory=list)  # step k: (V,), when kept
    stopped_at_eos: bool = False


def choose(
    logits: torch.Tensor,
    *,
    sample: bool,
    temperature: float,
    top_k: int | None,
    generator: torch.Generator | None,
) -> int:
    """The next token from one row of logits (V,): the largest (greedy), or a draw.

    A draw divides the logits by `temperature`, keeps the `top_k` largest (None: all)
    and samples from their softmax with `generator`, as transformers' sampling does.
    """
    if not sample:
        return int(torch.argmax(logits))
    scores = logits.float() / temperature  # (V,)
    if top_k is not None and top_k < scores.shape[0]:
        kth = torch.topk(scores, top_k).values[-1]  # the k-th largest score
        scores = scores.masked_fill(scores < kth, -torch.inf)  # (V,): the rest can't be drawn
    probabilities = torch.softmax(scores, dim=-1)  # (V,)
    return int(torch.multinomial(probabilities, 1, generator=generator))


def write(
    decoder: Decoder,
    prompt_ids: Sequence[int],
    *,
    max_new: int,
    eos_ids: Sequence[int] = (),
    sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    keep_logits: bool = False,
    on_token: Callable[[int], None] | None = None,
) -> Written:
    """Write up to `max_new` tokens after `prompt_ids`, stopping after one of `eos_ids`.

    `on_token(id)` is called as each token is chosen (to print it as it comes). With
    `keep_logits` each step's logits (V,) are kept too (the tests compare them).
    """
    generator = None
    if sample:
        generator = torch.Generator()
        generator.manual_seed(seed if seed is not None else int(torch.seed() % (1 << 63)))
    device = decoder.tokens.weight.device
    past = [PastKeys() for _ in decoder.layers]  # one key/value cache per layer
    written = Written()
    stop = set(eos_ids)
    ids = torch.tensor([list(prompt_ids)], device=device)  # (1, P)
    with torch.inference_mode():
        for step in range(max_new):
            out = decoder(ids, past=past)  # the prompt whole, then one token per step
            weights = out.attentions[:, 0]  # (L, nh, T_in, T_past + T_in)
            if step == 0:
                written.prompt_attention = weights  # (L, nh, P, P)
            written.rows.append(weights[:, :, -1:, :])  # (L, nh, 1, P + step)
            logits = decoder.logits(out.hidden_states[:, -1:])[0, 0].float()  # (V,)
            if keep_logits:
                written.logits.append(logits)
            token = choose(
                logits, sample=sample, temperature=temperature, top_k=top_k, generator=generator
            )
            written.ids.append(token)
            if on_token is not None:
                on_token(token)
            if token in stop:
                written.stopped_at_eos = True
                break
            ids = torch.tensor([[token]], device=device)  # (1, 1): the next step reads it
    return written

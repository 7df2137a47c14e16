"""Beyond raw weights: how much each token contributes, by the measures researchers trust more.

A weight α_ij says how much query i looks at key j, not how much j changes i's output.
Two measures, computed from the model's own numbers:

- `norm` (Kobayashi et al. 2020, "Attention is Not Only a Weight"): per head,
  ‖α_ij · f_h(x_j)‖ with f_h(x) = (x W_V + b_V)[head h] W_O[head h], the vector key j
  actually adds to query i's output. [L, H, T, T]; a row sums to the total norm added,
  not to 1.
- `norm-res-ln` (Kobayashi et al. 2021, "Incorporating Residual and Normalization
  Layers into Analysis of Masked Language Models"): per layer, the attention block's
  output for query i, residual connection and first LayerNorm included, written as a
  sum over keys, LN(x_i + Σ_h Σ_j α_ij f_h(x_j) + b_O) = Σ_j T_i(x_j) + bias terms; the
  measure is ‖T_i(x_j)‖. [L, T, T]; a row sums to the total norm, not to 1.
- `alti` (Ferrando et al. 2022, "Measuring the Mixing of Contextual Information in the
  Transformer"): the same T_i(x_j), scored by how close each is to the block's output
  y_i in the L1 norm, max(0, ‖y_i‖₁ − ‖y_i − T_i(x_j)‖₁), each row normalised to sum
  to 1. [L, T, T].
- `value-zeroing` (Mohebbi et al. 2023, "Quantifying Context Mixing in Transformers"):
  per layer, zero key j's value vector in every head, rerun the whole layer (attention,
  residual, LayerNorm, feed-forward) and measure how far each token's output moves, by
  cosine distance; each row is then normalised to sum to 1. [L, T, T]; costs T + 1
  passes of each layer, run as one batch per layer.

On a decoder, whose norm comes before attention, the same four measures are computed by
`attnviz.measures.decoder_parts`: there the block's parts are exact and stop at the residual
stream, and a decoder family is computed only where its row of facts has been checked.

Names: T pieces, C hidden size, nh heads, hs head size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from attnviz import limits
from attnviz.errors import BadInput, exhausted
from attnviz.lexicon import label
from attnviz.limits import check_choice

if TYPE_CHECKING:
    import torch

    from attnviz.measures.model_input import ModelInput
    from attnviz.model.attention import MultiHeadAttention
    from attnviz.model.encoder import Encoder, EncoderLayer
    from attnviz.model.families import ModelShape

__all__ = [
    "MEASURES",
    "PER_LAYER",
    "check_decoder_comparison",
    "check_measure",
    "check_measure_cost",
    "check_model",
    "compute_measure",
    "describe_measure",
    "per_layer_refusal",
]

# name -> (what the title says, whether it has a head axis)
MEASURES: dict[str, tuple[str, bool]] = {
    "weight": ("attention weight", True),
    "norm": ("‖α·f(x)‖ (Kobayashi et al. 2020); rows sum to the norm added", True),
    "norm-res-ln": (
        "‖T_i(x_j)‖ with residual and LayerNorm (Kobayashi et al. 2021); rows sum to the norm",
        False,
    ),
    "alti": ("ALTI (Ferrando et al. 2022); rows sum to 1", False),
    "value-zeroing": ("value zeroing (Mohebbi et al. 2023); rows sum to 1", False),
}
# Value zeroing runs the zeroed keys in chunks of at most this many numbers per activation
# (and fewer when the attention budget is smaller: `limits.chunk_numbers`).
VALUE_ZEROING_NUMBERS = 2**24
# norm-res-ln and ALTI build (queries, T, C) vectors in chunks of at most this many numbers.
DECOMPOSED_NUMBERS = 2**24
PER_LAYER = tuple(name for name, (_, per_head) in MEASURES.items() if not per_head)


def describe_measure(name: str, lang: str = "en") -> str:
    """The measure as a title names it (in `lang`); BadInput for a name attnviz does not
    compute."""
    return label(lang, f"measure_{check_choice(name, tuple(MEASURES), 'measure')}")


def check_measure(
    name: str, *, head: int | None = None, heads: object = None, view: str = "show"
) -> None:
    """Refuse, before any work, a head (or heads view) asked of a per-layer measure."""
    describe_measure(name)
    if name not in PER_LAYER:
        return
    if head is not None or heads is not None or view == "heads":
        what = "{head} does not apply" if head is not None else "it has no heads to show"
        raise per_layer_refusal(name, what)


def per_layer_refusal(measure: str, what: str) -> BadInput:
    """The error for a head (or heads) asked of the per-layer `measure`; `what` says why,
    naming the parameter as `{head}` or `{heads}` where it does."""
    return BadInput(
        f"{measure} is measured per layer, over all heads together, so {what}: "
        "drop {head}/{heads} (show and model take it), or use {measure} weight (or norm, "
        "on an encoder)",
        param=("head", "heads", "measure"),
    )


def check_model(prepared: ModelInput, name: str) -> None:
    """Refuse a measure other than the weight on a decoder family whose decomposition attnviz
    has not checked (`attnviz.measures.decoder_parts.DECODER_FACTS`)."""
    if name != "weight" and prepared.shape.causal:
        from attnviz.measures.decoder_parts import check_decoder

        shape = prepared.shape
        check_decoder(shape.model_type, shape.family, name, prepared.source.name)


def check_decoder_comparison(prepared: ModelInput, measures: Sequence[str] | None = None) -> None:
    """Refuse to compare measures on a decoder family whose measures attnviz has not checked."""
    chosen = [m for m in (MEASURES if measures is None else measures) if m != "weight"]
    if prepared.shape.causal and chosen:
        from attnviz.measures.decoder_parts import DECODER_FACTS

        if prepared.shape.model_type not in DECODER_FACTS:
            checked = ", ".join(f.family for f in DECODER_FACTS.values())
            raise BadInput(
                f"compare-measures needs the norm, norm-res-ln, ALTI and value-zeroing "
                f"measures, which attnviz has not checked on {prepared.shape.family} decoders "
                f"({prepared.source.name}; it measures {checked}): look at its weights with "
                "show --query WORD"
            )


def _chunk(name: str, budget: int) -> int:
    """The numbers one chunk array of `name` holds at most, under `budget`."""
    if name == "value-zeroing":
        return min(VALUE_ZEROING_NUMBERS, limits.chunk_numbers(limits.VALUE_ZEROING_ARRAYS, budget))
    return min(DECOMPOSED_NUMBERS, limits.chunk_numbers(limits.DECOMPOSED_ARRAYS, budget))


def measure_bytes(shape: ModelShape, T: int, name: str, budget: int) -> int:
    """The peak memory of the measure `name` at `T` pieces, model weights left out: the
    float64 rerun's attention and layer inputs, the result, and the working arrays."""
    L, H, C, F = shape.layers, shape.heads, shape.hidden, shape.intermediate
    rerun = L * H * T * T + (L + 1) * T * C  # (L, 1, nh, T, T) and (L + 1, 1, T, C)
    result = L * (H if MEASURES[name][1] else 1) * T * T
    if name == "norm":
        working = 2 * H * T * C + H * T * T  # f_h(x_j), and one layer's (nh, T, T)
    elif name == "value-zeroing":  # scores and α; chunks of at least one key
        chunk = max(_chunk(name, budget), T * max(C, F))
        working = 2 * H * T * T + limits.VALUE_ZEROING_ARRAYS * chunk
    else:  # chunks of at least one query
        working = H * T * C + limits.DECOMPOSED_ARRAYS * max(_chunk(name, budget), T * C)
    return (rerun + result + working) * limits.MEASURE_NUMBER_BYTES


def measure_work(shape: ModelShape, T: int, name: str) -> tuple[int, int]:
    """The work of the measure `name` at `T` pieces, and the most attnviz does (see limits)."""
    L, H, C, F = shape.layers, shape.heads, shape.hidden, shape.intermediate
    if name == "value-zeroing":
        return L * T * T * C * (2 * F + C), limits.VALUE_ZEROING_WORK
    if name in ("norm-res-ln", "alti"):
        return L * T * T * C * H, limits.DECOMPOSED_WORK
    return L * H * T * (T + C), limits.DECOMPOSED_WORK  # the norm: a product per weight


def check_measure_cost(prepared: ModelInput, names: Sequence[str]) -> None:
    """Refuse, before any work, measures whose memory would pass the attention budget
    (`limits.attention_budget()`, ATTNVIZ_ATTENTION_MB) or whose work would pass what
    attnviz runs (`limits.DECOMPOSED_WORK`, `limits.VALUE_ZEROING_WORK`), in one line naming
    the --max-tokens that fits. `names` are computed in turn and kept, as `compare` does."""
    shape, T = prepared.shape, len(prepared.pieces)
    budget = limits.attention_budget()
    chosen = [n for n in names if n != "weight" and n in MEASURES]

    def peak(t: int) -> int:  # the largest of the measures' peaks, with the earlier results held
        held, most = 0, 0
        for name in chosen:
            most = max(most, held + measure_bytes(shape, t, name, budget))
            held += shape.layers * (shape.heads if MEASURES[name][1] else 1) * t * t * 8
        return most

    def fits(t: int) -> bool:
        return peak(t) <= budget and all(
            work <= most for work, most in (measure_work(shape, t, n) for n in chosen)
        )

    if not chosen or fits(T):
        return
    low, high = 0, T  # the longest input that fits: fits(low), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    what = chosen[0] if len(chosen) == 1 else "comparing the measures"
    use = (
        f"read at most {low:,} pieces ({{max_tokens}} {low} with {{truncate}})"
        if low >= 1
        else "use {measure} weight or norm"
    )
    if peak(T) > budget:
        raise BadInput(
            f"{what} at {T:,} pieces on {prepared.source.name} would take about "
            f"{limits.amount(peak(T))} of memory, more than attnviz keeps for one input "
            f"({limits.amount(budget)}, {limits.ATTENTION_ENV}): {use}",
            param=("max_tokens", "truncate", "measure"),
        )
    slow = next(n for n in chosen if measure_work(shape, T, n)[0] > measure_work(shape, T, n)[1])
    how = (
        "runs every layer once per piece"
        if slow == "value-zeroing"
        else "decomposes every query's output over every key"
    )
    raise BadInput(
        f"{slow} {how}: at {T:,} pieces on {prepared.source.name} that is more work than "
        f"attnviz does for one measure (its time grows with the square of the pieces; "
        f"docs/measures.md gives the figures): {use}, or use a cheaper {{measure}}",
        param=("max_tokens", "truncate", "measure"),
    )


def compute_measure(prepared: ModelInput, name: str, *, causal: bool = False) -> np.ndarray:
    """The measure `name` for every layer: [L, H, T, T] (per head) or [L, T, T] (per layer).

    Refused before any work past the memory and work bounds (`check_measure_cost`); an
    allocation that fails all the same is an AttnvizError (one line), not a RuntimeError."""
    describe_measure(name)
    if name == "weight":
        raise BadInput("the weights are Analysis.attentions; measure() is for the others")
    check_model(prepared, name)
    check_measure_cost(prepared, [name])
    try:
        return _compute(prepared, name, causal=causal)
    except (MemoryError, RuntimeError) as exc:
        error = exhausted(exc)
        if error is None:
            raise
        raise error from None


def _compute(prepared: ModelInput, name: str, *, causal: bool) -> np.ndarray:
    from attnviz import perf

    perf.import_torch()
    import torch

    from attnviz.model.encoder import hiding_mask
    from attnviz.model.weights import load_encoder

    if prepared.shape.causal:
        return _compute_decoder(prepared, name)
    pieces = prepared.pieces
    # In float64: a cosine distance of 1e-3 keeps its digits.
    encoder = cast("Encoder", load_encoder(prepared.source.folder, prepared.config)).double()
    input_ids = torch.tensor([pieces.ids])  # (1, T)
    type_ids = torch.tensor([pieces.type_ids])  # (1, T)
    T = len(pieces)
    mask = hiding_mask(None, causal, T, input_ids.device)  # (T, T) or None
    with torch.inference_mode(), perf.threads_for(T):
        out = encoder(input_ids, type_ids, causal=causal, keep_inputs=True)
        assert out.layer_inputs is not None
        budget = limits.attention_budget()
        L, nh = len(encoder.layers), prepared.shape.heads
        # (L, nh, T, T) or (L, T, T), filled a layer at a time (a list then a stack would
        # hold it twice)
        result = np.empty((L, nh, T, T) if MEASURES[name][1] else (L, T, T), dtype=np.float64)
        for index, module in enumerate(encoder.layers):
            layer = cast("EncoderLayer", module)
            x = out.layer_inputs[index, 0]  # (T, C): what this layer reads
            weights = out.attentions[index, 0]  # (nh, T, T)
            if name == "norm":
                values = _norms(layer.attention, x, weights)
            elif name == "value-zeroing":
                values = _value_zeroing(layer, x, mask, _chunk(name, budget))
            else:
                values = _decomposed(layer, x, weights, _chunk(name, budget), alti=name == "alti")
            result[index] = values.double().numpy()
    return result


def _compute_decoder(prepared: ModelInput, name: str) -> np.ndarray:
    """The measure on a pre-norm decoder (attnviz.measures.decoder_parts): [L, (nh,) T, T]."""
    from attnviz import perf

    perf.import_torch()
    import torch

    from attnviz.measures import decoder_parts as parts
    from attnviz.model.weights import load_encoder

    shape = prepared.shape
    facts = parts.check_decoder(shape.model_type, shape.family, name, prepared.source.name)
    pieces = prepared.pieces
    # In float64: a cosine distance of 1e-3 keeps its digits.
    decoder = load_encoder(prepared.source.folder, prepared.config).double()
    input_ids = torch.tensor([pieces.ids])  # (1, T)
    T = len(pieces)
    calls = [parts.LayerCall() for _ in decoder.layers]  # how the decoder calls each layer
    handles = [
        layer.register_forward_pre_hook(call.hook, with_kwargs=True)
        for layer, call in zip(decoder.layers, calls, strict=True)
    ]
    with torch.inference_mode(), perf.threads_for(T):
        try:
            out = decoder(input_ids, keep_inputs=True)
        finally:
            for handle in handles:
                handle.remove()
        assert out.layer_inputs is not None
        budget = limits.attention_budget()
        L, nh = len(decoder.layers), shape.heads
        # (L, nh, T, T) or (L, T, T), filled a layer at a time
        result = np.empty((L, nh, T, T) if MEASURES[name][1] else (L, T, T), dtype=np.float64)
        for index, layer in enumerate(decoder.layers):
            x = out.layer_inputs[index, 0]  # (T, C): what this layer reads
            weights = out.attentions[index, 0]  # (nh, T, T)
            if name == "norm":
                n = parts.input_norm(layer, facts, x)  # (T, C): what the attention reads
                values = _norms(parts.attention_of(layer), n, weights)
            elif name == "value-zeroing":
                chunk = _chunk(name, budget)
                values = parts.decoder_value_zeroing(
                    layer, facts, calls[index], x, weights, chunk, shape.intermediate
                )
            else:
                values = parts.decoder_decomposed(
                    layer, facts, x, weights, _chunk(name, budget), alti=name == "alti"
                )
            result[index] = values.double().numpy()
    return result


def _norms(attention: MultiHeadAttention, n: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """‖α_ij f_h(n_j)‖ for every head, query and key: (nh, T, T). `n` (T, C) is what the
    attention reads (a post-norm encoder's layer input; a pre-norm decoder's normed input)."""
    from attnviz.measures.decoder_parts import head_transforms

    transformed = head_transforms(attention, n)  # (nh, T, C): f_h(n_j) for every key j
    return weights * transformed.norm(dim=-1)[:, None, :]  # (nh, T, T): α_ij ‖f_h(n_j)‖


def _values(layer: EncoderLayer, x: torch.Tensor) -> torch.Tensor:
    attention = layer.attention
    return attention.split_heads(attention.v_proj(x)[None])[0]  # (nh, T, hs)


def _decomposed(
    layer: EncoderLayer, x: torch.Tensor, weights: torch.Tensor, numbers: int, *, alti: bool
) -> torch.Tensor:
    """‖T_i(x_j)‖ (norm-res-ln) or ALTI's contributions (`alti`), for every query and key: (T, T).

    T_i(x_j) = γ ⊙ (z_ij − mean(z_ij)) / s_i, where z_ij = Σ_h α_ij f_h(x_j) (+ x_i when
    j = i: the residual) and s_i is the LayerNorm's scale for query i, so that
    Σ_j T_i(x_j) + γ ⊙ (b_O − mean(b_O)) / s_i + β is the block's output y_i.
    """
    import torch

    from attnviz.measures.decoder_parts import alti_shares

    attention, norm = layer.attention, layer.attention_norm
    nh, hs = attention.num_heads, attention.head_size
    T, C = x.shape
    V = _values(layer, x)  # (nh, T, hs)
    W_O = attention.out_proj.weight.view(-1, nh, hs).permute(1, 2, 0)  # (nh, hs, C)
    f = V @ W_O  # (nh, T, C): f_h(x_j)
    pre = x + attention.out_proj(  # (T, C): the LayerNorm's input, bias included
        (weights @ V).transpose(0, 1).reshape(T, C)
    )
    scale = (pre.var(dim=-1, unbiased=False) + norm.eps).sqrt()  # (T,): s_i
    y = norm(pre)  # (T, C): the block's output
    rows = max(1, numbers // (T * C))  # queries per chunk
    result = []
    for start in range(0, T, rows):
        qs = slice(start, min(T, start + rows))
        z = torch.einsum("hij,hjc->ijc", weights[:, qs], f)  # (q, T, C): Σ_h α_ij f_h(x_j)
        q = torch.arange(qs.start, qs.stop)
        z[q - qs.start, q] += x[qs]  # the residual: token i's own x_i
        t = norm.weight * (z - z.mean(dim=-1, keepdim=True)) / scale[qs, None, None]  # (q, T, C)
        result.append(alti_shares(y[qs], t) if alti else t.norm(dim=-1))  # (q, T)
    return torch.cat(result)  # (T, T)


def _value_zeroing(
    layer: EncoderLayer, x: torch.Tensor, mask: torch.Tensor | None, numbers: int
) -> torch.Tensor:
    """Cosine distance of each token's layer output when key j's value is zeroed: (T, T)."""
    import torch
    import torch.nn.functional as F

    attention = layer.attention
    hs = attention.head_size
    T, C = x.shape
    q = attention.split_heads(attention.q_proj(x)[None])[0] / hs**0.5  # (nh, T, hs)
    k = attention.split_heads(attention.k_proj(x)[None])[0]  # (nh, T, hs)
    V = _values(layer, x)  # (nh, T, hs)
    scores = q @ k.transpose(-2, -1)  # (nh, T, T)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # (nh, T, T)
    heads = alpha @ V  # (nh, T, hs): every value in place

    def outputs(head_outputs: torch.Tensor) -> torch.Tensor:  # (B, nh, T, hs) -> (B, T, C)
        joined = head_outputs.transpose(1, 2).reshape(-1, T, C)  # (B, T, C)
        y = layer.attention_norm(x + attention.out_proj(joined))  # (B, T, C)
        return layer.ff_norm(y + layer.ff_out(layer.activation(layer.ff_in(y))))  # (B, T, C)

    original = outputs(heads[None])  # (1, T, C)
    chunk = max(1, numbers // (T * max(C, layer.ff_in.out_features)))  # keys per chunk
    distances = []
    for start in range(0, T, chunk):
        js = slice(start, min(T, start + chunk))
        # Zeroing v_j removes α_ij v_j from each query's head output: a rank-1 change per j.
        removed = alpha[:, :, js].permute(2, 0, 1)[..., None] * V[:, js].transpose(0, 1)[:, :, None]
        moved = outputs(heads[None] - removed)  # (j, T, C): every output, v_j zeroed
        distances.append(1 - F.cosine_similarity(original, moved, dim=-1))  # (j, T)
    distance = torch.cat(distances).T.clamp_min(0)  # (T, Tj): rows are the tokens that moved
    return distance / distance.sum(dim=-1, keepdim=True).clamp_min(1e-12)  # rows sum to 1

"""The functions a notebook or a script starts from: `analyse`, `prepare`, `head_stats`.

Each returns plain objects (numpy arrays, lists, dataclasses) that also draw
themselves; the command line is built on the same calls. Errors are raised as
`attnviz.AttnvizError` (a failure while running) or its subclass `attnviz.BadInput`
(a bad argument), each with a one-line message that says how to fix it.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attnviz.ablation import ablate
from attnviz.arguments import check_flag, check_max_tokens, check_model, check_text
from attnviz.corpus import head_stats, partial_head_stats
from attnviz.details import model_info
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES
from attnviz.limits import check_choice, check_range
from attnviz.long_input import analyse_long
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.generation import Generation

__all__ = [
    "ablate",
    "analyse",
    "analyse_long",
    "generate",
    "head_stats",
    "is_encoder_decoder",
    "model_info",
    "partial_head_stats",
    "prepare",
    "prepare_encdec",
    "sample_sentences",
]


def prepare(
    text: str,
    *,
    pair: str | None = None,
    model: str | None = None,
    truncate: bool = False,
    cache: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
) -> Prepared:
    """Find the model and tokenize `text` for it, without loading weights or importing torch.

    `model` is a local folder or a Hugging Face Hub id (None: `$ATTNVIZ_MODEL`, else the
    embedded all-MiniLM-L6-v2). `pair` is a second sentence, read as BERT reads pairs
    (encoders only). A text longer than `max_tokens` pieces (default: the model's limit;
    for a decoder at most 2,048) is refused, unless `truncate` keeps its start.
    `cache=False` keeps nothing on disk (a tokenizer converted from vocab.txt included).
    A decoder whose tokenizer adds no start token gets the model's own start token (BOS)
    in front, as interpretability tools read decoders; `bos=False` reads the text exactly
    as typed, without even the start token a tokenizer adds itself (then the first word
    takes the start token's role: the attention sink).
    `engine` computes the weights: "attnviz" (its own from-scratch modules), "transformers"
    (transformers' eager model, for model types attnviz does not compute: DeBERTa-v2, MPNet,
    ModernBERT, OLMo, Falcon, ...) or "auto" (attnviz's where it computes the type). One
    note on stderr says when transformers computed them.
    """
    from attnviz.prepared import prepare_input

    return prepare_input(text, None, pair=pair, model=model, truncate=truncate, cache=cache,
                     max_tokens=max_tokens, bos=bos, engine=engine)  # fmt: skip


def analyse(
    text: str,
    *,
    pair: str | None = None,
    model: str | None = None,
    mask: str = "none",
    dtype: str = "float32",
    truncate: bool = False,
    cache: bool = True,
    layers: Sequence[int] | None = None,
    max_tokens: int | None = None,
    bos: bool = True,
    target: str | None = None,
    generate: int | None = None,
    stack: str | None = None,
    engine: str = "auto",
) -> Analysis:
    """Every attention weight of `text`: an `Analysis` with `attentions` [layers, heads, T, T].

    `mask="causal"` runs an encoder with a causal mask (a what-if; titles say so; a
    decoder is causal already and refuses it). `dtype` is what the model computes in:
    "float32", "float16" or "bfloat16". `cache` reads and writes the attention cache, so a
    text seen before is not computed again (off when ATTNVIZ_NO_CACHE is set).
    `layers` keeps only those layers (`attentions[i]` is layer `analysis.layers[i]`): a
    long input whose whole attention is over `attnviz.limits.attention_budget()` needs it.
    `max_tokens` bounds the input and `bos=False` reads a decoder's text without its
    start token (see `prepare`), and `engine` picks what computes the weights (see `prepare`).

    An encoder-decoder (T5, mT5, BART, Marian, Pegasus; computed by transformers' eager model) reads
    `text` as the source and needs `target` (the text its decoder reads, e.g. the
    translation) or `generate=N` (its own greedy output, at most N new tokens, 1..256);
    `stack` picks the attention: "cross" (the default: each target piece over the source,
    [layers, heads, T_target, T_source]), "decoder" (causal, over the target) or "encoder"
    (over the source). See `prepare_encdec`. Other models refuse all three.
    """
    from attnviz.prepared import read_input

    source = read_input(text, pair=pair, model=model, target=target, generate=generate,
                        stack=stack, truncate=truncate, cache=cache, max_tokens=max_tokens,
                        bos=bos, engine=engine, mask=mask, dtype=dtype,
                        look_up=layers is None)  # fmt: skip
    return source.analyse(mask=mask, dtype=dtype, cache=cache, layers=layers)


def prepare_encdec(
    text: str,
    *,
    model: str | None = None,
    target: str | None = None,
    generate: int | None = None,
    stack: str | None = None,
    truncate: bool = False,
    cache: bool = True,
    max_tokens: int | None = None,
    engine: str = "auto",
) -> EncdecInput:
    """Tokenize a source (`text`) and a target for an encoder-decoder, without torch.

    The decoder reads `decoder_start_token_id` and then the target tokenized with its
    special tokens, less the last one: the labels shifted right, exactly as transformers'
    forward shifts `labels` (T5 and Marian: `<pad>` then the target; BART: `</s> <s>` then
    the target). `generate=N` lets the model write the target instead (greedy, at most N
    new tokens, 1..256, stopping at its end token; marked `generated` in titles and files).
    `stack` is "cross" (None), "decoder" or "encoder". `.check(...)` refuses bad layers,
    heads and words before the model runs; `.analyse()` runs it (transformers' eager
    attention, `output_attentions=True`; `engine` "auto" or "transformers", since attnviz's
    own engine does not compute these). A model that is not an encoder-decoder refuses
    `target`, `generate` and `stack` in one line.
    """
    from attnviz.encdec import encdec_input

    return encdec_input(
        text, None, model=model, target=target, generate=generate, stack=stack,
        truncate=truncate, cache=cache, max_tokens=max_tokens, engine=engine,
    )  # fmt: skip


def is_encoder_decoder(model: str | None = None, *, cache: bool = True) -> bool:
    """Whether `model` is an encoder-decoder attnviz reads (T5, mT5, BART, Marian, Pegasus),
    from its config.json alone (no tokenizer, no torch): then `analyse` needs a `target`
    or `generate`. A config of one of these that is corrupt raises in one line."""
    from attnviz.encdec import read_encdec

    return read_encdec(check_model(model), use_cache=check_flag(cache, "cache")) is not None


def generate(
    prompt: str,
    *,
    model: str | None = None,
    max_new: int = 20,
    sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    dtype: str = "float32",
    max_tokens: int | None = None,
    bos: bool = True,
    on_text: Callable[[str], None] | None = None,
    engine: str = "auto",
) -> Generation:
    """A decoder writes after `prompt`, and keeps what it attended to at each step.

    Greedy (the most likely token each step) unless `sample`: then each token is drawn
    from the softmax of the logits / `temperature`, among the `top_k` likeliest (None:
    all), with `seed` for a repeatable draw. Stops after an end token or `max_new` tokens
    (1 to 512; each step keeps a row per layer and head over everything before it, so
    512 steps after 100 pieces on a 30-layer, 9-head model keep about 210 MB; more than
    `attnviz.limits.attention_budget()` is refused before any work). `model` must be a
    decoder (GPT-2, Llama, Mistral, Qwen2) with its LM head. `on_text(s)` receives the
    continuation as it is written. The prompt is bounded, and `bos` puts the model's start
    token in front where the tokenizer adds none, as in `prepare`. Only attnviz's own engine
    writes (`engine` "transformers", or a model type only transformers computes, is refused).
    """
    from attnviz.generation import MAX_NEW, check_generation, run

    check_text(prompt, "the prompt")
    model = check_model(model)
    max_new = check_range(max_new, "max_new", (1, MAX_NEW))
    sample = check_flag(sample, "sample")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise BadInput(f"{{temperature}} must be a number, got {type(temperature).__name__}",
                       param="temperature")  # fmt: skip
    if not 0.01 <= float(temperature) <= 100:
        raise BadInput(f"{{temperature}} {temperature} is out of range: use 0.01..100",
                       param="temperature")  # fmt: skip
    if top_k is not None:
        top_k = check_range(top_k, "top_k", (1, 10_000_000))
    if seed is not None:
        seed = check_range(seed, "seed", (0, 2**63 - 1))
    if (top_k is not None or seed is not None or temperature != 1.0) and not sample:
        raise BadInput(
            "{temperature}, {top_k} and {seed} shape a draw: pass {sample} too (greedy takes "
            "the likeliest token and draws nothing)",
            param=("temperature", "top_k", "seed", "sample"),
        )
    check_choice(dtype, DTYPES, "dtype")
    if on_text is not None and not callable(on_text):
        raise BadInput(f"on_text must be a function of a str, got {type(on_text).__name__}")
    prepared = prepare(
        prompt, model=model, max_tokens=check_max_tokens(max_tokens), bos=bos, engine=engine
    )
    prepared.refuse_internals("generate (a decoder writing with attnviz's key/value cache)")
    check_generation(prepared, max_new, dtype=dtype)
    return run(
        prepared,
        max_new=max_new,
        sample=sample,
        temperature=float(temperature),
        top_k=top_k,
        seed=seed,
        dtype=dtype,
        on_text=on_text,
    )


def check_head_stats(
    *,
    by: str = "layer",
    top: int | None = None,
    model: str | os.PathLike[str] | None = None,
    engine: str = "auto",
) -> None:
    """Refuse, before any work, the `by` and `top` that `head_stats(...).sorted` would refuse
    for `model`: an unknown column, an encoder's column (cls, sep, next) for a decoder, or a
    decoder's (first) for an encoder. Reads the model's config.json only."""
    from attnviz.measures.stats import check_sort_column, sort_records

    sort_records([], by, top)
    if by in ("cls", "sep", "next", "first"):  # an encoder's columns, or a decoder's
        from attnviz.model.foreign import shape_of
        from attnviz.pipeline import read_model

        _, config, engine = read_model(check_model(model), engine)
        decoder = shape_of(config, engine).causal
        check_sort_column(by, decoder=decoder)


def sample_sentences() -> list[str]:
    """The sample sentences attnviz ships, English first; the command line reads the first
    when it is given no text."""
    from attnviz.text.samples import sample_sentences as samples

    return samples()

"""`attnviz.ablate`: a head's effect on a decoder's next token, by removing or patching it.

Attention weights say where a head looks, not whether the output depends on it (Jain &
Wallace 2019). The check is to remove the head and watch the output change, or to patch its
clean output into a corrupted run (Wang et al. 2022; Heimersheim & Nanda 2024): this module
checks the request before any weights are read, runs `attnviz.model.ablation.head_effects`
and wraps its numbers in an `Ablation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnviz.arguments import check_max_tokens, check_model, check_text
from attnviz.errors import BadInput
from attnviz.inputs import DTYPES
from attnviz.limits import ABLATE_WORD_CHARS, check_choice, resolve_index

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from attnviz.measures.ablation import Ablation, Piece
    from attnviz.prepared import Prepared

__all__ = ["MAX_PIECES", "METHODS", "ablate"]

METHODS = ("zero", "mean")  # attnviz.model.ablation.METHODS, without importing torch
# The longest prompt ablated: every head runs the layers from its own on, L·H/2 layer runs of
# the whole prompt (SmolLM2-135M: 30 layers × 9 heads, 135 runs' worth).
MAX_PIECES = 512
WORKS = "gemma-3-270m"  # a model that ablates, installed with attnviz[gemma]


def ablate(
    prompt: str,
    *,
    target: str,
    foil: str,
    method: str = "zero",
    patch: str | None = None,
    layer: int | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    bos: bool = True,
    dtype: str = "float32",
) -> Ablation:
    """Each head's effect on logit(`target`) − logit(`foil`), the decoder's next token after
    `prompt`.

    `target` and `foil` are words that are one piece each of the vocabulary, with the leading
    space the tokenizer gives a word after the prompt (the piece used is in the result). Every
    head (or those of `layer`) is removed in turn: its slice of the output projection's input
    set to 0 at every position (`method="zero"`) or to its mean over the prompt's positions
    ("mean"). With `patch` (a corrupted prompt of as many pieces), the corrupted prompt runs
    instead, with each head's output taken from the clean prompt's run in turn: the effect is
    the share of the clean − corrupted difference it restores. `model` must be a decoder with
    its LM head (the default all-MiniLM-L6-v2 has none): e.g. "gemma-3-270m".
    """
    check_text(prompt, "the prompt")
    _check_word(target, "target_text", "a word")
    _check_word(foil, "foil", "a word")
    check_choice(method, METHODS, "method")
    check_choice(dtype, DTYPES, "dtype")
    if patch is not None:
        _check_word(patch, "patch", "a corrupted prompt")
        if method != "zero":
            raise BadInput(
                "{method} says how a head is removed, and {patch} patches instead: drop one",
                param=("method", "patch"),
            )
    prepared = _prepare(prompt, check_model(model), max_tokens, bos)
    corrupted = None if patch is None else _prepare(patch, model, max_tokens, bos)
    if corrupted is not None and len(corrupted.pieces) != len(prepared.pieces):
        raise BadInput(
            f"{{patch}} is {len(corrupted.pieces)} pieces and the prompt {len(prepared.pieces)}: "
            "patching lines the two up position by position, so give a corrupted prompt of as "
            "many pieces (change a word for one of the same length in pieces)",
            param="patch",
        )
    layers = None if layer is None else [resolve_index(layer, prepared.num_layers, "layer")]
    from attnviz.text.tokenize import load_tokenizer

    tokenizer = load_tokenizer(prepared.source.folder)
    pieces = (_piece(tokenizer, prompt, target, "target_text", prepared),
              _piece(tokenizer, prompt, foil, "foil", prepared))  # fmt: skip
    if pieces[0].id == pieces[1].id:
        raise BadInput(
            f"{{target_text}} and {{foil}} are the same piece ({pieces[0].text!r}): their logit "
            "difference is always 0; pass two different words",
            param=("target_text", "foil"),
        )
    return _run(prepared, corrupted, pieces, method, layers, dtype)


def _prepare(text: str, model: str | None, max_tokens: int | None, bos: bool) -> Prepared:
    """The prompt tokenized; a model that cannot ablate refused before any weights are read."""
    from attnviz.prepared import prepare_input

    prepared = prepare_input(text, None, pair=None, model=model, truncate=False, cache=True,
                             max_tokens=check_max_tokens(max_tokens), bos=bos,
                             engine="auto")  # fmt: skip
    if prepared.shape.decoder is None:
        raise BadInput(
            f"ablate reads a decoder's next token, and {prepared.source.name} is an encoder "
            "without an output head: pass {model} a decoder with its LM head, e.g. "
            f'{WORKS} (pip install "attnviz[gemma]")',
            param="model",
        )
    prepared.refuse_internals("ablate (one head's output changed inside attnviz's decoder)")
    if len(prepared.pieces) > MAX_PIECES:
        raise BadInput(
            f"the prompt is {len(prepared.pieces)} pieces; ablate reads at most {MAX_PIECES} "
            "(every head runs the layers from its own on): shorten it"
        )
    return prepared


def _piece(tokenizer: Tokenizer, prompt: str, word: str, param: str, prepared: Prepared) -> Piece:
    """`word` as the one piece the tokenizer gives it after `prompt` (a space before it unless
    it or the prompt's end has one); BadInput showing its pieces when it is several."""
    from attnviz.measures.ablation import Piece

    name = "{" + param + "}"
    _check_word(word, param, "a word")
    text = word if word[:1].isspace() or prompt[-1:].isspace() else " " + word
    head = tokenizer.encode(prompt, add_special_tokens=False).ids
    whole = tokenizer.encode(prompt + text, add_special_tokens=False).ids
    ids = whole[len(head) :] if whole[: len(head)] == head else []
    if not ids:  # the word's first piece merged with the prompt's end: the word alone
        ids = tokenizer.encode(text, add_special_tokens=False).ids
    shown = [tokenizer.decode([i]) for i in ids]
    if len(ids) != 1:
        raise BadInput(
            f"{name} {word!r} is {len(ids)} pieces for {prepared.source.name} "
            f"({', '.join(map(repr, shown))}): pass a word that is one piece of its vocabulary",
            param=param,
        )
    return Piece(word, shown[0], ids[0])


def _check_word(value: object, param: str, what: str) -> None:
    if not isinstance(value, str):
        raise BadInput(f"{{{param}}} must be a string, got {type(value).__name__}", param=param)
    if not value.strip():
        raise BadInput(f"{{{param}}} is empty: pass {what}", param=param)
    if what == "a word" and len(value) > ABLATE_WORD_CHARS:
        raise BadInput(
            f"{{{param}}} is {len(value):,} characters; a word that is one piece of a "
            f"vocabulary is at most {ABLATE_WORD_CHARS:,}: pass one word",
            param=param,
        )


def _run(
    prepared: Prepared,
    corrupted: Prepared | None,
    pieces: tuple[Piece, Piece],
    method: str,
    layers: list[int] | None,
    dtype: str,
) -> Ablation:
    """Load the decoder, measure, and wrap the numbers."""
    from attnviz import perf
    from attnviz.measures.ablation import Ablation
    from attnviz.model.weights import load_writer

    perf.import_torch()
    from attnviz.model.ablation import head_effects

    # _prepare refused an encoder
    decoder = load_writer(prepared.source.folder, prepared.config, dtype, to="ablate it")
    target, foil = pieces
    effects = head_effects(
        decoder,
        prepared.pieces.ids,
        target.id,
        foil.id,
        method=method,
        corrupted_ids=None if corrupted is None else corrupted.pieces.ids,
        layers=layers,
    )
    if effects.corrupted is not None and abs(effects.clean - effects.corrupted) < 1e-6:
        raise BadInput(
            f"the prompt and {{patch}} give the same logit difference ({effects.clean:+.3f}): "
            "there is nothing to restore; pass a corrupted prompt that changes the answer",
            param="patch",
        )
    return Ablation(
        model=prepared.source.name,
        prompt=prepared.pieces.text,
        input_ids=list(prepared.pieces.ids),
        tokens=list(prepared.pieces.tokens),
        target=target,
        foil=foil,
        method=method if corrupted is None else "patch",
        clean=effects.clean,
        corrupted=effects.corrupted,
        patch=None if corrupted is None else corrupted.pieces.text,
        layers=list(range(prepared.num_layers)) if layers is None else layers,
        logit_diffs=effects.logit_diffs.double().numpy(),
    )

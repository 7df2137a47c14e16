"""Your own attention: an `Analysis` of weights computed elsewhere (`from_attentions`, `--load`).

`from_attentions(attentions, tokens)` takes what another tool gives: transformers' tuple of
per-layer `(batch, heads, T, T)` tensors (`output_attentions=True`), an `[L, H, T, T]` (or
`[L, batch, H, T, T]`, or a rectangle `[L, H, Tq, Tk]` with `key_tokens`) numpy array or
torch tensor on any device in any float dtype, or one layer `[H, T, T]`. It checks them in
bounded time and memory before any copy (the size from the shape, against the attention
budget; the shape against the tokens; then finite, non-negative, rows summing to 1) and
returns an `Analysis` whose views, images, pages, `find`, `row`, `rollout` (a square) and
exports work. What needs the model (explain, the measures other than the weight, compare)
refuses in one line: there is no model to run again.

torch is imported only when a tensor is given. Reading an .npz of attention (`--load`) is
attnviz.loading's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.analysis import Analysis
from attnviz.errors import BadInput
from attnviz.inputs import ARRAYS_ORIGIN, Asked, Input, ModelInfo, check_indices, no_model
from attnviz.limits import amount, attention_budget

if TYPE_CHECKING:
    from attnviz.measures.explain import Explanation
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.text.pieces import Pieces

__all__ = [
    "DEFAULT_NAME",
    "GIVEN",
    "MAX_LAYERS",
    "GivenInput",
    "arrays_analysis",
    "checked_analysis",
    "from_attentions",
]

GIVEN = "given"  # the engine of attention a caller gave: no engine of attnviz's computed it
DEFAULT_NAME = "your attention"  # how titles name attention given without a model name
MAX_LAYERS = 4096  # entries of a tuple of layers (a model has some dozens)
MAX_NAME = 200  # characters of a model's display name
MAX_TOKEN_CHARS = 1000  # characters of one token


@dataclass(frozen=True)
class GivenInput(Input["Analysis"]):
    """The input of attention given as arrays: its pieces, a model's name and the checked
    arrays, no model.

    It is what `Analysis.prepared` needs (attnviz.inputs.PreparedInput); `analyse()` hands
    the arrays over as an `Analysis`, and whatever would run the model again refuses in one
    line."""

    name: str
    pieces: Pieces
    layers: int
    heads: int
    attentions: np.ndarray = field(repr=False, compare=False)  # (L, H, Tq, Tk) float32, checked
    causal: bool = False
    windows: tuple[int | None, ...] = ()  # each model layer's sliding window (None: none)
    # What computed the weights, as `inputs.PreparedInput` asks: "given" (a caller's arrays:
    # no engine of attnviz's, titles unmarked), or what an attnviz export says it was.
    engine: str = GIVEN
    # The model's layer of each entry of `attentions` when not all (None: all); the keys'
    # pieces of a rectangle; whether the rows sum to 1; the dtype they came in.
    kept: tuple[int, ...] | None = None
    key_pieces: Pieces | None = None
    normalised: bool = True
    dtype: str = "float32"

    @property
    def source(self) -> ModelSource:
        from attnviz.model.locate import ModelSource

        return ModelSource(self.name, Path(), ARRAYS_ORIGIN)

    @property
    def config(self) -> dict[str, Any]:
        raise no_model("reading the model's config")

    @property
    def shape(self) -> ModelShape:
        raise no_model("reading the model's shape")

    @property
    def model(self) -> ModelInfo:
        return ModelInfo(
            self.name,
            "attention arrays",
            self.layers,
            self.heads,
            Path(),
            ARRAYS_ORIGIN,
            decoder=self.causal,
            windows=self.windows,
        )

    @property
    def num_layers(self) -> int:
        return self.layers

    @property
    def num_heads(self) -> int:
        return self.heads

    def check_asked(self, asked: Asked) -> None:
        """A layer or a head the arrays lack; a measure or a comparison, which need the model."""
        from attnviz.measures.contributions import check_measure

        check_measure(asked.measure, head=asked.head, heads=asked.heads, view=asked.view)
        check_indices(asked, self.layers, self.heads)
        if asked.compared:
            raise no_model("compare")
        if asked.measure != "weight":
            raise no_model(f"measure {asked.measure!r}")

    def analyse(self, **_: Any) -> Analysis:
        """The arrays as an `Analysis` (nothing to compute)."""
        return Analysis(
            prepared=self,
            attentions=self.attentions,
            dtype=self.dtype,
            layers=self.kept,
            key_pieces=self.key_pieces,
            normalised=self.normalised,
        )

    def refuse_internals(self, what: str, *, param: str | None = None) -> None:
        raise no_model(what)

    def note_engine(self) -> None:
        """Nothing to say: no engine computed the weights."""

    def explain(self, **_: Any) -> Explanation:
        raise no_model("explain")


def arrays_analysis(
    attentions: np.ndarray,
    pieces: Pieces,
    *,
    key_pieces: Pieces | None = None,
    name: str = DEFAULT_NAME,
    causal: bool = False,
    normalised: bool = True,
    dtype: str = "float32",
    layers: Sequence[int] | None = None,
    windows: Sequence[int | None] = (),
    engine: str = GIVEN,
) -> Analysis:
    """An `Analysis` of checked float32 `attentions` (L, H, Tq, Tk) over `pieces` (the rows)
    and `key_pieces` (the columns; None: a square), with no model. For a face module that
    has its arrays and pieces already (`from_attentions` checks what a user gives first).
    `layers`: the model's layer of each entry, when not all of them; `windows`: each model
    layer's sliding window in pieces (None: none), which a causal view masks beyond;
    `engine`: what computed the weights, when an export says ("attnviz", "transformers");
    "given" otherwise."""
    L, H = attentions.shape[:2]
    kept = None if layers is None or list(layers) == list(range(L)) else tuple(layers)
    total = L if kept is None else max(kept) + 1
    given = GivenInput(name, pieces, total, H, attentions, causal, tuple(windows), engine, kept,
                       key_pieces, normalised, dtype)  # fmt: skip
    return given.analyse()


# ---------------------------------------------------------------- from_attentions


def from_attentions(
    attentions: Any,
    tokens: Sequence[str],
    *,
    key_tokens: Sequence[str] | None = None,
    words: Sequence[int | None] | None = None,
    key_words: Sequence[int | None] | None = None,
    word_labels: Sequence[str] | None = None,
    model: str | None = None,
    causal: bool | None = None,
    batch: int = 0,
    normalised: bool = True,
    type_ids: Sequence[int] | None = None,
) -> Analysis:
    """An `Analysis` of attention computed elsewhere, checked before anything is drawn.

    `attentions`: transformers' tuple of per-layer `(batch, heads, T, T)` tensors
    (`outputs.attentions`; the item `batch` is taken), a numpy array or torch tensor
    `[L, H, T, T]` (or `[L, batch, H, T, T]`), one layer `[H, T, T]`, or a rectangle
    `[L, H, Tq, Tk]` whose keys are `key_tokens` (queries and keys from two inputs: an
    encoder-decoder's cross-attention). Any device, any float dtype; it is copied to float32.
    `tokens`: one label per query (per row). `words`: the word of each token, as
    `BatchEncoding.word_ids()` gives it (an int per token, None for a special token); None:
    read from the tokens' marks (`##`, `Ġ`, `▁`). `key_words` the same for `key_tokens`;
    `word_labels` names the query words (one per word, specials included).
    `model`: the name titles show (nothing is loaded). `causal`: None detects it (every
    weight above the diagonal is 0); True marks the later keys masked. `normalised=False`
    accepts rows that do not sum to 1, and every title says so. `type_ids` (0 or 1 per
    token, as a tokenizer's `token_type_ids`) marks a sentence pair's second sentence.
    The analysis keeps a float32 copy: the caller's array or tensor is never aliased.
    """
    return checked_analysis(
        attentions,
        tokens,
        key_tokens=key_tokens,
        words=words,
        key_words=key_words,
        word_labels=word_labels,
        model=model,
        causal=causal,
        batch=batch,
        normalised=normalised,
        type_ids=type_ids,
        owned=False,
    )


def checked_analysis(
    attentions: Any,
    tokens: Sequence[str],
    *,
    key_tokens: Sequence[str] | None,
    words: Sequence[int | None] | None,
    key_words: Sequence[int | None] | None,
    word_labels: Sequence[str] | None,
    model: str | None,
    causal: bool | None,
    batch: int,
    normalised: bool,
    type_ids: Sequence[int] | None,
    owned: bool,
) -> Analysis:
    """`from_attentions`, every argument given; `owned`: the arrays are attnviz's own (read
    from a file: attnviz.loading), kept without a copy."""
    if not isinstance(normalised, bool):
        raise BadInput("{normalised} must be True or False", param="normalised")
    if causal is not None and not isinstance(causal, bool):
        raise BadInput("{causal} must be True, False or None (detect)", param="causal")
    name = _name(model)
    array, dtype = _as_array(attentions, batch, owned)  # (L, H, Tq, Tk) float32, checked
    _, _, Tq, Tk = array.shape  # (L, H, Tq, Tk)
    if key_words is not None and key_tokens is None:
        raise BadInput(
            "{key_words} groups a rectangle's keys: give {key_tokens} too, or leave it out",
            param=("key_words", "key_tokens"),
        )
    queries = _tokens(tokens, "tokens", Tq, "rows (queries)")
    keys = None if key_tokens is None else _tokens(key_tokens, "key_tokens", Tk, "columns (keys)")
    if keys is None and Tq != Tk:
        raise BadInput(
            f"{{attentions}} is {Tq} queries × {Tk} keys, a rectangle: pass the keys' tokens "
            f"as {{key_tokens}} ({Tk} of them)",
            param=("attentions", "key_tokens"),
        )
    _check_weights(array, normalised, dtype)
    # causal when nothing lies above the diagonal (a layer at a time: no whole-array copy)
    found = keys is None and Tq > 1 and not any(np.triu(layer, 1).any() for layer in array)
    if causal and not found:
        raise BadInput(
            "{causal} is True, but some weights lie above the diagonal (a query attends to a "
            "later key): pass causal=None to detect it, or False",
            param="causal",
        )
    from attnviz.text.given import given_pieces, guess_word_ids

    word_ids = _word_ids(words, "words", Tq)
    if word_ids is None:
        word_ids = guess_word_ids(queries)
    labels = _labels(word_labels, "word_labels")
    _check_word_labels(labels, word_ids)
    pieces = given_pieces(queries, word_ids, labels, second=_second(type_ids, Tq))
    key_pieces = None
    if keys is not None:
        key_pieces = given_pieces(keys, _word_ids(key_words, "key_words", Tk))
    return arrays_analysis(
        array,
        pieces,
        key_pieces=key_pieces,
        name=name,
        causal=found if causal is None else causal,
        normalised=normalised,
        dtype=dtype,
    )


def _name(model: object) -> str:
    if model is None:
        return DEFAULT_NAME
    if not isinstance(model, str) or not model.strip():
        raise BadInput("{model} must be a name for the titles (a str), or None", param="model")
    return " ".join(model.split())[:MAX_NAME]


def _is_tensor(value: object) -> bool:
    """True for a torch tensor, without importing torch when it is not one."""
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach")


def _shape_of(value: object, what: str) -> tuple[int, ...]:
    if _is_tensor(value):
        layout, device = str(getattr(value, "layout", "")), str(getattr(value, "device", ""))
        if layout != "torch.strided" or device == "meta":  # no data to copy out as it is
            kind = "on the meta device" if device == "meta" else f"of layout {layout}"
            raise BadInput(
                f"{{attentions}}: {what} is a tensor {kind}, which holds no dense weights to "
                "read: pass the dense tensor of weights (tensor.to_dense(), or the model run "
                "on a real device)",
                param="attentions",
            )
    if _is_tensor(value) or isinstance(value, np.ndarray):
        return tuple(int(n) for n in value.shape)  # type: ignore[attr-defined]
    if value is None:  # what a model whose attention is not eager puts in output_attentions
        raise BadInput(
            f"{{attentions}}: {what} is None, not weights: transformers returns None for a "
            "layer whose attention kernel does not compute them (sdpa, flash); load the model "
            'with attn_implementation="eager" and run it with output_attentions=True',
            param="attentions",
        )
    raise BadInput(
        f"{{attentions}} must be a numpy array, a torch tensor or a tuple of them (one per "
        f"layer, as transformers' output_attentions gives); {what} is {type(value).__name__}",
        param="attentions",
    )


def _as_array(attentions: object, batch: object, owned: bool) -> tuple[np.ndarray, str]:
    """`attentions` as a float32 numpy array (L, H, Tq, Tk) and the dtype it came in, its
    size checked from its shape before any copy; a copy unless `owned` (attnviz's own)."""
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise BadInput(f"{{batch}} must be an item number (an int), got {batch!r}", param="batch")
    if isinstance(attentions, tuple | list):  # one entry per layer
        if not attentions or len(attentions) > MAX_LAYERS:
            # transformers' output_attentions is () when the attention kernel is not eager
            eager = (
                " (transformers gives none unless the model is loaded with attn_implementation="
                '"eager")'
                if not attentions
                else ""
            )
            raise BadInput(
                f"{{attentions}} holds {len(attentions):,} layers: give 1 to {MAX_LAYERS:,}{eager}",
                param="attentions",
            )
        layers = list(attentions)
        shapes = [_shape_of(layer, f"layer {i}") for i, layer in enumerate(layers)]
        if len(set(shapes)) > 1:
            raise BadInput(
                f"{{attentions}}' layers differ in shape ({shapes[0]} and "
                f"{next(s for s in shapes if s != shapes[0])}): give one input's layers",
                param="attentions",
            )
        shape = (len(layers), *shapes[0])
    else:
        layers = [attentions]
        shape = _shape_of(attentions, "it")
        if len(shape) == 3:  # one layer (H, T, T)
            shape = (1, *shape)
    if len(shape) != 5 and batch != 0:
        raise BadInput(
            f"{{batch}} {batch} picks an item of a batch, but these attentions {shape} have no "
            "batch axis: leave batch out",
            param="batch",
        )
    if len(shape) == 5:  # (L, batch, H, Tq, Tk)
        B = shape[1]
        if not -B <= batch < B:
            raise BadInput(
                f"{{batch}} {batch} is out of range: the attentions hold {B} items (0..{B - 1})",
                param="batch",
            )
        shape = (shape[0], *shape[2:])
    if len(shape) != 4 or 0 in shape:
        raise BadInput(
            f"{{attentions}} must be [layers, heads, T, T] (or one layer [heads, T, T], or a "
            f"tuple of [batch, heads, T, T] per layer), got shape {shape}",
            param="attentions",
        )
    size = math.prod(shape) * 4  # float32
    budget = attention_budget()
    if size > budget:
        raise BadInput(
            f"{{attentions}} {shape} is {amount(size)} in float32, past attnviz's attention "
            f"budget ({amount(budget)}; ATTNVIZ_ATTENTION_MB raises it): give fewer layers or "
            "a shorter input",
            param="attentions",
        )
    dtype = _dtype_name(layers[0])
    if isinstance(attentions, tuple | list):  # (batch, H, Tq, Tk) or (H, Tq, Tk) per layer
        axis = 0 if len(shapes[0]) == 4 else None
        array = np.stack([_to_numpy(layer, batch, axis) for layer in layers])  # (L, H, Tq, Tk)
    else:
        array = _to_numpy(attentions, batch, 1 if len(_shape(attentions)) == 5 else None)
        if array.ndim == 3:
            array = array[None]  # (1, H, T, T)
    result = np.ascontiguousarray(array, dtype=np.float32)  # (L, H, Tq, Tk)
    if not owned and isinstance(attentions, np.ndarray) and np.may_share_memory(result, attentions):
        result = result.copy()  # the caller's array stays theirs: writable, never aliased
    return result, dtype


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape)


def _dtype_name(value: Any) -> str:
    """The float dtype `value` holds ("float16", "bfloat16", "float32"); BadInput for any
    other kind of number."""
    if _is_tensor(value):
        if not value.is_floating_point():
            raise BadInput(
                f"{{attentions}} must hold floats (the weights), got {value.dtype}",
                param="attentions",
            )
        name = str(value.dtype).removeprefix("torch.")
    else:
        if value.dtype.kind != "f":
            raise BadInput(
                f"{{attentions}} must hold floats (the weights), got {value.dtype}",
                param="attentions",
            )
        name = str(value.dtype)
    return name if name in ("float16", "bfloat16") else "float32"


def _to_numpy(value: Any, batch: int, axis: int | None) -> np.ndarray:
    """One array or tensor as float32 numpy, item `batch` of its `axis` taken first (None:
    the whole): a layer of transformers' tuple is (batch, H, T, T), a stack (L, batch, ...)."""
    if _is_tensor(value):
        import torch

        with torch.no_grad():
            tensor = value.detach()
            if axis is not None:
                tensor = tensor.select(axis, batch)
            # a copy even when already there: the caller's tensor is never aliased
            return tensor.to(device="cpu", dtype=torch.float32, copy=True).numpy()
    array = np.asarray(value)
    return array if axis is None else np.take(array, batch, axis=axis)


def _check_weights(array: np.ndarray, normalised: bool, dtype: str) -> None:
    """Refuse weights that are not attention: not finite, negative, or (when `normalised`)
    rows not summing to 1; each in one line naming the first layer and head."""
    finite = np.isfinite(array).all(axis=(2, 3))  # (L, H)
    if not finite.all():
        layer, head = np.argwhere(~finite)[0]
        raise BadInput(
            f"{{attentions}} holds NaN or infinite weights (first in layer {layer}, head "
            f"{head}): attention weights are finite numbers; check how they were computed",
            param="attentions",
        )
    negative = (array < 0).any(axis=(2, 3))  # (L, H)
    if negative.any():
        layer, head = np.argwhere(negative)[0]
        raise BadInput(
            f"{{attentions}} holds negative weights (first in layer {layer}, head {head}): "
            "attention weights are probabilities, after the softmax; pass the weights, not "
            "the scores",
            param="attentions",
        )
    if not normalised:
        return
    tolerance = 1e-2 if dtype in ("float16", "bfloat16") else 1e-3
    sums = array.sum(axis=-1, dtype=np.float64)  # (L, H, Tq)
    off = np.abs(sums - 1.0) > tolerance
    if off.any():
        layer, head, row = np.argwhere(off)[0]
        raise BadInput(
            f"the rows of {{attentions}} must each sum to 1 (softmax weights): row {row} of layer "
            f"{layer}, head {head} sums to {sums[layer, head, row]:.4g}; pass "
            "normalised=False to draw the weights as they are (every title then says so)",
            param=("attentions", "normalised"),
        )


def _tokens(tokens: object, param: str, count: int, what: str) -> list[str]:
    """`tokens` as a list of `count` str; BadInput naming `param` otherwise."""
    if isinstance(tokens, np.ndarray):
        if tokens.dtype.kind != "U" or tokens.ndim != 1:
            raise BadInput(
                f"{{{param}}} must be a list of str, got a {tokens.dtype} array {tokens.shape}",
                param=param,
            )
        tokens = tokens.tolist()
    if isinstance(tokens, str | bytes) or not isinstance(tokens, Sequence):
        raise BadInput(
            f"{{{param}}} must be a list of str (one per token), got {type(tokens).__name__}",
            param=param,
        )
    if len(tokens) != count:
        raise BadInput(
            f"{{{param}}} has {len(tokens):,} tokens, but the attentions have {count:,} {what}",
            param=param,
        )
    for token in tokens:
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
            shown = type(token).__name__ if not isinstance(token, str) else "a longer str"
            raise BadInput(
                f"{{{param}}} must hold str of at most {MAX_TOKEN_CHARS} characters, got {shown}",
                param=param,
            )
    return [str(t) for t in tokens]


def _word_ids(words: object, param: str, count: int) -> list[int | None] | None:
    """`words` as word ids, one per token (None: special); None when not given."""
    if words is None:
        return None
    if isinstance(words, np.ndarray):
        if words.dtype.kind not in "iu" or words.ndim != 1:
            raise BadInput(f"{{{param}}} must be an int per token", param=param)
        words = words.tolist()
    if isinstance(words, str | bytes) or not isinstance(words, Sequence) or len(words) != count:
        raise BadInput(
            f"{{{param}}} must give each of the {count:,} tokens its word (an int, or None for "
            "a special token), as BatchEncoding.word_ids() does",
            param=param,
        )
    for w in words:
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise BadInput(
                f"{{{param}}} must hold word numbers (int >= 0) or None, got {w!r}"[:200],
                param=param,
            )
    return list(words)


def _second(type_ids: object, count: int) -> list[bool] | None:
    """`type_ids` as a flag per token (True: sentence B); None when not given or all 0."""
    if type_ids is None:
        return None
    if isinstance(type_ids, np.ndarray):
        type_ids = type_ids.tolist()
    if (
        isinstance(type_ids, str | bytes)
        or not isinstance(type_ids, Sequence)
        or len(type_ids) != count
        or any(t not in (0, 1) or isinstance(t, bool) for t in type_ids)
    ):
        raise BadInput(
            f"{{type_ids}} must give each of the {count:,} tokens 0 (sentence A) or 1 "
            "(sentence B), as token_type_ids do",
            param="type_ids",
        )
    return [t == 1 for t in type_ids] if any(type_ids) else None


def _labels(labels: object, param: str) -> list[str] | None:
    if labels is None:
        return None
    if isinstance(labels, np.ndarray):
        labels = labels.tolist()
    if isinstance(labels, str | bytes) or not isinstance(labels, Sequence):
        raise BadInput(f"{{{param}}} must be a list of str, one per word", param=param)
    if not all(isinstance(x, str) and len(x) <= MAX_TOKEN_CHARS for x in labels):
        raise BadInput(f"{{{param}}} must hold str, one per word", param=param)
    return list(labels)


def _check_word_labels(labels: Sequence[str] | None, word_ids: Sequence[int | None]) -> None:
    """Refuse word labels that are not one per word (a run of tokens of one word id, or a
    special token)."""
    if labels is None:
        return
    count = sum(1 for i, w in enumerate(word_ids) if i == 0 or w is None or w != word_ids[i - 1])
    if len(labels) != count:
        raise BadInput(
            f"{{word_labels}} names {len(labels):,} words, but the tokens make {count:,}",
            param="word_labels",
        )

"""Inputs too long for the whole views: their layers checked against the config first, the
refusal that names the views made for length, and the pooled views read a block at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from attnviz import api
from attnviz.cli.analysing import encdec_model, prepare_request
from attnviz.cli.input import Output, Request
from attnviz.cli.options import PoolBy, PoolOptions
from attnviz.cli.printing import wrote
from attnviz.errors import BadInput
from attnviz.output import HTML_SUFFIXES, IMAGE_SUFFIXES, atomic_write, check_output

if TYPE_CHECKING:
    from attnviz.measures.long import LongResult


def check_long_shape(request: Request, layers: Sequence[int] = (), head: int | None = None) -> None:
    """The layers and head a long view will show, checked against the model's config before
    its weights are read: a long input takes minutes to run, then a bad --layer was refused."""
    from attnviz.limits import resolve_index

    if not layers and head is None:
        return
    shape = api.model_info(request.model, engine=request.engine).shape
    for layer in layers:
        resolve_index(layer, shape.layers, "layer")
    if head is not None:
        resolve_index(head, shape.heads, "head")


def long_pieces(request: Request) -> int | None:
    """The pieces of a text refused for its length by the whole views (a decoder's 2,048)
    that the views made for length read whole (up to `limits.LONG_TOKENS`); None when they
    cannot read it either (then the usual refusal stands)."""
    from attnviz.pipeline import prepare

    if request.truncate or request.load is not None or encdec_model(request):
        return None
    try:  # tokenized as `analyse_long` tokenizes (no weights, no torch)
        tokenized = prepare(request.text, model=request.model, bos=request.bos,
                            max_tokens=request.max_tokens, blocked=True,
                            engine=request.engine)  # fmt: skip
    except BadInput:
        return None
    return len(tokenized.pieces)


@contextlib.contextmanager
def whole_or_pooled(request: Request, poolable: bool, *, query: bool) -> Iterator[None]:
    """Around the whole view of `show` (`query`: it has --query) or `heads`: a text refused
    for its length that the views made for length read is refused naming them (`--pool N`,
    `--query WORD`) besides --truncate, which keeps only its start. `poolable`: no option
    the pooled view refuses. Only a refusal tokenizes again."""
    try:
        yield
    except BadInput as exc:
        T = None
        if poolable and request.measure == "weight":
            name_the_pool(exc, request)
        if poolable and request.measure == "weight" and "pieces long" in exc.template:
            T = long_pieces(request)
        if T is None:
            raise
        row = ", read one row ({query} WORD)" if query else ""
        raise BadInput(
            f"the text is {T:,} pieces long, more than the whole views read: draw it in blocks "
            f"({{pool}} {-(-T // 64)}){row}, or keep its start ({{truncate}})",
            param=("pool", "query", "truncate") if query else ("pool", "truncate"),
        ) from None


def name_the_pool(exc: BadInput, request: Request) -> None:
    """A --max-tokens refused for the whole views' bound, refused again naming the --pool
    that reads it (the views made for length never hold a layer whole); else nothing."""
    if "more than attnviz keeps" not in exc.template:
        return
    blocks = -(-(request.max_tokens or 0) // 64)
    raise BadInput(
        f"{exc.template}, or draw it in blocks ({{pool}} {blocks}), which never holds a "
        "layer's attention whole",
        param=("max_tokens", "pool"),
    ) from None


def too_long(request: Request) -> bool:
    """Whether the text is refused for its length (its pieces past the bound). A text found
    in the cache was read whole before: no tokenizer then."""
    try:
        prepare_request(replace(request, quiet=True), cached=True)
    except BadInput as exc:
        return "pieces long" in exc.template
    return False


def refuse_pool_by(pooling: PoolOptions, pool: int | None) -> None:
    """--pool-by pools the blocks a pooled view draws: refused when the view is drawn whole
    (`pool` None), where it would be dropped without a word."""
    if pool is None and pooling.pool_by is not PoolBy.mean:
        raise BadInput("{pool_by} pools the blocks of pieces {pool} draws: add {pool} N, or "
                       "leave out {pool_by}", param=("pool_by", "pool"))  # fmt: skip


def refuse_pair_and_mask(request: Request, option: str) -> None:
    """The views made for length (`option` asks for one) read one text with the model as it
    is: refuse --pair and --mask causal, which they would drop without a word."""
    unread = [("{pair}", request.pair is not None), ("{mask} causal", request.mask != "none")]
    if any(given for _, given in unread):
        names = " and ".join(name for name, given in unread if given)
        raise BadInput(f"{{{option}}} reads one text with the model as it is: leave out "
                       f"{names}, or {{{option}}}", param=(option, "pair", "mask"))  # fmt: skip


def pooled(
    request: Request,
    output: Output,
    pooling: PoolOptions,
    subset: Sequence[int] | None,
    exclude: Sequence[str] | None,
    layers: Sequence[int] = (),
    head: int | None = None,
) -> LongResult:
    """The input pooled in blocks of `pooling.pool` pieces, computed a block of queries at a
    time, the `layers` and `head` shown checked first (for a page, refused before the model
    runs when the page would be too large). What the pooled views cannot honour is refused."""
    if request.load is not None:
        raise BadInput("{pool} computes the attention a block at a time: leave it out with "
                       "{load}", param=("pool", "load"))  # fmt: skip
    if encdec_model(request):
        raise BadInput("{pool} runs attnviz's own engine a block at a time, and an "
                       "encoder-decoder's stacks come whole from transformers: drop {pool}",
                       param="pool")  # fmt: skip
    if subset is not None or exclude or request.measure != "weight":
        raise BadInput(
            "{pool} draws every head's weights over every piece: leave out {heads}, "
            "{exclude} and {measure}",
            param=("pool", "heads", "exclude", "measure"),
        )
    refuse_pair_and_mask(request, "pool")
    check_long_shape(request, layers, head)
    out = output.out
    page = out is not None and out.suffix.lower() in HTML_SUFFIXES
    if out is not None:
        check_output(out, IMAGE_SUFFIXES + HTML_SUFFIXES, output.style)
    return api.analyse_long(request.text, model=request.model, pool=pooling.pool,
                            pool_by=pooling.pool_by.value, max_tokens=request.max_tokens,
                            truncate=request.truncate, bos=request.bos, dtype=request.dtype,
                            engine=request.engine, page=page)  # fmt: skip


def draw_pooled(
    output: Output,
    view: Any,
    page: Callable[[], str] | None = None,
    data: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Print the pooled `view`, or with --json what it shows (`data()`); write it to --out:
    an image, or for .html the `page()`."""
    from attnviz.cli.printing import print_json

    out = output.out
    if out is not None and out.suffix.lower() in HTML_SUFFIXES and page is not None:
        with atomic_write(out, "w") as handle:
            handle.write(page())
    elif out is not None:
        view.save(out, **asdict(output.style))
    if output.as_json and data is not None:
        print_json(data())
    else:
        output.console.print(view)
    wrote(out)


def refuse_whole_json(as_json: bool) -> None:
    """--json on `heads` and `model` prints a pooled map; the whole attention is `export`'s."""
    if as_json:
        raise BadInput(
            "{json} prints a pooled map: add {pool} N, or write the whole attention with "
            "attnviz export TEXT --out FILE.json",
            param=("json", "pool"),
        )

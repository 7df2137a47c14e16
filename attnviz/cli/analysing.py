"""From a command's `Request` to what it draws: the text prepared for the model (notes on
stderr), checked cheaply before torch, then analysed; or the analysis a --load file holds."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.errors import defer_note, in_flags, one_line
from attnviz.cli.input import Request
from attnviz.errors import BadInput
from attnviz.limits import attention_budget
from attnviz.output import HTML_SUFFIXES, IMAGE_SUFFIXES, ImageStyle, check_output
from attnviz.prepared import Prepared

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.inputs import Input


PAGES = IMAGE_SUFFIXES + HTML_SUFFIXES  # what --out writes on show, heads and model
Read = TypeVar("Read", "Prepared", "Prepared | EncdecInput")


def prepare_request(request: Request, cached: bool = False) -> tuple[Prepared, Analysis | None]:
    """The request's text tokenized for the model, or with `cached` its analysis found in the
    cache (whose entry brings the pieces: no tokenizer then); notes on stderr (never stdout,
    so JSON stays clean)."""
    from attnviz.prepared import from_cache

    def prepare() -> Prepared:
        hit = None
        if cached and request.cache:
            hit = from_cache(request.text, pair=request.pair, model=request.model,
                             truncate=request.truncate, mask=request.mask, dtype=request.dtype,
                             cache=True, max_tokens=request.max_tokens, bos=request.bos,
                             engine=request.engine)  # fmt: skip
        return hit or api.prepare(request.text, pair=request.pair, model=request.model,
                                  truncate=request.truncate, cache=request.cache,
                                  max_tokens=request.max_tokens, bos=request.bos,
                                  engine=request.engine)  # fmt: skip

    prepared = _noted(request, prepare)
    return prepared, prepared.found


def request_input(request: Request) -> Prepared | EncdecInput:
    """The request's input, read by the face's one preparation (`attnviz.prepared.read_input`):
    an encoder-decoder's source and target, a text seen before from the cache, or the text
    tokenized; notes on stderr."""
    from attnviz.prepared import read_input

    def read() -> Prepared | EncdecInput:
        return read_input(request.text, pair=request.pair, model=request.model,
                          target=request.target, generate=request.generate, stack=request.stack,
                          truncate=request.truncate, cache=request.cache,
                          max_tokens=request.max_tokens, bos=request.bos, engine=request.engine,
                          mask=request.mask, dtype=request.dtype)  # fmt: skip

    return _noted(request, read)


def _noted(request: Request, read: Callable[[], Read]) -> Read:
    """`read()`'s input, a text read from standard input said so when refused; what
    truncation dropped and a poor fit to the vocabulary noted on stderr (not under --quiet)."""
    notices.quiet = request.quiet  # a converted GGUF model's notes obey --quiet too
    try:
        source = read()
    except BadInput as exc:
        if request.from_stdin and str(exc).startswith("the text "):
            raise BadInput(
                exc.template + " (the text was read from standard input; to pass it as an "
                "argument instead, quote it: attnviz COMMAND \"TEXT\"; in a 'while read' loop "
                "add </dev/null so the command does not read the loop's input)",
                param=exc.params,
            ) from None
        raise
    if request.quiet:
        return source
    if not isinstance(source, Prepared):  # an encoder-decoder's
        dropped = source.source_pieces.dropped
        if dropped:
            print(f"note: --truncate dropped the last {dropped} pieces of the source",
                  file=sys.stderr)  # fmt: skip
        return source
    if source.dropped or source.pieces.cut:
        counts = [(source.dropped, "pieces"), (source.pieces.cut, "characters")]
        what = " and ".join(f"the last {n:,} {unit}" for n, unit in counts if n)
        limit, why = source.shape.token_limit(request.max_tokens)
        kept = f"; {limit} are read{in_flags(why)}" if why else f" (the model takes {limit})"
        print(one_line(f"note: --truncate dropped {what}{kept}"), file=sys.stderr)
    note = source.fit_note()
    if note:
        defer_note(note)
    return source


def analyse_request(
    request: Request,
    out: Path | None,
    style: ImageStyle,
    *,
    allowed: tuple[str, ...] = IMAGE_SUFFIXES,
    layer: int | None = None,
    head: int | None = None,
    heads: Sequence[int] | None = None,
    upto: int | None = None,
    words: dict[str, str] | None = None,
    units: str = "words",
    view: str = "show",
    one_layer: bool = False,
    compared: bool = False,
) -> Analysis:
    """Check the output, then (`Prepared.check`: cheaply, before torch) the layer and head,
    the measure, the `words` named by options (an argument's name -> its word) and what
    `out` would hold (`compared`: every measure is asked for), then compute. `one_layer`:
    the command shows `layer` only, so a long input whose whole attention is too large
    keeps just that layer."""
    if out is not None:
        check_output(out, allowed, style)
    source: Input[Analysis]
    if request.load is not None:  # --load: the file's attention, no model
        from attnviz.loading import load_attentions

        source = load_attentions(request.load).prepared
    else:
        if compared and encdec_model(request):  # compare-measures takes no --target: say
            from attnviz.pipeline import refuse_on_transformers  # first what it cannot do

            refuse_on_transformers("transformers", "comparing the measures")
        source = request_input(request)
    source.check(layer=layer, head=head, heads=heads, upto=upto, measure=request.measure,
                 view=view, words=words, units=units, mask=request.mask, out=out,
                 compared=compared)  # fmt: skip
    layers = None
    if one_layer and isinstance(source, Prepared) and source.found is None:
        layers = _one_layer(request, source, out, layer)
    return source.analyse(
        mask=request.mask, dtype=request.dtype, cache=request.cache, layers=layers
    )


def _one_layer(request: Request, prepared: Prepared, out: Path | None, layer: int | None
               ) -> list[int] | None:  # fmt: skip
    """A long input whose whole attention is too large: only the layer the view shows (None:
    every layer, when it fits)."""
    if prepared.attention_bytes() <= attention_budget():
        return None
    if out is not None and out.suffix.lower() in HTML_SUFFIXES:
        raise BadInput(
            f"a page shows every layer, and the attention of all {prepared.num_layers} "
            f"layers at {len(prepared.pieces):,} pieces is more than attnviz keeps: draw "
            f"this layer as an image (--out x.png), or shorten the text"
        )
    layers = [-1 if layer is None else layer]
    note = prepared.memory_note(layers)
    if note and not request.quiet:
        print(f"note: {note}", file=sys.stderr)
    return layers


def encdec_model(request: Request) -> bool:
    """Whether the request is for an encoder-decoder: its options were given, or its model
    is one (read from config.json; then it needs --target or --generate)."""
    return request.encdec or api.is_encoder_decoder(request.model, cache=request.cache)

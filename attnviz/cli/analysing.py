"""From a command's `Request` to what it draws: the text prepared for the model (notes on
stderr), checked cheaply before torch, then analysed; or the analysis a --load file holds."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.errors import defer_note, in_flags, one_line
from attnviz.cli.input import Request
from attnviz.errors import BadInput
from attnviz.limits import attention_budget
from attnviz.output import HTML_SUFFIXES, IMAGE_SUFFIXES, ImageStyle, check_output

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.prepared import Prepared


PAGES = IMAGE_SUFFIXES + HTML_SUFFIXES  # what --out writes on show, heads and model


def prepare_request(request: Request, cached: bool = False) -> tuple[Prepared, Analysis | None]:
    """Tokenize for the model, or with `cached` first look for an analysis of the text in
    the cache (whose entry brings the pieces: no tokenizer then); notes on stderr (never
    stdout, so JSON stays clean)."""
    text, pair, model, truncate = request.text, request.pair, request.model, request.truncate
    notices.quiet = request.quiet  # a converted GGUF model's notes obey --quiet too
    try:
        hit = None
        if cached and request.cache:
            hit = api.from_cache(text, pair=pair, model=model, truncate=truncate, mask=request.mask,
                                 dtype=request.dtype, max_tokens=request.max_tokens,
                                 bos=request.bos, engine=request.engine)  # fmt: skip
        if hit is not None:
            prepared = cast("Prepared", hit.prepared)  # what api.from_cache built
        else:
            prepared = api.prepare(text, pair=pair, model=model, truncate=truncate,
                                   cache=request.cache, max_tokens=request.max_tokens,
                                   bos=request.bos, engine=request.engine)  # fmt: skip
    except BadInput as exc:
        if request.from_stdin and str(exc).startswith("the text "):
            raise BadInput(
                exc.template + " (the text was read from standard input; to pass it as an "
                "argument instead, quote it: attnviz COMMAND \"TEXT\"; in a 'while read' loop "
                "add </dev/null so the command does not read the loop's input)",
                param=exc.params,
            ) from None
        raise
    if (prepared.dropped or prepared.pieces.cut) and not request.quiet:
        counts = [(prepared.dropped, "pieces"), (prepared.pieces.cut, "characters")]
        what = " and ".join(f"the last {n:,} {unit}" for n, unit in counts if n)
        limit, why = prepared.shape.token_limit(request.max_tokens)
        kept = f"; {limit} are read{in_flags(why)}" if why else f" (the model takes {limit})"
        dropped = f"note: --truncate dropped {what}{kept}"
        print(one_line(dropped), file=sys.stderr)
    note = None if request.quiet else prepared.fit_note()
    if note:
        defer_note(note)
    return prepared, hit


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
    if request.load is not None:  # --load: the file's attention, no model
        return _loaded(request)
    # an encoder-decoder's stack: transformers' engine, never the cache
    if encdec_model(request):
        if compared:  # compare-measures takes no --target: say first what it cannot do
            from attnviz.pipeline import refuse_on_transformers

            refuse_on_transformers("transformers", "comparing the measures")
        encdec = _encdec(request)
        encdec.check(layer=layer, head=head, heads=heads, upto=upto, measure=request.measure,
                     view=view, words=words, units=units, mask=request.mask, out=out,
                     compared=compared)  # fmt: skip
        return encdec.analyse(dtype=request.dtype)
    prepared, hit = prepare_request(request, cached=True)  # a text seen before: no tokenizer either
    prepared.check(layer=layer, head=head, heads=heads, upto=upto, measure=request.measure,
                   view=view, words=words, units=units, mask=request.mask, out=out,
                   compared=compared)  # fmt: skip
    if hit is not None:
        hit.prepared.note_engine()
        return hit
    # A long input whose whole attention is too large: keep only the layer this view shows.
    layers = None
    if one_layer and prepared.attention_bytes() > attention_budget():
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
    return prepared.analyse(
        mask=request.mask, dtype=request.dtype, cache=request.cache, layers=layers
    )


def _loaded(request: Request) -> Analysis:
    """The analysis in the --load file; what needs a model is refused by the analysis."""
    from attnviz.loading import load_attentions

    assert request.load is not None
    return load_attentions(request.load)


def encdec_model(request: Request) -> bool:
    """Whether the request is for an encoder-decoder: its options were given, or its model
    is one (read from config.json; then it needs --target or --generate)."""
    return request.encdec or api.is_encoder_decoder(request.model, cache=request.cache)


def _encdec(request: Request) -> EncdecInput:
    """The request's encoder-decoder input (source, target, stack), tokenized; a model that
    is not an encoder-decoder refuses --stack, --target and --generate in one line."""
    notices.quiet = request.quiet
    encdec = api.prepare_encdec(request.text, model=request.model, target=request.target,
                                generate=request.generate, stack=request.stack,
                                truncate=request.truncate, cache=request.cache,
                                max_tokens=request.max_tokens,
                                engine=request.engine)  # fmt: skip
    if request.pair is not None:
        raise BadInput("{pair} is for encoders: an encoder-decoder reads a source and a "
                       "{target_text}; drop {pair}", param=("pair", "target_text"))  # fmt: skip
    dropped = encdec.source_pieces.dropped
    if dropped and not request.quiet:
        print(f"note: --truncate dropped the last {dropped} pieces of the source", file=sys.stderr)
    return encdec

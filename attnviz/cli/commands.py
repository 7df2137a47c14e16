"""What each command does: call the public API with the parsed options, and print.

`app.py` declares the commands and their options and calls these keyword-only
functions. Each checks what it can before any work (the output path, the layer and
head against the model's config), so that torch is not imported for a bad argument,
then calls `attnviz`'s API, and prints what comes back.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.text import Text

from attnviz import api
from attnviz.cache import notices
from attnviz.cli.errors import defer_note, in_flags, one_line
from attnviz.cli.input import Request
from attnviz.errors import BadInput
from attnviz.limits import amount, attention_budget
from attnviz.output import (
    DATA_SUFFIXES,
    HTML_SUFFIXES,
    IMAGE_SUFFIXES,
    ImageStyle,
    atomic_write,
    check_output,
)

if TYPE_CHECKING:
    from attnviz.analysis import Analysis
    from attnviz.encdec import EncdecInput
    from attnviz.measures.long import LongResult
    from attnviz.model.seq2seq_config import Seq2seqShape
    from attnviz.prepared import Prepared


PAGES = IMAGE_SUFFIXES + HTML_SUFFIXES  # what --out writes on show, heads and model


@dataclass(frozen=True)
class BatchOptions:
    """How a corpus runs: sentences per padded batch, device and torch threads."""

    batch_size: int = 32
    device: str = "auto"
    threads: int | None = None
    dtype: str = "float32"


def _prepare(request: Request, cached: bool = False) -> tuple[Prepared, Analysis | None]:
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
        rest = f" and the last {prepared.pieces.cut:,} characters" if prepared.pieces.cut else ""
        limit, why = prepared.shape.token_limit(request.max_tokens)
        kept = f"; {limit} are read{in_flags(why)}" if why else f" (the model takes {limit})"
        dropped = f"note: --truncate dropped the last {prepared.dropped} pieces{rest}{kept}"
        print(one_line(dropped), file=sys.stderr)
    note = None if request.quiet else prepared.fit_note()
    if note:
        defer_note(note)
    return prepared, hit


def _analyse(
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
    if _encdec_model(request):
        if compared:  # compare-measures takes no --target: say first what it cannot do
            from attnviz.pipeline import refuse_on_transformers

            refuse_on_transformers("transformers", "comparing the measures")
        encdec = _encdec(request)
        encdec.check(layer=layer, head=head, heads=heads, upto=upto, measure=request.measure,
                     view=view, words=words, units=units, mask=request.mask, out=out,
                     compared=compared)  # fmt: skip
        return encdec.analyse(dtype=request.dtype)
    prepared, hit = _prepare(request, cached=True)  # a text seen before: no tokenizer either
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


def _encdec_model(request: Request) -> bool:
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


def _save(
    analysis: Analysis, out: Path, view: str, style: ImageStyle, request: Request, **where: Any
) -> None:
    """Write `view` to `out`: an image in `style`, a page (which follows the reader's theme),
    or data (with the measure asked for)."""
    if out.suffix.lower() in HTML_SUFFIXES:
        analysis.save(out, view, **where, theme=style.theme, lang=request.lang)
    else:
        analysis.save(
            out, view, **where, measure=request.measure, lang=request.lang, **asdict(style)
        )


def _show_result(console: Console, result: Any, as_json: bool, out: Path | None) -> None:
    """Print `result` as JSON (its `to_dict()`) or drawn, then say which file was written."""
    if as_json:
        _json(result.to_dict())
    else:
        console.print(result)
    _wrote(out)


def _wrote(out: Path | None) -> None:
    if out is not None:
        from attnviz.cli.errors import printable

        print(f"wrote {printable(str(out))}", file=sys.stderr)


def _json(record: Any) -> None:
    """`record` as JSON, readable (`João`), with what a terminal would act on (an escape,
    a bidirectional override from a model's tokens) as `\\u` escapes: the same data."""
    from attnviz.render.cells import json_visible

    print(json_visible(json.dumps(record, ensure_ascii=False)))


def show(
    console: Console,
    request: Request,
    *,
    layer: int,
    head: int | None,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
    query: str | None = None,
    exclude: Sequence[str] | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
) -> None:
    """One heatmap: a layer's head, or the mean over its heads; or one query's row, sorted.

    A query named by its piece index (`#12`), or of a text too long to read whole (past the
    decoder's 2,048 pieces, or what one layer's attention may take), is read a block of
    queries at a time (`analyse_long`), over pieces."""
    by_index = (  # #INDEX (#-1 the last): a piece
        query is not None and query[:1] == "#" and query[1:].lstrip("-").isdigit()
    )
    loaded = request.load is not None
    if pool is not None and loaded:
        raise BadInput("{pool} computes the attention a block at a time: leave it out with "
                       "{load}", param=("pool", "load"))  # fmt: skip
    if pool is not None and (query is not None or as_json):  # first: a '#N' query read pooled
        raise BadInput("{pool} draws a heatmap: leave out {query} and {json}",
                       param=("pool", "query", "json"))  # fmt: skip
    if (query is not None and not loaded and not _encdec_model(request)
            and (by_index or (not request.truncate and _too_long(request)))):  # fmt: skip
        _refuse_unread(exclude, request.measure, by_index)
        _check_long_shape(request, [layer], head)
        if out is not None:
            check_output(out, IMAGE_SUFFIXES, style)
        result = api.analyse_long(request.text, model=request.model, query=query,
                                  max_tokens=request.max_tokens, truncate=request.truncate,
                                  bos=request.bos, engine=request.engine)  # fmt: skip
        row = result.row(layer, head, lang=request.lang)
        if out is not None:
            row.save(out, **asdict(style))
        _show_result(console, row, as_json, out)
        return
    if pool is not None:
        _check_long_shape(request, [layer], head)
        result = _pooled(request, out, style, pool, pool_by, None, exclude)

        def page() -> str:
            return result.html("matrix", layer=layer, head=head, theme=style.theme,
                               lang=request.lang)  # fmt: skip

        _draw_pooled(console, result.view(layer, head, lang=request.lang), out, style, page)
        return
    words = {"query": query} if query is not None else {}
    allowed = PAGES if query is None else IMAGE_SUFFIXES
    with _whole_or_pooled(request, query is None and not exclude and not as_json, query=True):
        analysis = _analyse(
            request,
            out,
            style,
            allowed=allowed,
            layer=layer,
            head=head,
            words=words,
            units=units,
            one_layer=True,
        )
    view = analysis.view(
        layer, head, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    shown = view if query is None else view.row(query)
    if out is not None and out.suffix.lower() in HTML_SUFFIXES:
        analysis.save(out, "show", layer=layer, head=head, units=units, theme=style.theme,
                      lang=request.lang, exclude=exclude)  # fmt: skip
    elif out is not None:
        shown.save(out, **asdict(style))
    _show_result(console, shown, as_json, out)


def _check_long_shape(
    request: Request, layers: Sequence[int] = (), head: int | None = None
) -> None:
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


def _refuse_unread(exclude: Sequence[str] | None, measure: str, by_index: bool) -> None:
    """A row read a block at a time is the model's weights over every piece: refuse the
    options it would otherwise drop without a word, saying what works."""
    how = (
        "name the query by its word (--query WORD) to use {option}"
        if by_index
        else "leave out {option}, or read a shorter text (--max-tokens N --truncate)"
    )
    if exclude:
        raise BadInput(
            "{query} "
            + ("#INDEX" if by_index else "on a text this long")
            + " reads a row of weights over every piece: "
            + how.format(option="{exclude}"),
            param=("query", "exclude"),
        )
    if measure != "weight":
        raise BadInput(
            "{query} "
            + ("#INDEX" if by_index else "on a text this long")
            + " reads attention weights only: "
            + how.format(option="{measure} " + measure),
            param=("query", "measure"),
        )


def _long_pieces(request: Request) -> int | None:
    """The pieces of a text refused for its length by the whole views (a decoder's 2,048)
    that the views made for length read whole (up to `limits.LONG_TOKENS`); None when they
    cannot read it either (then the usual refusal stands)."""
    from attnviz.pipeline import prepare

    if request.truncate or request.load is not None or _encdec_model(request):
        return None
    try:  # tokenized as `analyse_long` tokenizes (no weights, no torch)
        tokenized = prepare(request.text, model=request.model, bos=request.bos,
                            max_tokens=request.max_tokens, blocked=True,
                            engine=request.engine)  # fmt: skip
    except BadInput:
        return None
    return len(tokenized.pieces)


@contextlib.contextmanager
def _whole_or_pooled(request: Request, poolable: bool, *, query: bool) -> Iterator[None]:
    """Around the whole view of `show` (`query`: it has --query) or `heads`: a text refused
    for its length that the views made for length read is refused naming them (`--pool N`,
    `--query WORD`) besides --truncate, which keeps only its start. `poolable`: no option
    the pooled view refuses. Only a refusal tokenizes again."""
    try:
        yield
    except BadInput as exc:
        T = None
        if poolable and request.measure == "weight" and "pieces long" in exc.template:
            T = _long_pieces(request)
        if T is None:
            raise
        row = ", read one row ({query} WORD)" if query else ""
        raise BadInput(
            f"the text is {T:,} pieces long, more than the whole views read: draw it in blocks "
            f"({{pool}} {-(-T // 64)}){row}, or keep its start ({{truncate}})",
            param=("pool", "query", "truncate") if query else ("pool", "truncate"),
        ) from None


def _too_long(request: Request) -> bool:
    """Whether the text is refused for its length (its pieces past the bound)."""
    try:
        _prepare(replace(request, quiet=True))
    except BadInput as exc:
        return "pieces long" in exc.template
    return False


def heads(
    console: Console,
    request: Request,
    *,
    layer: int,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
) -> None:
    """Every head of one layer (or the `subset` of heads), as a grid of small heatmaps;
    pooled in blocks of `pool` pieces when asked."""
    if pool is not None:
        if request.load is not None:
            raise BadInput("{pool} computes the attention a block at a time: leave it out "
                           "with {load}", param=("pool", "load"))  # fmt: skip
        _check_long_shape(request, [layer])
        result = _pooled(request, out, style, pool, pool_by, subset, exclude)
        _draw_pooled(console, result.heads_view(layer, lang=request.lang), out, style,
                     lambda: result.html("heads", layer=layer, theme=style.theme,
                                         lang=request.lang))  # fmt: skip
        return
    with _whole_or_pooled(request, not subset and not exclude, query=False):
        analysis = _analyse(request, out, style, allowed=PAGES, layer=layer, heads=subset,
                            view="heads", one_layer=True)  # fmt: skip
    view = analysis.heads(
        layer, subset, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    if out is not None:
        _save(
            analysis,
            out,
            "heads",
            style,
            request,
            layer=layer,
            heads=subset,
            units=units,
            exclude=exclude,
        )
    console.print(view)
    _wrote(out)


def model_view(
    console: Console,
    request: Request,
    *,
    units: str,
    out: Path | None,
    style: ImageStyle,
    subset: Sequence[int] | None = None,
    exclude: Sequence[str] | None = None,
    pool: int | None = None,
    pool_by: str = "mean",
) -> None:
    """Every layer and head (or the `subset` of heads in every layer) as one grid; pooled in
    blocks of `pool` pieces (`pool_by` mean or max) when asked, or when the input's whole
    attention is too large to keep (then 64 blocks a side)."""
    if pool is not None and request.load is not None:
        raise BadInput("{pool} computes the attention a block at a time: leave it out with "
                       "{load}", param=("pool", "load"))  # fmt: skip
    plain = not (subset or exclude or _encdec_model(request))
    if pool is None and request.load is None and request.measure == "weight" and plain:
        try:
            prepared, hit = _prepare(request, cached=True)
        except BadInput as exc:  # past the whole views' bound: the long views may read it
            long = _long_pieces(request) if "pieces long" in exc.template else None
            if long is None:
                raise
            pool = -(-long // 64)
            if not request.quiet:
                defer_note(f"note: the text is {long:,} pieces long, more than the whole views "
                           f"read: drawing blocks of {pool} pieces, computed a block at a time "
                           f"(--pool {pool})")  # fmt: skip
    if pool is None and request.load is None and request.measure == "weight" and plain:
        whole = prepared.shape.layers * prepared.shape.heads * len(prepared.pieces) ** 2 * 4
        if hit is None and whole > attention_budget():
            pool = -(-len(prepared.pieces) // 64)
            if not request.quiet:
                defer_note(
                    f"note: the attention of every layer at {len(prepared.pieces):,} pieces "
                    f"would take {amount(whole)}: drawing blocks of {pool} pieces, computed a "
                    f"block at a time (--pool {pool})"
                )
    if pool is not None:
        _pooled_model_view(console, request, out, style, pool, pool_by, subset, exclude)
        return
    analysis = _analyse(request, out, style, allowed=PAGES, heads=subset)
    view = analysis.model_view(
        subset, units, exclude=exclude, measure=request.measure, lang=request.lang
    )
    if out is not None:
        _save(analysis, out, "model", style, request, heads=subset, units=units, exclude=exclude)
    console.print(view)
    _wrote(out)


def _pooled(
    request: Request,
    out: Path | None,
    style: ImageStyle,
    pool: int,
    pool_by: str,
    subset: Sequence[int] | None,
    exclude: Sequence[str] | None,
) -> LongResult:
    """The input pooled in blocks of `pool` pieces, computed a block of queries at a time
    (for a page, refused before the model runs when the page would be too large)."""
    if _encdec_model(request):
        raise BadInput("{pool} runs attnviz's own engine a block at a time, and an "
                       "encoder-decoder's stacks come whole from transformers: drop {pool}",
                       param="pool")  # fmt: skip
    if subset is not None or exclude or request.measure != "weight":
        raise BadInput(
            "{pool} draws every head's weights over every piece: leave out {heads}, "
            "{exclude} and {measure}",
            param=("pool", "heads", "exclude", "measure"),
        )
    page = out is not None and out.suffix.lower() in HTML_SUFFIXES
    if out is not None:
        check_output(out, IMAGE_SUFFIXES + HTML_SUFFIXES, style)
    return api.analyse_long(request.text, model=request.model, pool=pool, pool_by=pool_by,
                            max_tokens=request.max_tokens, truncate=request.truncate,
                            bos=request.bos, engine=request.engine,
                            page=page)  # fmt: skip


def _draw_pooled(
    console: Console,
    view: Any,
    out: Path | None,
    style: ImageStyle,
    page: Callable[[], str] | None = None,
) -> None:
    """Print the pooled `view`; write it to `out`: an image, or for .html the `page()`."""
    if out is not None and out.suffix.lower() in HTML_SUFFIXES and page is not None:
        with atomic_write(out, "w") as handle:
            handle.write(page())
    elif out is not None:
        view.save(out, **asdict(style))
    console.print(view)
    _wrote(out)


def _pooled_model_view(
    console: Console,
    request: Request,
    out: Path | None,
    style: ImageStyle,
    pool: int,
    pool_by: str,
    subset: Sequence[int] | None,
    exclude: Sequence[str] | None,
) -> None:
    """The model view in blocks of `pool` pieces."""
    result = _pooled(request, out, style, pool, pool_by, subset, exclude)
    _draw_pooled(console, result.model_view(lang=request.lang), out, style,
                 lambda: result.html("model", theme=style.theme, lang=request.lang))  # fmt: skip


def distance(
    console: Console,
    request: Request,
    *,
    layers: Sequence[int] | None,
    out: Path | None,
    cmap: str,
) -> None:
    """Each head's distance profile, sink share and kind, as a table (and an image)."""
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, ImageStyle(200, cmap, "light", False, False))
        if layers:  # the image was drawn of every layer, the --layer given dropped unsaid
            raise BadInput(
                "{out} draws every layer's heads: leave out {layer} (the table without {out} "
                "shows only those layers)",
                param=("out", "layer"),
            )
    _check_long_shape(request, layers or ())
    result = api.analyse_long(request.text, model=request.model, max_tokens=request.max_tokens,
                              truncate=request.truncate, bos=request.bos,
                              engine=request.engine)  # fmt: skip
    table = result.profile_table(layers or None, lang=request.lang, width=console.width)
    if out is not None:
        from attnviz.render.saving import save_figure

        figure = result.profile_figure(cmap, lang=request.lang)
        save_figure(figure, out, dpi=200, transparent=False)
    console.print(table)
    _wrote(out)


def explain(
    console: Console,
    request: Request,
    *,
    token: str | None,
    index: int | None,
    layer: int,
    head: int,
    lang: str,
) -> None:
    """One query's attention, step by step, on the model's own numbers."""
    from attnviz.i18n import check_lang

    lang = check_lang(lang)
    explanation = _prepare(request)[0].explain(
        token=token, index=index, layer=layer, head=head, lang=lang, mask=request.mask
    )
    console.print(explanation)


def rollout(
    console: Console,
    request: Request,
    *,
    upto: int,
    units: str,
    top: int,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
    exclude: Sequence[str] | None = None,
    method: str = "rollout",
) -> None:
    """Attention rollout (or flow) through layer `upto`: what each token draws from each input."""
    if method == "flow" and request.measure != "weight":
        raise BadInput("--method flow runs on the attention weights: drop --measure")
    analysis = _analyse(request, out, style, upto=upto)
    with _progress(len(analysis.pieces) ** 2, "maximum flows") as advance:
        view = analysis.rollout(
            upto,
            units,
            top,
            exclude=exclude,
            measure=request.measure,
            method=method,
            progress=advance if method == "flow" else None,
            lang=request.lang,
        )
    if out is not None:
        view.save(out, **asdict(style))
    _show_result(console, view, as_json, out)


def compare_measures(
    console: Console,
    request: Request,
    *,
    query: str,
    layer: int,
    top: int,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
) -> None:
    """Every measure's ranking of one query's keys, side by side."""
    analysis = _analyse(
        request, out, style, layer=layer, words={"query": query}, units=units, compared=True
    )
    comparison = analysis.compare(query, layer, units=units, top=top, lang=request.lang)
    if out is not None:
        comparison.save(out, **asdict(style))
    _show_result(console, comparison, as_json, out)


def find(
    console: Console,
    request: Request,
    *,
    source: str,
    target: str,
    top: int,
    units: str,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
    exclude: Sequence[str] | None = None,
) -> None:
    """Every head ranked by the weight from `source` to `target`: a table, JSON or a heatmap."""
    words = {"source": source, "target": target}
    analysis = _analyse(request, out, style, words=words, units=units)
    links = analysis.find(source, target, units=units, exclude=exclude, top=top, lang=request.lang)
    if out is not None:
        links.save(out, **asdict(style))
    _show_result(console, links, as_json, out)


def export(
    request: Request,
    *,
    out: Path,
    view: str,
    layer: int,
    head: int | None,
    units: str,
    style: ImageStyle,
) -> None:
    """Write an image of a view, or the raw attention data (.npz / .json)."""
    allowed = PAGES + DATA_SUFFIXES
    analysis = _analyse(request, out, style, allowed=allowed, layer=layer, head=head)
    _save(analysis, out, view, style, request, layer=layer, head=head, units=units)
    _wrote(out)


def generate(
    console: Console,
    request: Request,
    *,
    max_new: int,
    sample: bool,
    temperature: float,
    top_k: int | None,
    seed: int | None,
    layer: int,
    head: int | None,
    lens: bool,
    out: Path | None,
    as_json: bool,
    style: ImageStyle,
) -> None:
    """Write after the text, printing the continuation as it comes; then each new token's
    attention (and the logit lens), and the file asked for."""
    from attnviz.render.cells import visible

    if out is not None:
        allowed = IMAGE_SUFFIXES if lens else IMAGE_SUFFIXES + HTML_SUFFIXES + DATA_SUFFIXES
        if lens and out.suffix.lower() not in IMAGE_SUFFIXES:
            raise BadInput(
                "--lens writes its image (.png, .svg, .pdf): drop --lens to write the steps' "
                "page or data, or name an image"
            )
        check_output(out, allowed, style)
    from attnviz.generation import MAX_NEW, check_generation
    from attnviz.limits import check_range

    prepared, _ = _prepare(request)
    prepared.refuse_internals("generate (a decoder writing with attnviz's key/value cache)")
    check_generation(prepared, check_range(max_new, "max_new", (1, MAX_NEW)))
    prepared.check(layer=layer, head=head)
    stream = not as_json
    started = [False]

    def on_text(piece: str) -> None:
        if not started[0]:  # the prompt, once the model is loaded and writing
            console.print(Text(visible(request.text, newlines=True)), end="", soft_wrap=True)
            started[0] = True
        text = "\n".join(visible(line) for line in piece.split("\n"))
        console.print(Text(text, style="bold"), end="", soft_wrap=True)
        console.file.flush()

    generation = api.generate(
        request.text,
        model=request.model,
        max_new=max_new,
        sample=sample,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        dtype=request.dtype,
        max_tokens=request.max_tokens,
        bos=request.bos,
        on_text=on_text if stream else None,
        engine=request.engine,
    )
    if as_json:
        record = generation.to_dict()
        if lens:
            record["lens"] = generation.lens().to_dict()
        _json(record)
    else:
        end = "end token" if generation.stopped_at_eos else f"{len(generation.new_ids)} tokens"
        console.print()
        console.print(Text(f"({end})", style="dim"))
        console.print()
        console.print(generation.steps_view(layer, head))
        if lens:
            console.print()
            console.print(generation.lens())
    if out is not None:
        if lens:
            generation.lens().save(out, **asdict(style))
        elif out.suffix.lower() in HTML_SUFFIXES:
            generation.save(out, layer=layer, head=head, theme=style.theme)
        else:
            generation.save(out, layer=layer, head=head, **asdict(style))
    _wrote(out)


def stats(
    console: Console,
    texts: Iterable[str],
    *,
    model: str | None,
    truncate: bool,
    sort: str,
    top: int | None,
    as_json: bool,
    out: Path | None,
    style: ImageStyle,
    batching: BatchOptions,
    quiet: bool = False,
    shared_scale: bool = True,
    max_tokens: int | None = None,
    bos: bool = True,
    lang: str = "en",
    engine: str = "auto",
    exclude: Sequence[str] | None = None,
) -> None:
    """Head statistics over a corpus (Clark et al. 2019), as a table, JSON or a figure;
    without the `exclude`d pieces, rows renormalised, when asked."""
    from attnviz.perf import reuse_freed_memory

    notices.quiet = quiet  # the engine's note obeys --quiet
    # A bad --sort or --top, or --engine: before any work.
    api.check_head_stats(by=sort, top=top, model=model, engine=engine)
    if out is not None:
        check_output(out, IMAGE_SUFFIXES, style)
    reuse_freed_memory()  # a command, not a library call: the process ends with it
    with _progress(len(texts) if isinstance(texts, list) else None) as advance:
        result = api.head_stats(
            texts,
            model=model,
            truncate=truncate,
            max_tokens=max_tokens,
            bos=bos,
            batch_size=batching.batch_size,
            device=batching.device,
            threads=batching.threads,
            dtype=batching.dtype,
            progress=advance,
            lang=lang,
            engine=engine,
            exclude=exclude,
        )
    if result.dropped and not quiet:
        print(f"note: --truncate dropped {result.dropped} pieces in all", file=sys.stderr)
    if out is not None:
        result.save(
            out,
            dpi=style.dpi,
            cmap=style.cmap,
            theme=style.theme,
            transparent=style.transparent,
            shared_scale=shared_scale,
        )
    shown = result.sorted(sort, top)
    if as_json:
        _json(shown)
    else:
        console.print(result.table(shown))
    _wrote(out)


@contextlib.contextmanager
def _progress(total: int | None, what: str = "sentences") -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; `advance(n)` counts n more `what`.

    `total` is None for a corpus read as it runs (a file, stdin): the bar counts.
    """
    from rich.progress import Progress

    from attnviz.cli.input import console_width

    err = Console(stderr=True, width=console_width())
    # Drawn only when a batch ends (no refresh thread): stderr is kept silent during calls
    # into the tokenizer (attnviz.errors.quiet_panics), and a frame lost there would
    # leave the bar's cursor moves out of step.
    # A real terminal only: FORCE_COLOR makes rich call a redirected stderr a terminal.
    shown = err.is_terminal and sys.stderr.isatty()
    with Progress(console=err, transient=True, disable=not shown, auto_refresh=False) as bar:
        task = bar.add_task(what, total=total)

        def advance(n: int) -> None:
            bar.advance(task, n)
            bar.refresh()

        yield advance


def tokens(console: Console, request: Request) -> None:
    """The pieces of the text: index, piece, its text, id, word, span (no weights loaded).

    `piece` is the vocabulary's entry (`##ou`, or byte-level BPE's `Ġc` and `JoÃ£o`, whose
    characters stand for bytes); `text` is what the piece covers in the text, as the views
    label it (`##ou`, `c`, `João`).
    """
    from rich.table import Table

    from attnviz import lexicon
    from attnviz.render.cells import visible

    pieces = _prepare(request)[0].pieces
    words = pieces.words()
    word_of = {i: (w, word.label) for w, word in enumerate(words) for i in word.pieces}
    lang = request.lang
    table = Table(title=lexicon.label(lang, "tokens_title", pieces=len(pieces), words=len(words)))
    for name, justify in (
        ("index", "right"),
        ("piece", "left"),
        ("text", "left"),
        ("id", "right"),
        ("word", "left"),
        ("span", "left"),
    ):
        table.add_column(lexicon.label(lang, f"tokens_{name}"), justify=justify)  # type: ignore[arg-type]
    for i, piece in enumerate(pieces.tokens):
        w, label = word_of[i]
        start, end = pieces.offsets[i]
        span = "" if pieces.sequence_ids[i] is None else f"{start}–{end}"
        text = Text(visible(pieces.labels[i]))
        word = Text(f"{w} {visible(label)}")
        table.add_row(str(i), Text(visible(piece)), text, str(pieces.ids[i]), word, span)
    console.print(table)


def info(console: Console, model: str | None, engine: str = "auto") -> None:
    """The model's shape and where it was loaded from (no weights loaded)."""
    from rich.table import Table

    from attnviz.render.cells import visible

    details = api.model_info(model, engine=engine)
    about, shape = details.model, details.shape
    tokenizer, languages = about.tokenizer, about.languages
    assert tokenizer is not None  # model_info always reads it
    limit, why = shape.token_limit()
    why = in_flags(why)
    counted = "decoder, LM head not counted" if shape.causal else "encoder"
    if details.engine != "attnviz":
        counted = "every weight in the checkpoint"
    rows: list[tuple[str, Any]] = [
        ("model", about.name),
        ("language", f"{about.language_list} (model card)" if languages else "not stated"),
        ("text", tokenizer.normalisation),
        ("tokenizer", tokenizer.kind + (f", {tokenizer.size:,} pieces" if tokenizer.size else "")),
        ("family", shape.family),
        ("kind", _kind(shape.causal)),
        ("layers", shape.layers),
        ("heads per layer", shape.heads),
        ("hidden size", shape.hidden),
        ("head size", shape.head_size),
        ("feed-forward size", shape.intermediate),
        ("vocabulary", shape.vocab),
        ("max tokens", f"{limit:,}{why}"),
        ("activation", shape.activation),
        ("parameters", f"{details.parameters:,} ({counted})"),
        ("weights", _weights(details.weights)),
        ("loaded from", about.origin),
    ]
    if details.quantization is not None:
        rows[-1:-1] = [
            ("quantization", details.quantization),
            ("computes in", details.computes_in),
        ]
    rows.append(("computes with", details.computes_with))
    if shape.decoder is not None:
        at = rows.index(("heads per layer", shape.heads)) + 1
        rows[at:at] = details.decoder_rows()
    if shape.causal:  # a decoder of either engine
        rows.insert(rows.index(("kind", _kind(shape.causal))) + 1, ("start token", _start(details)))
    if details.encdec is not None:
        _encdec_rows(rows, details.encdec)
    if shape.embedding_size != shape.hidden:
        rows.insert(rows.index(("layers", shape.layers)), ("embedding size", shape.embedding_size))
    if shape.shared_layers:
        rows.insert(3, ("layer weights", "one set, shared by every layer"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in rows:
        table.add_row(key, Text(visible(str(value))))  # a model card's text: never markup
    console.print(table)
    # The folder on a line of its own, never broken inside a name: the terminal wraps it,
    # and a copy of it pastes whole.
    folder = visible(str(about.folder))
    console.print(Text.assemble(("folder", "bold"), f"  {folder}"), soft_wrap=True)


def _encdec_rows(rows: list[tuple[str, Any]], seq: Seq2seqShape) -> None:
    """An encoder-decoder's rows of `info`: its kind, each stack's layers and heads, the
    token its decoder starts from; in place of an encoder's."""
    changed = {
        "kind": "encoder-decoder: a source and a target (--target, or --generate N)",
        "layers": f"{seq.encoder_layers} encoder, {seq.decoder_layers} decoder",
        "heads per layer": f"{seq.encoder_heads} encoder, {seq.decoder_heads} decoder",
        "head size": seq.hidden // max(seq.encoder_heads, 1),
        "max tokens": f"{seq.max_tokens:,} (the source, and the target)",
    }
    dropped = ("feed-forward size", "activation")
    rows[:] = [(k, changed.get(k, v)) for k, v in rows if k not in dropped]
    at = next(i for i, (k, _) in enumerate(rows) if k == "kind") + 1
    rows[at:at] = [
        ("stacks", "encoder (source), decoder (target, causal), cross (target × source)"),
        ("decoder start", f"id {seq.decoder_start} (decoder_start_token_id)"),
    ]


def _start(details: api.ModelDetails) -> str:
    """Who puts the decoder's start token in front, for `info`."""
    if details.start_token is None:
        return "none (the model defines none: the first word is the first token)"
    if details.start_by == "tokenizer":
        return f"{details.start_token} (the tokenizer puts it in front; --no-bos takes it off)"
    return (
        f"{details.start_token} (the tokenizer adds none: attnviz puts it in front, as "
        "interpretability tools do; --no-bos reads the text as typed)"
    )


def _weights(files: tuple[str, ...]) -> str:
    if not files:
        return "none"
    return files[0] if len(files) == 1 else f"{len(files)} shards ({files[0]}, …)"


def _kind(causal: bool) -> str:
    if causal:
        return "decoder, causal: each token sees only itself and the tokens before it"
    return "encoder: each token sees every token"


def cache_info(console: Console) -> None:
    """The cache's folder, entries, size and limit."""
    import os

    from attnviz.cache import contents, folder, secret, settings
    from attnviz.render.cells import visible

    state = contents.info()
    where = state.folder
    existing = next(p for p in (where, *where.parents) if p.exists())
    problem = folder.folder_problem()
    hint = f"set {settings.SHARED_ENV}=1 if you trust who can write it"
    if problem is None and (problem := secret.secret_problem()) is not None:
        hint = "run `attnviz cache clear`, which makes a new one"
    if not settings.cache_enabled(False):
        why = "ATTNVIZ_CACHE_MB is 0" if settings.limit_bytes() == 0 else "ATTNVIZ_NO_CACHE is set"
        status = f"off ({why})"
    elif problem and existing == where and existing.is_dir():
        status = f"not used: {problem} ({hint})"
    elif not existing.is_dir() or not os.access(existing, os.W_OK):
        status = f"unusable: {existing} is not a writable folder (set ATTNVIZ_CACHE_DIR)"
    else:
        status = "on"
    console.print(
        Text(
            f"folder   {visible(str(where))}\n"
            f"entries  {state.entries}\n"
            f"size     {_megabytes(state.bytes)} of {_megabytes(state.limit_bytes)}\n"
            f"status   {visible(status)}"
        )
    )


def _megabytes(size: int) -> str:
    from attnviz.cache.settings import MB

    return f"{size / MB:.1f} MB" if size < 100 * MB else f"{size / MB:.0f} MB"


def cache_clear(console: Console) -> None:
    """Remove every cache entry."""
    from attnviz.cache import contents, settings
    from attnviz.render.cells import visible

    entries, size = contents.clear()
    folder = visible(str(settings.cache_dir()))
    noun = "entry" if entries == 1 else "entries"
    console.print(Text(f"removed {entries} {noun} ({_megabytes(size)}) from {folder}"))

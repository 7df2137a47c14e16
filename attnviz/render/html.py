"""Attention as one self-contained HTML page (or a notebook cell): no network, ever.

The page's script and style are the readable files next to this module
(`web/attnviz.js`, `web/attnviz.css`, after `web/common.js`), inlined when writing
(`embed`): the file references nothing outside itself, so it opens from disk, offline,
years later. Each view
lives in its own element with a unique id and defines no global name, so several
views can share one notebook.

The weights are embedded compactly: quantised to 16-bit integers q = round(w · 65535)
(error below 8e-6 per piece weight; a word's weight sums its pieces', so the 4th
decimal the page shows can differ by one from `show --json`), the low and high bytes
stored as two planes, deflated and base64-encoded. A 128-piece sentence with the whole
of a 6 × 12 model stays under 2 MB. Past HTML_U16_LIMIT numbers (about 250 pieces for
that model), the weights are stored in 8 bits (error below 0.002; the page then shows
2 decimals marked ≈ and says so) so that a 512-piece input still makes a page of about
3 MB. numpy and the standard library only.

Masked cells (keys the model could not see: a decoder's future, outside a layer's sliding
window) travel as one bit per piece pair and layer, `masked` (L, T, T), packed and
deflated the same way (a triangle deflates to almost nothing: 1/16 of the 16-bit weights
before compression at most); the page merges them into words itself (a word pair is
masked when every pair of its pieces is), greys those cells and leaves those keys unlisted.
"""

from __future__ import annotations

import base64
import html
import json
import uuid
import zlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from attnviz.lexicon import page_texts
from attnviz.render.cells import visible

__all__ = [
    "HTML_U16_LIMIT",
    "document",
    "embed",
    "fragment",
    "page",
    "steps_fragment",
    "steps_page",
]

WEB = Path(__file__).parent / "web"
# Above this many weights (L·H·T·T) the page stores 8 bits per weight instead of 16.
HTML_U16_LIMIT = 5_000_000
VIEWS = ("heads", "matrix", "model")


@cache
def _asset(name: str) -> str:
    return (WEB / name).read_text(encoding="utf-8")


def _encode(attentions: np.ndarray) -> dict[str, object]:
    """The weights as quantised, byte-planed, deflated base64, with how to read them back."""
    values = np.clip(np.nan_to_num(np.asarray(attentions, dtype=np.float64)), 0.0, 1.0)
    if values.size <= HTML_U16_LIMIT:
        scale, dtype = 65535, "u16"
        q = np.round(values * scale).astype("<u2")  # (L, H, T, T)
        planes = q.reshape(-1).view(np.uint8).reshape(-1, 2).T  # (2, n): low bytes, high bytes
        raw = np.ascontiguousarray(planes).tobytes()
    else:
        scale, dtype = 255, "u8"
        raw = np.round(values * scale).astype(np.uint8).tobytes()
    data = base64.b64encode(zlib.compress(raw, 6)).decode("ascii")
    return {"dtype": dtype, "scale": scale, "compression": "deflate", "data": data}


def _encode_mask(masked: np.ndarray | None, shape: tuple[int, ...]) -> dict[str, object] | None:
    """The mask (L, T, T) bool as packed bits (numpy's big-endian order), deflated, base64."""
    if masked is None:
        return None
    bits = np.asarray(masked, dtype=bool)
    if bits.shape != shape:
        raise ValueError(f"masked {bits.shape} does not fit the layers' matrices {shape}")
    packed = np.packbits(bits.reshape(-1)).tobytes()  # (ceil(L·T·T / 8),)
    return {"compression": "deflate", "data": base64.b64encode(zlib.compress(packed, 6)).decode()}


def _spec(
    attentions: np.ndarray,
    tokens: Sequence[str],
    *,
    words: Sequence[Sequence[int]] | None,
    word_labels: Sequence[str] | None,
    pair_start: int | None,
    pair_word_start: int | None,
    title: str,
    view: str,
    layer: int | None,
    head: int | None,
    heads: Sequence[int] | None,
    units: str,
    theme: str,
    layer_names: Sequence[str] | None = None,
    head_names: Sequence[str] | None = None,
    lang: str = "en",
    masked: np.ndarray | None = None,
    key_tokens: Sequence[str] | None = None,
    key_words: Sequence[Sequence[int]] | None = None,
    key_word_labels: Sequence[str] | None = None,
    renormalise: bool = False,
) -> dict[str, object]:
    L, H, T, K = attentions.shape
    keys = tokens if key_tokens is None else key_tokens
    if len(tokens) != T or len(keys) != K or (key_tokens is None and T != K):
        raise ValueError(f"attentions {attentions.shape} do not fit {len(tokens)} tokens")
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    return {
        "version": 1,
        "layers": L,
        "heads": H,
        "T": T,
        **_encode(attentions),
        "masked": _encode_mask(masked, (L, T, K)),
        "tokens": list(tokens),
        # A rectangle's keys (the columns; T x K weights): None when the keys are the queries.
        "K": K,
        "keyTokens": list(key_tokens) if key_tokens is not None else None,
        "keyWords": [list(map(int, g)) for g in key_words] if key_words is not None else None,
        "keyWordLabels": list(key_word_labels) if key_word_labels is not None else None,
        "words": [list(map(int, g)) for g in words] if words is not None else None,
        "wordLabels": list(word_labels) if word_labels is not None else None,
        "pairStart": pair_start,
        "pairWordStart": pair_word_start,
        "title": visible(title),
        "view": view,
        "layer": layer,
        "head": head,
        "selected": list(heads) if heads is not None else None,
        "units": units,
        "theme": theme,
        "layerNames": list(layer_names) if layer_names is not None else None,
        "headNames": list(head_names) if head_names is not None else None,
        "lang": lang,
        "text": page_texts(lang),
        "renormalise": renormalise,
    }


def fragment(attentions: np.ndarray, tokens: Sequence[str], **options: object) -> str:
    """The view as an HTML fragment (an element, its style, its data and its script).

    `attentions` is [layers, heads, T, T] over `tokens`; the options are those of `page`.
    """
    spec = _spec(attentions, tokens, **options)  # type: ignore[arg-type]
    return embed("attnvizMount", spec, ("attnviz.js",), ("attnviz.css",), lang=str(spec["lang"]))


def embed(
    mount: str,
    spec: dict[str, object],
    scripts: Sequence[str],
    styles: Sequence[str],
    *,
    lang: str | None = None,
    classes: str = "attnviz",
) -> str:
    """An element with a unique id, the `styles` and `scripts` named (files in `web/`; the
    scripts after `web/common.js`), `spec` as JSON, and the call `mount(element, spec)` that
    draws the view: all in one function scope, so it defines no global name. `lang` ("en",
    "pt") sets the element's language, `classes` its class (none when empty)."""
    root = f"attnviz-{uuid.uuid4().hex[:12]}"
    data = json.dumps(spec, ensure_ascii=False, separators=(",", ":"))
    # No "<" at all inside the script element: a label cannot close it ("</script>") or
    # switch the parser into a comment state ("<!--<script>"). \u003c is the same in JSON.
    data = data.replace("<", "\\u003c")
    attrs = f' class="{classes}"' if classes else ""
    if lang is not None:
        attrs += f' lang="{"pt-BR" if lang == "pt" else "en"}"'
    return (
        f'<div id="{root}"{attrs}></div>\n'
        f"<style>{chr(10).join(_asset(name) for name in styles)}</style>\n"
        f'<script type="application/json" id="{root}-data">{data}</script>\n'
        "<script>(function () {\n"
        f"{chr(10).join(_asset(name) for name in ('common.js', *scripts))}\n"
        f'{mount}(document.getElementById("{root}"), '
        f'JSON.parse(document.getElementById("{root}-data").textContent));\n'
        "})();</script>\n"
    )


def page(
    attentions: np.ndarray,
    tokens: Sequence[str],
    *,
    words: Sequence[Sequence[int]] | None = None,
    word_labels: Sequence[str] | None = None,
    pair_start: int | None = None,
    pair_word_start: int | None = None,
    title: str = "attention",
    view: str = "heads",
    layer: int | None = None,
    head: int | None = None,
    heads: Sequence[int] | None = None,
    units: str = "words",
    theme: str = "auto",
    lang: str = "en",
    masked: np.ndarray | None = None,
    key_tokens: Sequence[str] | None = None,
    key_words: Sequence[Sequence[int]] | None = None,
    key_word_labels: Sequence[str] | None = None,
    renormalise: bool = False,
) -> str:
    """A whole HTML document that shows the attention interactively, with nothing to fetch.

    `view` is the view it opens on: "heads" (two columns of tokens joined by lines),
    "matrix" (one head's heatmap) or "model" (every layer and head); `layer`, `head`
    and `heads` say where it opens; `units` is "words" (when `words` gives the pieces
    of each word) or "tokens"; `theme` is "auto" (the reader's setting), "light" or "dark";
    `lang` ("en" or "pt") is the language of its controls and captions (`attnviz.lexicon`);
    `masked` (layers, T, T) bool marks the keys each layer's queries could not see (None:
    none), drawn greyed and left unlisted. A rectangle, [layers, heads, T, K] (queries and
    keys from two inputs), names its keys in `key_tokens` (and their words in `key_words`,
    `key_word_labels`): the head view's right column and the matrix's columns.
    `renormalise`: the page divides each row (after merging words, after the head mean) by
    its sum, for attention with some keys left out.
    """
    body = fragment(
        attentions,
        tokens,
        words=words,
        word_labels=word_labels,
        pair_start=pair_start,
        pair_word_start=pair_word_start,
        title=title,
        view=view,
        layer=layer,
        head=head,
        heads=heads,
        units=units,
        theme=theme,
        lang=lang,
        masked=masked,
        key_tokens=key_tokens,
        key_words=key_words,
        key_word_labels=key_word_labels,
        renormalise=renormalise,
    )
    return _document(title, theme, body, lang)


def steps_page(
    attentions: np.ndarray,
    labels: Sequence[str],
    *,
    prompt_length: int,
    title: str,
    layer: int,
    head: int | None,
    theme: str = "auto",
) -> str:
    """A whole HTML document with a slider over the tokens a decoder wrote (`web/steps.js`):
    `steps_fragment` in a page of its own."""
    body = steps_fragment(
        attentions, labels, prompt_length=prompt_length, title=title, layer=layer, head=head,
        theme=theme,
    )  # fmt: skip
    return _document(title, theme, body)


def steps_fragment(
    attentions: np.ndarray,
    labels: Sequence[str],
    *,
    prompt_length: int,
    title: str,
    layer: int,
    head: int | None,
    theme: str = "auto",
) -> str:
    """The step slider as an HTML fragment (an element, its style, its data and its script).

    `attentions` is [layers, heads, T, T] over the T tokens read (the prompt, then the new
    tokens but the last); `labels` names every piece, the last new token too (T + 1).
    At each step the page shades the text so far by the new token's weights and shows
    the head view and matrix of `page` over the tokens read until then.
    """
    T = attentions.shape[2]
    if len(labels) != T + 1 or not 0 < prompt_length <= T:
        raise ValueError(f"{len(labels)} labels and prompt {prompt_length} for {T} tokens read")
    base = _spec(attentions, labels[:T], words=None, word_labels=None, pair_start=None,
                 pair_word_start=None, title=title, view="heads", layer=layer, head=head,
                 heads=None, units="tokens", theme=theme)  # fmt: skip
    spec = {"base": base, "labels": list(labels), "prompt": prompt_length,
            "layer": layer, "head": head}  # fmt: skip
    return embed(
        "attnvizSteps", spec, ("attnviz.js", "steps.js"), ("attnviz.css", "steps.css"), classes=""
    )


def document(title: str, theme: str, body: str, lang: str = "en") -> str:
    """A whole offline HTML document around `body` (the page's content security policy
    forbids any request)."""
    return _document(title, theme, body, lang)


def _document(title: str, theme: str, body: str, lang: str = "en") -> str:
    background = {"dark": "#161a1f", "light": "#ffffff"}.get(theme, "Canvas")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{"pt-BR" if lang == "pt" else "en"}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{html.escape(visible(title))}</title>\n"
        '<meta name="color-scheme" content="light dark">\n'
        f"<style>body {{ margin: 0; padding: 1em; background: {background}; }}</style>\n"
        "</head>\n<body>\n"
        f"{body}"
        "</body>\n</html>\n"
    )

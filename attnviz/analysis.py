"""An input's attention (`Analysis`), and the views, measures and files made from it.

`attnviz.analyse` (or `attnviz.prepare(...).analyse()`) returns it. It holds every
attention weight
`[layers, heads, T, T]` over the model's own pieces, and builds the views that the
commands show: `view` (one head or the head mean), `heads`, `model_view`, `rollout`,
`explain`; `figure` and `save` draw them; `save` also writes the raw data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz import limits
from attnviz.errors import BadInput
from attnviz.inputs import ModelInfo, PreparedInput, TokenizedInput, no_model, short
from attnviz.language import resolve_lang
from attnviz.lexicon import label
from attnviz.limits import TOP, check_choice, check_export, check_range, resolve_heads
from attnviz.measures.select import UnitMap, check_exclude, exclusion_note
from attnviz.measures.views import (
    AttentionView,
    HeadsView,
    RolloutView,
    Source,
    heads_view,
    layer_view,
    model_view,
    rollout_view,
)
from attnviz.output import (
    DATA_SUFFIXES,
    HTML_SUFFIXES,
    IMAGE_SUFFIXES,
    ImageStyle,
    atomic_write,
    check_output,
    check_page_measure,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console, ConsoleOptions, RenderResult

    from attnviz.measures.compare import Comparison
    from attnviz.measures.explain import Explanation
    from attnviz.measures.find import HeadLinks
    from attnviz.measures.query import QueryRow
    from attnviz.render.data import About, Sides
    from attnviz.text.pieces import Pieces, Word

__all__ = ["VIEWS", "Analysis"]

Exclude = str | Sequence[str] | None  # "special", "punct", both, or nothing
VIEWS: tuple[str, ...] = ("show", "heads", "model")
PAGE_VIEWS: tuple[str, ...] = ("show", "heads", "model", "matrix")  # where a page may open


@dataclass(frozen=True, eq=False, repr=False)
class Analysis(TokenizedInput):
    """The attention of one input, over the model's own pieces (special tokens included).

    `attentions[l, h, i, j]` is how much piece i attends to piece j in head h of layer l;
    each row sums to 1.

    A rectangle, `(L, H, Tq, Tk)`, holds queries and keys from two inputs (an
    encoder-decoder's cross-attention, or arrays given so): `pieces` are the queries' (the
    rows), `key_pieces` the keys' (the columns); `key_pieces` None means the keys are the
    queries. Every view, page, data file, `find` and `row` handles one; rollout refuses it.
    """

    prepared: PreparedInput  # the input it was computed for (an attnviz.Prepared)
    attentions: np.ndarray  # (L, H, Tq, Tk) float32; rows are queries and sum to 1
    causal: bool = False  # computed with a causal mask: a what-if, not the real model
    dtype: str = "float32"  # what the encoder computed in
    # The model's layers `attentions` holds, when not all of them (a long input whose whole
    # attention is too large to keep): attentions[i] is layer layers[i]. None: every layer.
    layers: tuple[int, ...] | None = None
    # The keys' pieces when they are not the queries' (a rectangle); None: a square.
    key_pieces: Pieces | None = None
    # False: the rows were given as they are and do not all sum to 1 (said in every title).
    normalised: bool = True
    # An encoder-decoder's source and target and the stack shown (titles and data files say
    # which); None for other models.
    sides: Sides | None = None
    _measures: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.attentions.setflags(write=False)  # the model's numbers: views copy, never edit
        keys = self.key_pieces
        if keys is not None and self.attentions.shape[-1] != len(keys):
            raise ValueError(
                f"attentions {self.attentions.shape} do not fit {len(keys)} key pieces"
            )

    @property
    def rectangle(self) -> bool:
        """True when the keys are another input's pieces than the queries'."""
        return self.key_pieces is not None

    @property
    def _keys(self) -> Pieces:
        """The keys' pieces: `key_pieces`, or the queries' own."""
        return self.pieces if self.key_pieces is None else self.key_pieces

    @property
    def key_tokens(self) -> list[str]:
        """The keys' vocabulary pieces (the columns): `tokens` unless a rectangle."""
        return list(self._keys.tokens)

    @property
    def key_labels(self) -> list[str]:
        """The keys' pieces as their text spells them: `labels` unless a rectangle."""
        return list(self._keys.labels)

    @property
    def key_words(self) -> list[Word]:
        """The keys' words, each with the indices of its pieces: `words` unless a rectangle."""
        return self._keys.words()

    @property
    def pieces(self) -> Pieces:  # type: ignore[override]
        return self.prepared.pieces

    @property
    def model(self) -> ModelInfo:
        return self.prepared.model

    @property
    def title(self) -> str:
        """The model's name as titles show it, marked when the numbers are not the plain model's."""
        return self._title("en")

    @property
    def engine(self) -> str:
        """What computed the weights: "attnviz" (its own from-scratch modules) or
        "transformers" (transformers' eager model, for a type attnviz does not compute)."""
        return self.prepared.engine

    def _title(self, lang: str) -> str:
        """`title` in `lang` (resolved)."""
        name = self.prepared.source.name
        if self.engine == "transformers":  # not attnviz's own, nor a caller's arrays
            name = label(lang, "engine_title", model=name, engine=self.engine)
        if self.dtype != "float32":
            name = label(lang, "computed_in", model=name, dtype=self.dtype)
        if not self.normalised:
            name = label(lang, "not_normalised", model=name)
        if self.sides is not None:
            name = label(lang, f"stack_{self.sides.stack}", model=name)
            if self.sides.generated:
                name = label(lang, "generated_target", model=name)
        return label(lang, "modified_causal", model=name) if self.causal else name

    def __repr__(self) -> str:
        _, H, T, K = self.attentions.shape
        kept = f" (kept: {list(self.layers)})" if self.layers is not None else ""
        keys = f" × {K} key pieces" if self.key_pieces is not None else ""
        return (
            f"<Analysis {self.model.name}: {self.model.layers} layers{kept} × {H} heads × "
            f"{T} pieces{keys}, text={short(self.text)!r}{', causal' if self.causal else ''}>"
        )

    def _source(self, lang: str = "en") -> Source:
        return Source(
            self.attentions,
            self.pieces,
            self._title(lang),
            kept=self.layers,
            num_layers=self.prepared.num_layers,
            lang=lang,
            keys=self.key_pieces,
            engine=self.engine,
            stack=None if self.sides is None else self.sides.stack,
            **self._mask,
        )

    def _whole(self, what: str) -> None:
        self._source().whole(what)

    def _measured(
        self,
        measure: str,
        *,
        head: int | None = None,
        heads: Sequence[int] | None = None,
        view: str = "show",
        lang: str = "en",
    ) -> Source:
        """What the views draw for `measure`: the weights, or a contribution measure."""
        from attnviz.measures.contributions import PER_LAYER, check_measure, describe_measure

        check_measure(measure, head=head, heads=heads, view=view)
        note = describe_measure(measure, lang)
        if measure == "weight":
            return self._source(lang)
        self._self_attention(f"measure {measure!r}")
        self._whole(f"measure {measure!r}")
        values = self.measure(measure)  # (L, H, T, T) or (L, T, T)
        per_layer = measure in PER_LAYER
        return Source(
            values[:, None] if per_layer else values,  # (L, H or 1, T, T)
            self.pieces,
            self._title(lang),
            measure=measure,
            per_layer=per_layer,
            note=f" · {note}",
            lang=lang,
            **self._mask,
        )

    def _self_attention(self, what: str) -> None:
        """Refuse `what` (a measure that runs the model again) without a model, or on a
        rectangle, whose keys are not the layer's own input."""
        if not self.model.has_model:
            raise no_model(what)
        if self.key_pieces is not None:
            raise BadInput(
                f"{what} decomposes a layer's self-attention, and this attention's queries and "
                "keys are two inputs (a rectangle): draw the weights"
            )

    @property
    def _mask(self) -> dict[str, Any]:
        """The model's mask, as `Source` takes it: causal, and each layer's sliding window."""
        return {"causal": self.causal or self.model.decoder, "windows": self._windows}

    @property
    def _windows(self) -> tuple[int | None, ...]:
        """Each model layer's sliding window in pieces (None: none); () for an encoder."""
        if not self.model.has_model:
            return self.model.windows  # as the arrays' file gave them
        decoder = self.prepared.shape.decoder
        if decoder is None:
            return ()
        return tuple(decoder.window(layer) for layer in range(decoder.num_layers))

    # ------------------------------------------------------------ views

    def view(
        self,
        layer: int = -1,
        head: int | None = None,
        units: str = "words",
        *,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> AttentionView:
        """One layer's head, or the mean over its heads when `head` is None.

        Layers and heads count from 0; negative numbers count from the end. `units` is
        "words" (pieces merged back into the words of the text) or "tokens".
        `exclude` ("special", "punct", "first" (alias "sink") or a list of them) drops
        those tokens and renormalises each row over the keys left. `measure` draws a
        contribution measure instead of the weights (see `measure()`); a per-layer measure
        takes no `head`. `lang` is the language of the titles and labels, "en" or "pt"
        (every verb that draws takes it; None: Portuguese when LC_ALL, LC_MESSAGES or LANG
        starts with pt).
        """
        source = self._measured(measure, head=head, lang=resolve_lang(lang))
        return layer_view(source, layer, head, units, exclude)

    def row(
        self,
        query: str | int,
        layer: int = -1,
        head: int | None = None,
        units: str = "words",
        *,
        exclude: Exclude = None,
        lang: str | None = None,
    ) -> QueryRow:
        """One query's attention in one head (or the head mean), keys sorted by weight.

        `query` is a word of the text (any case or accents; `ele#2` for the second); in
        a rectangle, a word of the queries' input.
        """
        return self.view(layer, head, units, exclude=exclude, lang=lang).row(query)

    def heads(
        self,
        layer: int = -1,
        heads: Sequence[int] | None = None,
        units: str = "words",
        *,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> HeadsView:
        """Every head of one layer (or those listed in `heads`), side by side."""
        source = self._measured(measure, heads=heads, view="heads", lang=resolve_lang(lang))
        return heads_view(source, layer, heads, units, exclude)

    def model_view(
        self,
        heads: Sequence[int] | None = None,
        units: str = "words",
        *,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> HeadsView:
        """Every layer and head at a glance (or the `heads` listed, in every layer)."""
        source = self._measured(measure, heads=heads, lang=resolve_lang(lang))
        return model_view(source, heads, units, exclude)

    def rollout(
        self,
        upto: int | None = None,
        units: str = "words",
        top: int = 3,
        *,
        exclude: Exclude = None,
        measure: str = "weight",
        method: str = "rollout",
        progress: Callable[[int], None] | None = None,
        lang: str | None = None,
    ) -> RolloutView:
        """Attention rollout (Abnar & Zuidema 2020) through layer `upto` (None: the last).

        `top` is how many inputs `sources()` lists for each token. `exclude` drops
        tokens after the chain (which runs over every piece), so the sources listed
        are among the tokens left. `measure` chains a contribution measure instead:
        ALTI, norm-res-ln and value zeroing without the added identity, since they
        already contain the residual. `method="flow"` computes attention flow (maximum
        flow through the layers; at most 64 pieces), calling `progress(n)` as it goes.
        """
        source = self._measured(measure, lang=resolve_lang(lang))
        return rollout_view(source, upto, units, top, exclude, method=method, progress=progress)

    def find(
        self,
        source: str,
        target: str,
        *,
        units: str = "words",
        exclude: Exclude = None,
        top: int = 10,
        lang: str | None = None,
    ) -> HeadLinks:
        """Every (layer, head) ranked by the weight from the word `source` to `target`.

        Words match ignoring case and accents (`joao` finds `João`); `ele#2` is the
        second `ele`. Each head says where `target` ranks among `source`'s keys, the
        query's top key, and how many other words attend to `target` more. In a rectangle
        `source` is a word of the queries' input and `target` one of the keys'.
        """
        from attnviz.measures.find import find_links

        self._whole("find")
        return find_links(
            self._source(resolve_lang(lang)),
            source,
            target,
            units=units,
            exclude=exclude,
            top=top,
            causal=self.causal or self.model.decoder,
        )

    def measure(self, name: str = "norm") -> np.ndarray:
        """How much each key contributes to each query, by a measure other than the weight.

        "norm": ‖α_ij f(x_j)‖ per head (Kobayashi et al. 2020), [layers, heads, T, T];
        per layer, [layers, T, T]: "norm-res-ln" (Kobayashi et al. 2021), "alti" (Ferrando
        et al. 2022, rows sum to 1), "value-zeroing" (Mohebbi et al. 2023, rows sum to 1);
        "weight": the attention itself. Over the model's pieces; the encoder runs again
        (once per measure: the result is kept with the analysis, read-only).
        """
        from attnviz.measures.contributions import compute_measure, describe_measure

        describe_measure(name)
        if name == "weight":
            return self.attentions
        self._self_attention(f"measure {name!r}")
        self.prepared.refuse_internals(f"the measure {name!r}")
        if name not in self._measures:
            values = compute_measure(self.prepared, name, causal=self.causal)
            values.setflags(write=False)
            self._measures[name] = values
        return self._measures[name]

    def compare(
        self,
        query: str,
        layer: int = -1,
        *,
        measures: Sequence[str] | None = None,
        units: str = "words",
        top: int = 5,
        lang: str | None = None,
    ) -> Comparison:
        """For one query word, how each measure ranks the keys in `layer`, side by side.

        `measures` defaults to all five; the weight and the norm are the layer's head mean.
        `disagreements()` says where their top keys differ.
        """
        from attnviz.measures.contributions import (
            MEASURES,
            check_decoder_comparison,
            check_measure_cost,
        )
        from attnviz.text.match import find_label

        if measures is not None and (
            isinstance(measures, str | bytes) or not isinstance(measures, Sequence)
        ):
            raise BadInput(
                f"{{measures}} must be a list of measure names, e.g. ['weight', 'alti']; got "
                f"{type(measures).__name__}",
                param="measures",
            )
        if not self.model.has_model:
            raise no_model("compare")
        lang = resolve_lang(lang)
        chosen = list(MEASURES) if measures is None else list(measures)
        if not chosen:
            raise BadInput("name at least one measure to compare")
        if len(chosen) > len(MEASURES):  # by its length, before reading the entries
            raise BadInput(
                f"{{measures}} lists {len(chosen):,} measures; there are {len(MEASURES)}: "
                "list each once",
                param="measures",
            )
        for name in chosen:
            check_choice(name, tuple(MEASURES), "measure")
        if len(set(chosen)) < len(chosen):
            raise BadInput("{measures} names a measure twice: list each once", param="measures")
        _word(query, "query")
        if chosen != ["weight"]:
            self.prepared.refuse_internals("comparing the measures")
        check_decoder_comparison(self.prepared, chosen)
        check_measure_cost(self.prepared, [m for m in chosen if m not in self._measures])
        views = [self.view(layer, None, units, measure=m, lang=lang) for m in chosen]
        q = find_label(views[0].tokens, query, "query")
        from attnviz.measures.compare import Comparison

        return Comparison(
            title=label(
                lang,
                "compare_title",
                title=self._title(lang),
                layer=views[0].layer,
                query=views[0].tokens[q],
            ),
            query=q,
            labels=views[0].tokens,
            layer=views[0].layer,
            measures=chosen,
            values=np.stack([v.matrix[q] for v in views]),  # (M, N)
            top=check_range(top, "top", TOP),
            lang=lang,
        )

    def explain(
        self,
        token: str | None = None,
        *,
        index: int | None = None,
        layer: int = -1,
        head: int = 0,
        lang: str | None = None,
    ) -> Explanation:
        """How one query's attention in one head is computed, every intermediate kept.

        Name the query by a word of the text (`token="ele"`, `"ele#2"` for the second)
        or by a piece index (`index=`). `lang` ("en" or "pt") is the language the
        explanation prints in (None: Portuguese when the locale is). Runs the encoder again
        to read the layer's input.
        """
        if not self.model.has_model:
            raise no_model("explain")
        return self.prepared.explain(
            token=token,
            index=index,
            layer=layer,
            head=head,
            lang=resolve_lang(lang),
            mask="causal" if self.causal else "none",
        )

    def _pick(
        self,
        view: str,
        layer: int,
        head: int | None,
        heads: Sequence[int] | None,
        units: str,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str = "en",
    ) -> AttentionView | HeadsView:
        check_choice(view, VIEWS, "view")
        if view == "heads":
            return self.heads(layer, heads, units, exclude=exclude, measure=measure, lang=lang)
        if view == "model":
            return self.model_view(heads, units, exclude=exclude, measure=measure, lang=lang)
        return self.view(layer, head, units, exclude=exclude, measure=measure, lang=lang)

    def figure(
        self,
        view: str = "show",
        *,
        layer: int = -1,
        head: int | None = None,
        heads: Sequence[int] | None = None,
        units: str = "words",
        cmap: str = "viridis",
        theme: str = "light",
        annotate: bool = False,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> Figure:
        """A matplotlib Figure of `view`: "show" (one head or the mean), "heads", "model"."""
        chosen = self._pick(view, layer, head, heads, units, exclude, measure, resolve_lang(lang))
        return chosen.figure(cmap=cmap, theme=theme, annotate=annotate)

    def save(
        self,
        path: str | Path,
        view: str = "show",
        *,
        layer: int = -1,
        head: int | None = None,
        heads: Sequence[int] | None = None,
        units: str = "words",
        dpi: int = 200,
        cmap: str = "viridis",
        theme: str | None = None,
        transparent: bool = False,
        annotate: bool = False,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
    ) -> Path:
        """Write an image of `view` (.png, .svg, .pdf), an interactive page (.html) or the
        raw attention (.npz, .json).

        The data files are those `attnviz export` writes (with a `measure` other than the
        weights, `.npz` also holds it under its name); the page is `html()`, opened on
        `view` at `layer` and `head`. `theme` is "light" (images) or "auto" (pages) when
        not given. `lang` ("en" or "pt") is the language of an image's or a page's labels.
        All of the file or nothing.
        """
        lang = resolve_lang(lang)
        path = _path(path)
        style = ImageStyle(dpi, cmap, theme or "light", transparent, annotate)
        check_output(path, IMAGE_SUFFIXES + HTML_SUFFIXES + DATA_SUFFIXES, style)
        suffix = path.suffix.lower()
        check_export(suffix, self.attentions.size)
        if suffix in DATA_SUFFIXES:
            from attnviz.render.data import write_data

            extra = {}
            if measure != "weight":  # "value-zeroing" is written as value_zeroing
                extra[measure.replace("-", "_")] = self.measure(measure).astype(np.float32)
            write_data(
                path,
                self.pieces,
                self.attentions,
                self._layer_numbers,
                self._about,
                extra,
                keys=self.key_pieces,
                sides=self.sides,
            )
            return path
        check_page_measure(path, measure)
        if suffix in HTML_SUFFIXES:
            page = self.html(
                view,
                layer=layer,
                head=head,
                heads=heads,
                units=units,
                theme=theme or "auto",
                lang=lang,
                exclude=exclude,
            )
            with atomic_write(path, "w") as handle:
                handle.write(page)
            return path
        chosen = self._pick(view, layer, head, heads, units, exclude, measure, lang)
        return chosen.save(
            path,
            dpi=dpi,
            cmap=cmap,
            theme=style.theme,
            transparent=transparent,
            annotate=annotate,
        )

    def to_dict(self) -> dict[str, Any]:
        """The data `save("x.json")` writes: every layer's attention over the model's pieces."""
        from attnviz.render.data import data_record

        return data_record(
            self.pieces,
            self.attentions,
            self._layer_numbers,
            self._about,
            keys=self.key_pieces,
            sides=self.sides,
        )

    @property
    def _layer_numbers(self) -> list[int]:
        """The model's layer of each entry of `attentions`."""
        kept = self.layers
        return list(range(self.attentions.shape[0])) if kept is None else list(kept)

    @property
    def _about(self) -> About:
        """What a data file says of the model and how the attention was computed."""
        return {
            "model": self.model.name,
            "kind": self.model.kind,
            "causal": self.causal or self.model.decoder,  # a decoder's own mask, or a what-if
            "dtype": self.dtype,
            "windows": self._windows,
            "engine": self.engine,
        }

    def _page_options(
        self,
        view: str,
        layer: int,
        head: int | None,
        heads: Sequence[int] | None,
        units: str,
        theme: str,
        lang: str = "en",
        exclude: Exclude = None,
    ) -> dict[str, Any]:
        """Where the page opens, checked as the views check it; with `exclude`, which pieces
        it keeps (`kept`: indices, None for all) and the page renormalises its rows."""
        check_choice(view, PAGE_VIEWS, "view")
        check_choice(theme, ("auto", "light", "dark"), "theme")
        self.prepared.check(layer=layer, head=head, heads=heads)
        chosen = self.view(layer, head, units, exclude=exclude)  # resolves and checks once
        kept = _page_pieces(self.pieces, units, exclude)  # (n,) or None
        pieces = range(len(self.pieces)) if kept is None else kept.tolist()
        at = {p: i for i, p in enumerate(pieces)}  # piece -> its place on the page
        words = [
            (w.label, [at[p] for p in w.pieces if p in at]) for w in self.words
        ]  # each word's pieces on the page; a word with none left is not on it
        words = [(name, group) for name, group in words if group]
        sequence_ids = [self.pieces.sequence_ids[p] for p in pieces]
        word_start = next(
            (w for w, (_, group) in enumerate(words) if sequence_ids[group[0]] == 1), None
        )
        keys: dict[str, Any] = {}
        if self.key_pieces is not None:  # a rectangle: the keys' own pieces and words
            if kept is not None:
                raise BadInput(
                    "{exclude} on a page of a rectangle (queries and keys from two inputs) is "
                    "not drawn: leave it out, or use it on the terminal views and images",
                    param="exclude",
                )
            key_words = self.key_words
            keys = {
                "key_tokens": self.key_labels,
                "key_words": [w.pieces for w in key_words],
                "key_word_labels": [w.label for w in key_words],
            }
        pair_start = next((i for i, seq in enumerate(sequence_ids) if seq == 1), None)
        masked = self._piece_masks()
        return {
            **keys,
            "words": [group for _, group in words],
            "word_labels": [name for name, _ in words],
            "pair_start": pair_start,
            "pair_word_start": word_start,
            "title": self._title(lang) + exclusion_note(check_exclude(exclude), lang),
            "view": {"show": "matrix", "heads": "heads", "model": "model"}.get(view, view),
            "layer": chosen.layer,
            "head": chosen.head,
            "heads": resolve_heads(heads, self.model.heads),
            "units": units,
            "theme": theme,
            "lang": lang,
            "masked": masked if masked is None or kept is None else masked[:, kept[:, None], kept],
            "renormalise": kept is not None,
            "kept": kept,
        }

    def _piece_masks(self) -> np.ndarray | None:
        """(L, T, T) bool: the keys each held layer hides from each query, over the pieces;
        None when nothing is hidden (an encoder)."""
        source = self._source()
        layers = self._layer_numbers
        masks = [source.hidden(layer) for layer in layers]
        if any(mask is None for mask in masks):
            return None
        return np.stack([mask for mask in masks if mask is not None])  # (L, T, T)

    # ------------------------------------------------------------ interactive pages

    def html(
        self,
        view: str = "heads",
        *,
        layer: int = -1,
        head: int | None = None,
        heads: Sequence[int] | None = None,
        units: str = "words",
        theme: str = "auto",
        lang: str | None = None,
        exclude: Exclude = None,
    ) -> str:
        """One self-contained HTML page to explore every layer and head, offline.

        It opens on `view`: "heads" (tokens in two columns joined by lines, one colour
        per head; bertviz's head view), "show" (one head's heatmap, with the exact weight
        under the pointer) or "model" (every layer and head); at `layer`, `head`, and
        with `heads` selected. `theme` is "auto" (the reader's setting), "light" or "dark".
        `lang` ("en" or "pt") is the language of the page's controls and captions.
        `exclude` ("special", "punct", "first" (alias "sink") or a list of them) leaves those
        pieces off the page, as keys and queries, and the page renormalises each row over the
        keys left, as the views do; it drops what `units` drops (in words, a word all of whose
        pieces are excluded), and its pieces/words switch keeps that choice.
        """
        from attnviz.render.html import page

        self._whole("an HTML page")
        check_export(".html", self.attentions.size)
        options = self._page_options(
            view, layer, head, heads, units, theme, resolve_lang(lang), exclude
        )
        kept = options.pop("kept")
        attentions = self.attentions
        labels = self.labels
        if kept is not None:
            attentions = attentions[:, :, kept[:, None], kept]  # (L, H, n, n): not renormalised
            labels = [labels[p] for p in kept]
        return page(attentions, labels, **options)

    def _repr_html_(self) -> str:
        """A notebook cell that ends in an analysis shows the interactive view."""
        from attnviz.render.html import fragment

        lang = resolve_lang(None)
        if self.layers is not None or self.attentions.size > limits.PAGE_WEIGHTS:
            return self.view(self._last, lang=lang)._repr_html_()  # one layer's matrix
        options = self._page_options("heads", -1, None, None, "words", "auto", lang)
        options.pop("kept")
        return fragment(self.attentions, self.labels, **options)

    # ------------------------------------------------------------ display

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """`rich.print(analysis)` draws the last layer's head mean, as `attnviz show` does."""
        yield self.view(self._last, lang=resolve_lang(None))

    def _repr_png_(self) -> bytes:
        return self.view(self._last, lang=resolve_lang(None))._repr_png_()

    def explore(
        self,
        layer: int = 0,
        head: int | None = 0,
        units: str = "words",
        *,
        exclude: Exclude = None,
        measure: str = "weight",
        lang: str | None = None,
        retext: Callable[[str], Analysis] | None = None,
        out: str | Path | None = None,
    ) -> None:
        """Explore this attention full-screen in the terminal until `q` (`attnviz explore`):
        ←/→ the heads, ↑/↓ the layers, Tab the queries, `?` every key. It opens on `layer`,
        `head` (None: the mean); `s` writes PNGs in `out` (None: the current folder); `/`
        reads a new text with `retext(text)` (e.g. `lambda t: attnviz.analyse(t)`), when given.
        """
        from attnviz.explore.app import explore
        from attnviz.explore.place import Place

        lang = resolve_lang(lang)
        shown = self.view(layer, head, units, exclude=exclude, measure=measure, lang=lang)
        at = shown.layer if self.layers is None else self.layers.index(shown.layer)
        place = Place(at, shown.head, 0, units, shown.excluded, measure)
        explore(self, lang=lang, place=place, retext=retext,
                out=None if out is None else _path(out))  # fmt: skip

    @property
    def _last(self) -> int:
        """The last layer this analysis holds."""
        return -1 if self.layers is None else self.layers[-1]


def _page_pieces(pieces: Pieces, units: str, exclude: Exclude) -> np.ndarray | None:
    """(n,) the pieces a page keeps with `exclude` (in words, the pieces of the words kept),
    or None when nothing is excluded."""
    unit_map = UnitMap.checked(pieces, units, exclude)
    if not unit_map.exclude:
        return None
    keep = unit_map.keep()  # (N,) over the units
    if unit_map.words:
        kept = [p for word, k in zip(pieces.words(), keep, strict=True) if k for p in word.pieces]
        return np.array(sorted(kept), dtype=np.int64)
    return np.flatnonzero(keep)


def _word(value: object, param: str) -> str:
    """A word of the text named by the argument `param`; BadInput for anything but a str."""
    if not isinstance(value, str):
        raise BadInput(
            f"{{{param}}} must be a word of the text (a str), got {type(value).__name__}",
            param=param,
        )
    return value


def _path(path: object) -> Path:
    from attnviz.output import as_path

    return as_path(path)

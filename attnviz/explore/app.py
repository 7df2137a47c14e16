"""The explorer: a full-screen Textual app over one analysis (`Explorable`).

Moving between heads, layers and queries redraws at once from the attention held; what
takes long (a contribution measure, `explain`, a PNG, a new text) runs in a worker
thread, with a line saying so, and `Esc` cancels it (its result is then dropped).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker

from attnviz.errors import AttnvizError
from attnviz.explore.keys import KEYS, say
from attnviz.explore.place import Place, move_head, move_layer, move_query, next_measure
from attnviz.explore.source import Explorable, Retext, word_name
from attnviz.explore.terminal import need_a_terminal
from attnviz.explore.widgets import HeatmapPane, HelpScreen, PanelScreen, RowPane, TextScreen
from attnviz.measures.views import AttentionView
from attnviz.render.cells import visible

__all__ = ["ExploreApp", "PortugueseApp", "bindings", "explore"]

_MODAL_OK = {"quit"}  # the only action a key still runs while a screen is over the view


def bindings(lang: str) -> list[Binding | tuple[str, str] | tuple[str, str, str]]:
    """The keys (`keys.KEYS`) as Textual binds them, described in `lang`."""
    pt = lang == "pt"
    pairs = [key.group for key in KEYS if key.group]
    groups = {group: Binding.Group(group[pt]) for group in pairs if pairs.count(group) > 1}
    return [
        Binding(
            key.keys,
            key.action,
            key.group[pt] if key.group else key.pt if pt else key.en,
            show=key.footer,
            key_display=key.shown,
            priority=key.priority,
            group=groups.get(key.group) if key.group else None,
        )
        for key in KEYS
    ]


class ExploreApp(App[None]):
    """One analysis's heatmaps, a head, a layer and a query at a time."""

    CSS = """
    #title { height: 1; text-style: bold; background: $boost; padding: 0 1; }
    #body { height: 1fr; }
    #map { width: 1fr; }
    #side { width: 32; border-left: solid $primary-darken-2; padding: 0 0 0 1; }
    #status { height: 1; color: $text-muted; padding: 0 1; }
    HelpScreen, PanelScreen, TextScreen { align: center middle; }
    #help { width: 56; height: auto; border: round $primary; background: $surface; padding: 0 1; }
    #panel { width: 95%; height: 90%; border: round $primary; background: $surface; }
    #retext { width: 90%; height: auto; border: round $primary; background: $surface; }
    """
    ENABLE_COMMAND_PALETTE = False
    TITLE = "attnviz explore"
    BINDINGS = bindings("en")

    def __init__(
        self,
        analysis: Explorable,
        *,
        lang: str = "en",
        place: Place | None = None,
        retext: Retext | None = None,
        out: Path | None = None,
    ) -> None:
        self.colour = not os.environ.get("NO_COLOR")  # read before Textual takes it away
        super().__init__()
        self.analysis = analysis
        self.lang = lang
        self.place = place or Place()
        self.retext = retext
        self.out = Path.cwd() if out is None else out  # where `s` writes its PNGs
        self.key: int | None = None  # the key clicked last (for `f`), a column of the view
        self.shown: AttentionView | None = None
        self.busy: Worker[Any] | None = None

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static(id="title")
        with Horizontal(id="body"):
            with VerticalScroll(id="map", can_focus=False):
                yield HeatmapPane(id="heatmap", colour=self.colour)
            with VerticalScroll(id="side", can_focus=False):
                yield RowPane(id="row")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.go(self.place)

    @property
    def layer_numbers(self) -> list[int]:
        """The model's layers the analysis holds, in order."""
        held = self.analysis.layers
        return list(range(self.analysis.model.layers)) if held is None else list(held)

    # ------------------------------------------------------------ drawing

    def view_at(self, place: Place) -> AttentionView:
        """The view `place` shows (raises the analysis's BadInput when it cannot be drawn)."""
        layer = self.layer_numbers[place.layer]
        exclude = list(place.exclude) or None
        if place.rollout:
            return self.analysis.rollout(layer, place.units, exclude=exclude,
                                         measure=place.measure, lang=self.lang)  # fmt: skip
        head = None if place.per_layer else place.head
        return self.analysis.view(layer, head, place.units, exclude=exclude,
                                  measure=place.measure, lang=self.lang)  # fmt: skip

    def go(self, place: Place) -> None:
        """Show `place` now; on a refusal, say why and stay where the view was."""
        try:
            view = self.view_at(place)
        except AttnvizError as exc:
            self.tell(str(exc))
            return
        self.draw(place, view)

    def draw(self, place: Place, view: AttentionView) -> None:
        """Put `view` on the screen at `place` (its query kept within the view's rows)."""
        rows = view.matrix.shape[0]
        place = replace(place, query=min(place.query, rows - 1))
        if self.shown is None or view.columns != self.shown.columns:
            self.key = None
        self.place, self.shown = place, view
        self.query_one("#title", Static).update(Text(visible(view.title)))  # a model's name
        self.query_one("#heatmap", HeatmapPane).draw(view, place.query)
        self.query_one("#row", RowPane).draw(view.row(place.query), self.lang)
        self.call_after_refresh(self.follow)

    def follow(self) -> None:
        """Scroll the heatmap so the query's row is in sight."""
        line = self.query_one("#heatmap", HeatmapPane).row_line(self.place.query)
        scroll = self.query_one("#map", VerticalScroll)
        if line is None:
            return
        height = scroll.size.height
        if not scroll.scroll_y <= line < scroll.scroll_y + height:
            scroll.scroll_to(y=max(0, line - height // 2), animate=False)

    def tell(self, message: str) -> None:
        """One line under the view (cut to the screen's width by the widget)."""
        line = message.splitlines()[0] if message else ""
        # text, never markup ([CLS]); escaped: it may quote the text, a word, a file's name
        self.query_one("#status", Static).update(Text(visible(line)))

    # ------------------------------------------------------------ in the background

    def later(self, what: str, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """Run `work` in a worker thread, saying so; then `done(result)` on the app."""
        if self.busy is not None and self.busy.state == WorkerState.RUNNING:
            self.busy.cancel()
        self.tell(say(self.lang, "computing", what=what))

        def job() -> None:
            try:
                result = work()
            except (AttnvizError, OSError) as exc:  # a refusal, a folder not writable
                self.call_from_thread(self.tell, str(exc))
                return
            if not get_current_worker().is_cancelled:
                self.call_from_thread(self.tell, "")
                self.call_from_thread(done, result)

        self.busy = self.run_worker(job, thread=True, exclusive=True, group="work")

    # ------------------------------------------------------------ the keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a screen over the view gets the keys, but Ctrl-C
        return len(self.screen_stack) == 1 or action in _MODAL_OK

    def action_head(self, step: int) -> None:
        if not self.place.has_heads:
            self.tell(say(self.lang, "no_heads", what=self._what()))
            return
        self.go(move_head(self.place, step, self.analysis.model.heads))

    def action_mean(self) -> None:
        if not self.place.has_heads:
            self.tell(say(self.lang, "no_heads", what=self._what()))
            return
        self.go(replace(self.place, head=None))

    def action_layer(self, step: int) -> None:
        self.go(move_layer(self.place, step, len(self.layer_numbers)))

    def action_query(self, step: int) -> None:
        rows = 1 if self.shown is None else self.shown.matrix.shape[0]
        self.go(move_query(self.place, step, rows))

    def action_measure(self) -> None:
        model = self.analysis.model
        if not model.has_model or self.analysis.rectangle:
            self.tell(say(self.lang, "no_model", what="--measure"))
            return
        measure = next_measure(self.place.measure)
        self._later_place(replace(self.place, measure=measure), measure)

    def action_exclude(self) -> None:
        chosen = ("special", "first") if self.analysis.model.decoder else ("special",)
        self.go(replace(self.place, exclude=() if self.place.exclude else chosen))

    def action_units(self) -> None:
        units = "tokens" if self.place.units == "words" else "words"
        self.go(replace(self.place, units=units, query=0))

    def action_rollout(self) -> None:
        place = replace(self.place, rollout=not self.place.rollout)
        self._later_place(place, say(self.lang, "rollout"))

    def action_explain(self) -> None:
        if not self.analysis.model.has_model or self.shown is None:
            self.tell(say(self.lang, "no_model", what="explain"))
            return
        place, view = self.place, self.shown
        layer = self.layer_numbers[place.layer]
        head = place.head if place.head is not None and place.has_heads else 0
        if place.units == "tokens" and not place.exclude:
            named: dict[str, Any] = {"index": place.query}
        else:
            named = {"token": word_name(view.tokens, place.query)}

        def work() -> Any:
            return self.analysis.explain(layer=layer, head=head, lang=self.lang, **named)

        def done(found: Any) -> None:
            self.push_screen(PanelScreen(found, "e"))

        self.later("explain", work, done)

    def action_find(self) -> None:
        view, place = self.shown, self.place
        if view is None:
            return
        key = self.key
        if key is None:  # the query's strongest key other than itself
            row = view.row(place.query)
            others = [j for j in row.indices if j != place.query or view.key_labels is not None]
            key = others[0] if others else row.indices[0]
        source = word_name(view.tokens, place.query)
        target = word_name(view.column_tokens, key)
        exclude = list(place.exclude) or None
        try:
            found = self.analysis.find(source, target, units=place.units, exclude=exclude,
                                       lang=self.lang)  # fmt: skip
        except AttnvizError as exc:
            self.tell(str(exc))
            return
        self.tell(say(self.lang, "find_to", query=source, key=target))
        self.push_screen(PanelScreen(found, "f"))

    def action_save(self) -> None:
        view = self.shown
        if view is None:
            return
        path = self._png_path()
        self.later(path.name, lambda: view.save(path),
                   lambda saved: self.tell(say(self.lang, "saved", path=saved)))  # fmt: skip

    def action_retext(self) -> None:
        retext = self.retext
        if retext is None:
            self.tell(say(self.lang, "no_model", what="/"))
            return

        def read(text: str | None) -> None:
            if text:
                self.later(text[:40], lambda: retext(text), self._new_analysis)

        self.push_screen(TextScreen(self.lang), read)

    def action_cancel(self) -> None:
        if self.busy is not None and self.busy.state == WorkerState.RUNNING:
            self.busy.cancel()
            self.tell(say(self.lang, "cancelled"))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.lang))

    async def action_quit(self) -> None:
        self.exit()

    # ------------------------------------------------------------ clicks and helpers

    def on_heatmap_pane_picked(self, message: HeatmapPane.Picked) -> None:
        self.go(replace(self.place, query=message.query))
        view = self.shown
        if message.key is not None and view is not None:
            self.key = message.key
            self.tell(say(self.lang, "cell", query=view.labels[message.query],
                          key=view.columns[message.key],
                          value=f"{view.matrix[message.query, message.key]:.4f}"))  # fmt: skip

    def on_row_pane_picked(self, message: RowPane.Picked) -> None:
        view = self.shown
        if view is not None:
            self.key = message.key
            self.tell(say(self.lang, "cell", query=view.labels[self.place.query],
                          key=view.columns[message.key],
                          value=f"{view.matrix[self.place.query, message.key]:.4f}"))  # fmt: skip

    def _later_place(self, place: Place, what: str) -> None:
        """Go to `place`, whose view may take long to compute (a measure, a rollout)."""

        def shown(view: AttentionView) -> None:
            self.draw(place, view)
            self.tell("")

        self.later(what, lambda: self.view_at(place), shown)

    def _new_analysis(self, analysis: Explorable) -> None:
        self.analysis, self.shown = analysis, None
        self.go(Place(units=self.place.units, exclude=self.place.exclude))
        self.tell("")

    def _what(self) -> str:
        return say(self.lang, "rollout") if self.place.rollout else self.place.measure

    def _png_path(self) -> Path:
        """A new file in `out`: attnviz-L0-H3.png (-mean, -rollout), numbered if taken."""
        place = self.place
        head = "mean" if place.head is None or place.per_layer else f"H{place.head}"
        what = "rollout" if place.rollout else head
        stem = f"attnviz-L{self.layer_numbers[place.layer]}-{what}"
        path, n = self.out / f"{stem}.png", 1
        while path.exists():
            n += 1
            path = self.out / f"{stem}-{n}.png"
        return path


class PortugueseApp(ExploreApp):
    """The explorer with its footer in Portuguese (Textual's bindings are the class's)."""

    BINDINGS = bindings("pt")


def explore(
    analysis: Explorable,
    *,
    lang: str = "en",
    place: Place | None = None,
    retext: Retext | None = None,
    out: Path | None = None,
) -> None:
    """Run the explorer full-screen until `q`; the terminal is given back as it was. Without
    a terminal (a pipe, a notebook's kernel), one line says it needs one."""
    need_a_terminal()
    kind = PortugueseApp if lang == "pt" else ExploreApp
    kind(analysis, lang=lang, place=place, retext=retext, out=out).run()

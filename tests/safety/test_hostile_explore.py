"""`attnviz explore` shows a stranger's strings (issue 34): a model's name, the words of the
text, a refusal quoting them, and the text typed or pasted after `/`. What a terminal would
act on (an escape, a bidirectional override) never reaches the screen raw, a paste keeps its
lines as one line, and a paste past EXPLORE_TEXT_CHARS is refused as it comes, in the line
above, before the app holds it. Driven by Textual's pilot, as tests/explore/ drive it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np
import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input, Static

import attnviz
from attnviz.analysis import Analysis
from attnviz.errors import BadInput
from attnviz.explore.app import ExploreApp
from attnviz.explore.widgets import typed
from attnviz.limits import EXPLORE_TEXT_CHARS

RAW = ("\x1b", "\x07", "\x9b", "\u202e")  # ESC, BEL, CSI, RIGHT-TO-LEFT OVERRIDE
TOKENS = ["[CLS]", "the", "\x1b]0;pwned\x07cat", "sat\u202e", "\x9b31m", "[SEP]"]


def hostile(model: str = "to\x1b[2Jy") -> Analysis:
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(2, 2, len(TOKENS), len(TOKENS)))
    weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)  # rows sum to 1
    return attnviz.from_attentions(weights.astype(np.float32), TOKENS, model=model)


def drive(app: ExploreApp, steps: Callable[[ExploreApp, Pilot[None]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await steps(app, pilot)

    asyncio.run(main())


def raw_on(app: ExploreApp) -> list[str]:
    """The characters of RAW on the screen as drawn (Textual's own screenshot of it)."""
    screen = app.export_screenshot()
    return [hex(ord(c)) for c in RAW if c in screen]


@pytest.mark.parametrize(
    "text,line",
    [("a b", "a b"), (" ", " "), ("John\n\tsaw  Mary\r\n", "John saw Mary"),
     ("\x1b]0;x\x07John\u202e", "]0;xJohn"), ("olá 👩‍💻", "olá 👩‍💻")],
    ids=["plain", "a space typed", "lines", "escapes", "emoji"],
)  # fmt: skip
def test_what_is_typed_becomes_one_line_without_what_a_terminal_acts_on(
    text: str, line: str
) -> None:
    assert typed(text) == line


@pytest.mark.slow
def test_the_title_status_and_panels_show_hostile_strings_escaped() -> None:
    seen: dict[str, list[str]] = {}

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        seen["open"] = raw_on(app)
        assert "\\x1b[2J" in str(app.query_one("#title", Static).render())
        await pilot.press("tab", "tab")
        await pilot.click("#row", offset=(2, 2))  # the status line names the query and key
        await pilot.pause()
        seen["a key clicked"] = raw_on(app)
        await pilot.press("f")  # find's status names both words
        await pilot.pause()
        seen["find"] = raw_on(app)

    drive(ExploreApp(hostile()), steps)
    assert seen == {"open": [], "a key clicked": [], "find": []}


@pytest.mark.slow
def test_a_pasted_text_is_one_line_and_a_refusal_quoting_it_is_escaped() -> None:
    asked: list[str] = []

    def retext(text: str) -> Analysis:
        asked.append(text)
        raise BadInput(f"cannot read {text!s}")

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        line = app.screen.query_one(Input)
        line.post_message(events.Paste("John \x1b]0;pwned\x07saw\u202e\nMary\tthere"))
        await pilot.pause()
        assert raw_on(app) == []
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert str(app.query_one("#status", Static).render()) == (
            "cannot read John ]0;pwnedsaw Mary there"
        )

    drive(ExploreApp(hostile("toy"), retext=retext), steps)
    assert asked == ["John ]0;pwnedsaw Mary there"]


@pytest.mark.slow
def test_a_paste_past_the_bound_is_refused_in_the_line_above_before_it_is_held() -> None:
    asked: list[str] = []

    async def steps(app: ExploreApp, pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        line = app.screen.query_one(Input)
        line.post_message(events.Paste("word " * 2_000_000))  # 10 MB
        await pilot.pause()
        assert line.value == ""
        prompt = str(app.screen.query_one("#prompt", Static).render())
        assert prompt.startswith(f"At most {EXPLORE_TEXT_CHARS:,} characters here")
        line.post_message(events.Paste("a" * EXPLORE_TEXT_CHARS))  # at the bound: held
        await pilot.pause()
        assert len(line.value) == EXPLORE_TEXT_CHARS

    drive(ExploreApp(hostile("toy"), retext=lambda text: asked.append(text)), steps)  # type: ignore[arg-type, func-returns-value]
    assert asked == []

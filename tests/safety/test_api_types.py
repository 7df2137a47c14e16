"""Every public call answers a wrong-typed argument with `attnviz.BadInput`, never a crash.

For each parameter of each public function and verb (attnviz.__all__: the functions,
`Analysis` and its views, `Prepared`, `HeadLinks`, `HeadStats`, `QueryRow`), hypothesis
draws values of the wrong type (None, numbers, NaN, lists, dicts, bytes, objects, huge
strings) and passes each in turn, the other arguments left valid. The call must give a
result or raise `attnviz.BadInput`: an AttributeError, TypeError, ValueError, KeyError or
IndexError from deep inside is a bug (`a.explain(5)` once raised AttributeError).

`make test` runs a short derandomised profile; `make fuzz` the long one (ATTNVIZ_FUZZ=long).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnviz

LONG = os.environ.get("ATTNVIZ_FUZZ") == "long"
EXAMPLES = int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", "60" if LONG else "8"))
TYPES = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    database=None,
    suppress_health_check=list(HealthCheck),
)
TEXT = "João pensou: o trem estava cheio, mas ele conseguiu uma cadeira."


class Opaque:
    """An object no parameter expects."""

    def __repr__(self) -> str:
        return "<Opaque>"


# Wrong types for any parameter (some are right for a few: an int is a layer; then the
# call must still give a result or BadInput).
WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(math.nan),
    st.lists(st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3)), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.binary(max_size=8),
    st.builds(Opaque),
    st.just(object()),
    st.text(max_size=6),
    st.integers(10_000, 200_000).map(lambda n: "x" * n),  # a huge string
    st.just(["x" * 100_000]),
)


@pytest.fixture(scope="module")
def analysis() -> attnviz.Analysis:
    return attnviz.analyse(TEXT)


@pytest.fixture(scope="module")
def prepared() -> attnviz.Prepared:
    return attnviz.prepare(TEXT)


@pytest.fixture(scope="module")
def stats() -> attnviz.HeadStats:
    return attnviz.head_stats([TEXT])


def expect_result_or_bad_input(call: Callable[[], Any]) -> None:
    with contextlib.suppress(attnviz.BadInput):
        call()


# (name, a call taking (analysis, prepared, stats, folder, value), the parameter it varies)
Call = Callable[[Any, Any, Any, Path, Any], Any]
CALLS: list[tuple[str, Call]] = [
    # functions (cheap: they refuse before loading a model, or read the cached default)
    ("prepare text", lambda a, p, s, d, v: attnviz.prepare(v)),
    ("prepare pair", lambda a, p, s, d, v: attnviz.prepare(TEXT, pair=v)),
    ("prepare model", lambda a, p, s, d, v: attnviz.prepare(TEXT, model=v)),
    ("prepare max_tokens", lambda a, p, s, d, v: attnviz.prepare(TEXT, max_tokens=v)),
    ("prepare truncate", lambda a, p, s, d, v: attnviz.prepare(TEXT, truncate=v)),
    ("prepare cache", lambda a, p, s, d, v: attnviz.prepare(TEXT, cache=v)),
    ("analyse text", lambda a, p, s, d, v: attnviz.analyse(v)),
    ("analyse mask", lambda a, p, s, d, v: attnviz.analyse(TEXT, mask=v)),
    ("analyse dtype", lambda a, p, s, d, v: attnviz.analyse(TEXT, dtype=v)),
    ("analyse layers", lambda a, p, s, d, v: attnviz.analyse(TEXT, layers=v)),
    ("analyse max_tokens", lambda a, p, s, d, v: attnviz.analyse(TEXT, max_tokens=v)),
    ("analyse truncate", lambda a, p, s, d, v: attnviz.analyse(TEXT, truncate=v)),
    ("analyse cache", lambda a, p, s, d, v: attnviz.analyse(TEXT, cache=v)),
    ("analyse pair", lambda a, p, s, d, v: attnviz.analyse(TEXT, pair=v)),
    ("model_info model", lambda a, p, s, d, v: attnviz.model_info(v)),
    ("head_stats texts", lambda a, p, s, d, v: attnviz.head_stats(v)),
    ("head_stats batch_size", lambda a, p, s, d, v: attnviz.head_stats([TEXT], batch_size=v)),
    ("head_stats device", lambda a, p, s, d, v: attnviz.head_stats([TEXT], device=v)),
    ("head_stats threads", lambda a, p, s, d, v: attnviz.head_stats([TEXT], threads=v)),
    ("head_stats dtype", lambda a, p, s, d, v: attnviz.head_stats([TEXT], dtype=v)),
    ("head_stats model", lambda a, p, s, d, v: attnviz.head_stats([TEXT], model=v)),
    ("head_stats max_tokens", lambda a, p, s, d, v: attnviz.head_stats([TEXT], max_tokens=v)),
    ("head_stats progress", lambda a, p, s, d, v: attnviz.head_stats([TEXT], progress=v)),
    ("head_stats truncate", lambda a, p, s, d, v: attnviz.head_stats([TEXT], truncate=v)),
    ("partial_head_stats shard", lambda a, p, s, d, v: attnviz.partial_head_stats([TEXT], shard=v)),
    ("merge_partials given", lambda a, p, s, d, v: attnviz.merge_partials(v)),
    # Prepared
    ("Prepared.check layer", lambda a, p, s, d, v: p.check(layer=v)),
    ("Prepared.check head", lambda a, p, s, d, v: p.check(head=v)),
    ("Prepared.check heads", lambda a, p, s, d, v: p.check(heads=v)),
    ("Prepared.check measure", lambda a, p, s, d, v: p.check(measure=v)),
    ("Prepared.check view", lambda a, p, s, d, v: p.check(view=v)),
    ("Prepared.check words", lambda a, p, s, d, v: p.check(words=v)),
    ("Prepared.check units", lambda a, p, s, d, v: p.check(words={"query": "trem"}, units=v)),
    ("Prepared.check mask", lambda a, p, s, d, v: p.check(mask=v)),
    ("Prepared.check out", lambda a, p, s, d, v: p.check(out=v)),
    ("Prepared.analyse mask", lambda a, p, s, d, v: p.analyse(mask=v)),
    ("Prepared.analyse dtype", lambda a, p, s, d, v: p.analyse(dtype=v)),
    ("Prepared.analyse layers", lambda a, p, s, d, v: p.analyse(layers=v)),
    ("Prepared.analyse cache", lambda a, p, s, d, v: p.analyse(cache=v)),
    ("Prepared.explain token", lambda a, p, s, d, v: p.explain(token=v)),
    ("Prepared.explain index", lambda a, p, s, d, v: p.explain(index=v)),
    # Analysis verbs
    ("view layer", lambda a, p, s, d, v: a.view(v)),
    ("view head", lambda a, p, s, d, v: a.view(head=v)),
    ("view units", lambda a, p, s, d, v: a.view(units=v)),
    ("view exclude", lambda a, p, s, d, v: a.view(exclude=v)),
    ("view measure", lambda a, p, s, d, v: a.view(measure=v)),
    ("row query", lambda a, p, s, d, v: a.row(v)),
    ("row layer", lambda a, p, s, d, v: a.row("trem", v)),
    ("row head", lambda a, p, s, d, v: a.row("trem", head=v)),
    ("heads layer", lambda a, p, s, d, v: a.heads(v)),
    ("heads heads", lambda a, p, s, d, v: a.heads(heads=v)),
    ("heads units", lambda a, p, s, d, v: a.heads(units=v)),
    ("heads exclude", lambda a, p, s, d, v: a.heads(exclude=v)),
    ("model_view heads", lambda a, p, s, d, v: a.model_view(v)),
    ("model_view measure", lambda a, p, s, d, v: a.model_view(measure=v)),
    ("rollout upto", lambda a, p, s, d, v: a.rollout(v)),
    ("rollout units", lambda a, p, s, d, v: a.rollout(units=v)),
    ("rollout top", lambda a, p, s, d, v: a.rollout(top=v)),
    ("rollout exclude", lambda a, p, s, d, v: a.rollout(exclude=v)),
    ("rollout measure", lambda a, p, s, d, v: a.rollout(measure=v)),
    ("rollout method", lambda a, p, s, d, v: a.rollout(method=v)),
    ("rollout progress", lambda a, p, s, d, v: a.rollout(method="flow", progress=v)),
    ("find source", lambda a, p, s, d, v: a.find(v, "trem")),
    ("find target", lambda a, p, s, d, v: a.find("ele", v)),
    ("find both", lambda a, p, s, d, v: a.find(v, v)),
    ("find units", lambda a, p, s, d, v: a.find("ele", "trem", units=v)),
    ("find exclude", lambda a, p, s, d, v: a.find("ele", "trem", exclude=v)),
    ("find top", lambda a, p, s, d, v: a.find("ele", "trem", top=v)),
    ("measure name", lambda a, p, s, d, v: a.measure(v)),
    ("compare query", lambda a, p, s, d, v: a.compare(v, measures=["weight"])),
    ("compare layer", lambda a, p, s, d, v: a.compare("ele", v, measures=["weight"])),
    ("compare measures", lambda a, p, s, d, v: a.compare("ele", measures=v)),
    ("compare units", lambda a, p, s, d, v: a.compare("ele", measures=["weight"], units=v)),
    ("compare top", lambda a, p, s, d, v: a.compare("ele", measures=["weight"], top=v)),
    ("explain token", lambda a, p, s, d, v: a.explain(v)),
    ("explain index", lambda a, p, s, d, v: a.explain(index=v)),
    ("explain layer", lambda a, p, s, d, v: a.explain("ele", layer=v)),
    ("explain head", lambda a, p, s, d, v: a.explain("ele", head=v)),
    ("explain lang", lambda a, p, s, d, v: a.explain("ele", lang=v)),
    ("figure view", lambda a, p, s, d, v: a.figure(v)),
    ("figure cmap", lambda a, p, s, d, v: a.figure(cmap=v)),
    ("figure theme", lambda a, p, s, d, v: a.figure(theme=v)),
    ("figure heads", lambda a, p, s, d, v: a.figure("heads", heads=v)),
    ("save path", lambda a, p, s, d, v: a.save(v)),
    ("save view", lambda a, p, s, d, v: a.save(d / "a.png", v, dpi=20)),
    ("save dpi", lambda a, p, s, d, v: a.save(d / "a.png", dpi=v)),
    ("save cmap", lambda a, p, s, d, v: a.save(d / "a.png", dpi=20, cmap=v)),
    ("save theme", lambda a, p, s, d, v: a.save(d / "a.png", dpi=20, theme=v)),
    ("save measure", lambda a, p, s, d, v: a.save(d / "a.npz", measure=v)),
    ("html view", lambda a, p, s, d, v: a.html(v)),
    ("html layer", lambda a, p, s, d, v: a.html(layer=v)),
    ("html heads", lambda a, p, s, d, v: a.html(heads=v)),
    ("html units", lambda a, p, s, d, v: a.html(units=v)),
    ("html theme", lambda a, p, s, d, v: a.html(theme=v)),
    # the views and results
    ("AttentionView.row", lambda a, p, s, d, v: a.view().row(v)),
    ("AttentionView.weight query", lambda a, p, s, d, v: a.view().weight(v, 0)),
    ("AttentionView.weight key", lambda a, p, s, d, v: a.view().weight(0, v)),
    ("AttentionView.figure cmap", lambda a, p, s, d, v: a.view().figure(cmap=v)),
    ("AttentionView.figure theme", lambda a, p, s, d, v: a.view().figure(theme=v)),
    ("AttentionView.save path", lambda a, p, s, d, v: a.view().save(v)),
    ("AttentionView.save dpi", lambda a, p, s, d, v: a.view().save(d / "v.png", dpi=v)),
    ("AttentionView.save cmap", lambda a, p, s, d, v: a.view().save(d / "v.png", cmap=v)),
    ("AttentionView.save theme", lambda a, p, s, d, v: a.view().save(d / "v.png", theme=v)),
    ("HeadsView.figure theme", lambda a, p, s, d, v: a.heads(heads=[0]).figure(theme=v)),
    ("HeadsView.save path", lambda a, p, s, d, v: a.heads(heads=[0]).save(v)),
    ("RolloutView.sources", lambda a, p, s, d, v: a.rollout().sources(v)),
    ("QueryRow.weight", lambda a, p, s, d, v: a.row("ele").weight(v)),
    ("HeadLinks.best", lambda a, p, s, d, v: a.find("ele", "trem").best(v)),
    ("HeadLinks.to_dict", lambda a, p, s, d, v: a.find("ele", "trem").to_dict(v)),
    ("HeadStats.sorted by", lambda a, p, s, d, v: s.sorted(v)),
    ("HeadStats.sorted top", lambda a, p, s, d, v: s.sorted(top=v)),
    ("HeadStats.record layer", lambda a, p, s, d, v: s.record(v, 0)),
    ("HeadStats.record head", lambda a, p, s, d, v: s.record(0, v)),
    ("HeadStats.save path", lambda a, p, s, d, v: s.save(v)),
    ("HeadStats.save dpi", lambda a, p, s, d, v: s.save(d / "s.png", dpi=v)),
    ("HeadStats.figure cmap", lambda a, p, s, d, v: s.figure(cmap=v)),
    ("HeadStats.figure theme", lambda a, p, s, d, v: s.figure(theme=v)),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_a_wrong_type_is_bad_input(
    name: str,
    call: Call,
    analysis: attnviz.Analysis,
    prepared: attnviz.Prepared,
    stats: attnviz.HeadStats,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    folder = tmp_path_factory.mktemp("out")

    @TYPES
    @given(value=WRONG)
    def check(value: Any) -> None:
        expect_result_or_bad_input(lambda: call(analysis, prepared, stats, folder, value))

    check()


def test_the_reported_cases_are_bad_input(analysis: attnviz.Analysis) -> None:
    """`a.explain(5)` and `a.find(None, None)` raised AttributeError."""
    with pytest.raises(attnviz.BadInput, match="token"):
        analysis.explain(5)  # type: ignore[arg-type]
    with pytest.raises(attnviz.BadInput, match="source"):
        analysis.find(None, None)  # type: ignore[arg-type]
    with pytest.raises(attnviz.BadInput, match="query"):
        analysis.compare(3.5, measures=["weight"])  # type: ignore[arg-type]


def test_every_public_verb_is_exercised() -> None:
    """A verb added to the public classes is added to CALLS too."""
    names = {name.split()[0] for name, _ in CALLS}
    verbs = {"view", "row", "heads", "model_view", "rollout", "find", "measure", "compare"}
    verbs |= {"explain", "figure", "save", "html", "prepare", "analyse", "model_info"}
    verbs |= {"head_stats"}
    assert verbs <= names

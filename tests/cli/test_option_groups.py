"""Options declared once: a group of options is one parameter (`options.grouped`), a command's
request is read from its options by name (`input.read_request`), and each command calls the
`run` of a module it imports by name."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from dataclasses import fields
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.cli.app import cache_app
from attnviz.cli.input import Request
from attnviz.cli.options import (
    IMAGES,
    READING,
    BoundOptions,
    ImageOptions,
    ReadingOptions,
    grouped,
)
from attnviz.cli.running import catalogue

runner = CliRunner()


def test_a_group_is_its_options_in_place_and_one_value_in_the_command() -> None:
    seen: list[tuple[Any, ...]] = []
    toy = typer.Typer()

    @toy.command()
    @grouped
    def draw(first: int = 1, images: ImageOptions = IMAGES, last: str = "z") -> None:
        seen.append((first, images, last))

    names = list(inspect.signature(draw).parameters)
    assert names == ["first", *(f.name for f in fields(ImageOptions)), "last"]
    result = runner.invoke(toy, ["--first", "2", "--dpi", "300", "--transparent", "--last", "a"])
    assert result.exit_code == 0, result.output
    assert seen == [(2, ImageOptions(dpi=300, transparent=True), "a")]


def test_the_reading_group_is_every_request_option_between_pair_and_dtype() -> None:
    def read(reading: ReadingOptions = READING) -> None: ...

    spelled = list(inspect.signature(grouped(read)).parameters)
    assert spelled == ["pair", "stack", "target", "generate", "mask", "truncate", "max_tokens",
                       "no_bos", "engine", "no_cache", "dtype"]  # fmt: skip
    covered = set(spelled) - {"no_cache", "no_bos"}
    assert covered | {"cache", "bos"} <= {f.name for f in fields(Request)}


def test_a_group_inside_a_group_is_one_value_again() -> None:
    seen: list[ReadingOptions] = []
    toy = typer.Typer()

    @toy.command()
    @grouped
    def read(reading: ReadingOptions = READING) -> None:
        seen.append(reading)

    result = runner.invoke(toy, ["--truncate", "--max-tokens", "9", "--pair", "B."])
    assert result.exit_code == 0, result.output
    assert seen == [ReadingOptions(pair="B.", bounds=BoundOptions(truncate=True, max_tokens=9))]


@pytest.mark.parametrize(
    ("command", "module", "lang"), [("tokens", "tokens", "pt"), ("generate", "generate", "en")]
)
def test_lang_follows_the_locale_only_on_a_command_that_has_it(
    command: str, module: str, lang: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """generate has no --lang: its request keeps the default, as before options were read by
    name; tokens has one, and without it the locale decides."""
    seen: list[Request] = []
    monkeypatch.setattr(
        f"attnviz.cli.{module}.run", lambda _console, request, **_: seen.append(request)
    )
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "pt_BR.UTF-8")
    result = runner.invoke(app, [command, "Uma frase."])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert [r.lang for r in seen] == [lang]


@pytest.mark.parametrize(
    "callback",
    [info.callback for group in (catalogue, cache_app) for info in group.registered_commands],
    ids=lambda callback: callback.__name__,
)
def test_every_command_calls_a_function_it_imports_by_name(callback: Any) -> None:
    """No module handed over by a context manager: each body is an import a reader can follow."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(callback)))
    imports = [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("attnviz.cli.")
        for alias in node.names
    ]
    assert len(imports) >= 1, callback.__name__
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    for module, name in imports:
        assert callable(getattr(importlib.import_module(module), name)), (module, name)
    assert {name for _, name in imports} & called, callback.__name__
    withs = [n for n in ast.walk(tree) if isinstance(n, ast.With)]
    assert all(item.optional_vars is None for w in withs for item in w.items), callback.__name__

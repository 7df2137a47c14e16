"""The commands' options reach the API under their own names: a parameter renamed in one
place and not the other fails here, loudly, instead of silently taking its default.

Each command builds its `Request` and its `Output` from its options by name
(`input.read_request`, `input.read_output`); these tests
read the commands' signatures and bodies, and run every command with every shared option set,
with the function each calls (`attnviz.cli.show.run`, ...) replaced by a spy.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.cli.app import cache_app
from attnviz.cli.errors import FLAGS, flag
from attnviz.cli.input import IMAGE_OPTIONS, OUTPUT_OPTIONS, REQUEST_OPTIONS, Output, Request
from attnviz.cli.options import GROUPS
from attnviz.cli.running import catalogue

runner = CliRunner()

# A command's words on the command line ("show", "cache info") -> its function.
COMMANDS: dict[str, Callable[..., Any]] = {
    f"{group}{info.name or info.callback.__name__}": info.callback  # type: ignore[union-attr]
    for group, typer_app in (("", catalogue), ("cache ", cache_app))
    for info in typer_app.registered_commands
}


def _click(name: str) -> Any:
    """The command `name` as click sees it (typer may carry its own copy of click)."""
    command = typer.main.get_command(app)
    for word in name.split():
        command = command.commands[word]  # type: ignore[attr-defined]
    return command


def _options(name: str) -> set[str]:
    """Every flag (and argument name) the command `name` declares."""
    return {
        spelling
        for param in _click(name).params
        for spelling in (
            param.opts if param.param_type_name == "option" else [param.human_readable_name]
        )
    }


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_parameter_a_command_declares_is_read_in_its_body(name: str) -> None:
    """A parameter declared and never read is an option that does nothing (or one renamed in
    the signature while the body passes on another name's default)."""
    function = COMMANDS[name]
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef)
    declared = [a.arg for a in definition.args.args + definition.args.kwonlyargs]
    read = {
        node.id
        for statement in definition.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    read.add("debug")  # `app.command` runs every body under its --debug
    by_name = {"debug"}  # the options read by name from the context
    if "read_request" in read:
        by_name |= set(REQUEST_OPTIONS)
    if "read_output" in read:
        by_name |= set(OUTPUT_OPTIONS)
    hints = typing.get_type_hints(inspect.unwrap(function), include_extras=True)
    read |= by_name | {
        p for p in declared if hints[p] in GROUPS and _options_of(hints[p]) <= by_name
    }
    assert [p for p in declared if p not in read] == [], name


def _options_of(group: type) -> set[str]:
    """The names of the options a group stands for, a group inside it spelled out."""
    hints = typing.get_type_hints(group, include_extras=True)
    return set().union(
        *({f.name} if hints[f.name] not in GROUPS else _options_of(hints[f.name])
          for f in fields(group))
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_image_options_read_by_name_are_declared(name: str) -> None:
    """`input.check_image_options` asks click where `dpi`, `cmap`, ... came from by name."""
    parameters = inspect.signature(COMMANDS[name]).parameters  # the options typer reads
    source = inspect.getsource(COMMANDS[name])
    if "image_style(" in source:
        assert set(IMAGE_OPTIONS) <= set(parameters), name


# An option every text command may take -> its arguments, the Request field it sets, the value.
SHARED = {
    "--model": (["--model", "some/model"], "model", "some/model"),
    "--pair": (["--pair", "And B."], "pair", "And B."),
    "--truncate": (["--truncate"], "truncate", True),
    "--max-tokens": (["--max-tokens", "7"], "max_tokens", 7),
    "--quiet": (["--quiet"], "quiet", True),
    "--mask": (["--mask", "causal"], "mask", "causal"),
    "--no-cache": (["--no-cache"], "cache", False),
    "--dtype": (["--dtype", "bfloat16"], "dtype", "bfloat16"),
    "--measure": (["--measure", "alti"], "measure", "alti"),
    "--no-bos": (["--no-bos"], "bos", False),
    "--lang": (["--lang", "pt"], "lang", "pt"),
    "--stack": (["--stack", "decoder"], "stack", "decoder"),
    "--target": (["--target", "Uma frase."], "target", "Uma frase."),
    "--generate": (["--generate", "3"], "generate", 3),
    "--engine": (["--engine", "transformers"], "engine", "transformers"),
}
# What a command needs besides its text, and the module whose `run` it calls.
REQUIRED = {
    "show": ([], "show"),
    "heads": ([], "heads"),
    "model": ([], "model_view"),
    "explain": (["--token", "A"], "explain"),
    "rollout": ([], "rollout"),
    "find": (["--from", "A", "--to", "B"], "find"),
    "compare-measures": (["--query", "A"], "compare"),
    "tokens": ([], "tokens"),
    "export": (["--out", "x.npz"], "export"),
    "generate": ([], "generate"),
    "distance": ([], "distance"),
    "explore": ([], "explore"),
}


def test_every_command_that_reads_a_text_is_checked_here() -> None:
    readers = {name for name in COMMANDS if "TextArg" in str(COMMANDS[name].__annotations__)}
    assert readers == set(REQUIRED)


def test_request_fields_are_the_shared_options_and_the_text() -> None:
    covered = {field for _, field, _ in SHARED.values()}
    # --load replaces the text (tests/api/test_load_file.py): never given with the shared
    # options above
    assert {f.name for f in fields(Request)} == covered | {"text", "from_stdin", "load"}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_shared_option_reaches_the_request(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra, module = REQUIRED[name]
    seen: list[Request] = []

    def spy(*args: Any, **kwargs: Any) -> None:
        seen.extend(a for a in args if isinstance(a, Request))

    monkeypatch.setattr(f"attnviz.cli.{module}.run", spy)
    declared = _options(name)
    argv = [name, "A sentence.", *extra]
    expected: dict[str, Any] = {f.name: f.default for f in fields(Request) if f.name != "text"}
    for option, (args, field, value) in SHARED.items():
        if option in declared:
            argv += args
            expected[field] = value
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert len(seen) == 1, name
    assert seen[0] == Request("A sentence.", **expected)


IMAGE_ARGS = ["--dpi", "300", "--cmap", "magma", "--theme", "dark", "--transparent"]


@pytest.mark.parametrize(
    "name",
    sorted({*REQUIRED, "stats"} - {"explain", "tokens", "distance", "explore"}),  # distance: --cmap
)
def test_every_image_option_reaches_the_style(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnviz.output import ImageStyle

    extra, module = REQUIRED.get(name, ([], "stats"))
    extra = [arg.replace(".npz", ".png") for arg in extra]  # export: an image
    out = [] if "--out" in extra else ["--out", "x.png"]
    annotate = [] if name == "stats" else ["--annotate"]  # the statistics figure refuses it
    seen: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> None:
        outputs = [a for a in args if isinstance(a, Output)]
        seen.extend([o.style for o in outputs] or [kwargs["style"]])  # find: its own keywords

    monkeypatch.setattr(f"attnviz.cli.{module}.run", spy)
    argv = [name, "A sentence.", *extra, *out, *IMAGE_ARGS, *annotate]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert seen == [ImageStyle(300, "magma", "dark", True, bool(annotate))]


def test_flags_name_real_options() -> None:
    """Each flag FLAGS maps a parameter to is an option (or argument) of some command."""
    every = set().union(*(_options(name) for name in COMMANDS), {"TEXT", "TEXTS"})
    assert {f for f in FLAGS.values() if f not in every} == set()


# Parameters of the public API that have no option: Python callers alone pass them.
PYTHON_ONLY = {"self", "progress", "layers", "measures", "compared", "words", "name"}


def test_every_api_parameter_is_spelled_as_an_option_of_the_command_line() -> None:
    """An error about an API parameter names it; the command line prints `flag(param)`, which
    must be a flag some command has (else FLAGS lacks the parameter)."""
    import attnviz
    from attnviz import api
    from attnviz.measures.stats import HeadStats

    functions = [
        api.prepare,
        api.analyse,
        api.head_stats,
        api.check_head_stats,
        api.model_info,
        attnviz.Prepared.check,
        attnviz.Prepared.analyse,
        attnviz.Prepared.explain,
        HeadStats.sorted,
        HeadStats.save,
        *(
            getattr(attnviz.Analysis, verb)
            for verb in ("view", "row", "heads", "model_view", "rollout", "find", "compare")
        ),
        attnviz.Analysis.explain,
        attnviz.Analysis.save,
    ]
    every = set().union(*(_options(name) for name in COMMANDS))
    missing = {
        f"{function.__qualname__}({param}) -> {flag(param)}"
        for function in functions
        for param in inspect.signature(function).parameters
        if param not in PYTHON_ONLY and flag(param) not in every | {"TEXT", "TEXTS"}
    }
    assert missing == set()


def test_find_top_0_names_the_flag_on_the_command_line() -> None:
    result = runner.invoke(app, ["find", "John said he was tired.", "--from", "he", "--to",
                                 "John", "--top", "0"])  # fmt: skip
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--top" in lines[0], result.stderr


def test_find_top_0_names_the_parameter_in_python() -> None:
    import attnviz

    with pytest.raises(attnviz.BadInput) as raised:
        attnviz.analyse("John said he was tired.").find("he", "John", top=0)
    assert "top" in str(raised.value) and "--top" not in str(raised.value)


def test_check_words_in_python_words_and_flags_on_the_command_line() -> None:
    import attnviz
    from attnviz.cli.errors import message

    prepared = attnviz.prepare("John said he was tired.")
    with pytest.raises(attnviz.BadInput) as raised:
        prepared.check(words={"source": "she", "target": "John"})
    assert str(raised.value).startswith("source 'she' is not a word of the text")
    assert message(raised.value).startswith("--from 'she' is not a word of the text")
    with pytest.raises(attnviz.BadInput) as raised:
        prepared.check(layer=0, head=99)
    assert str(raised.value).startswith("head 99 is out of range")
    with pytest.raises(attnviz.BadInput) as raised:
        prepared.check(measure="alti", out="page.html")
    assert str(raised.value) == ".html pages show the attention weights: drop measure, or " \
        "write an image"  # fmt: skip
    assert message(raised.value).endswith("drop --measure, or write an image")

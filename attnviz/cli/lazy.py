"""A command group that builds only the command it runs.

Typer turns every command's signature into click options when the app starts:
about 17 ms for attnviz's commands (2 for one), of which a run uses one. Here the commands are
declared with typer's own decorators on a catalogue (an ordinary `typer.Typer`, never
run itself), and the app's group builds a command from it, with typer's own functions,
the first time it is asked for by name. The group's help lists every command from its
name and docstring alone, without building any.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import (
    get_command_from_info,
    get_command_name,
    get_group_from_info,
    solve_typer_info_defaults,
)
from typer.models import CommandInfo, TyperInfo

from attnviz.cli.errors import OneLineUsageErrors


class Commands(MutableMapping[str, Any]):
    """The group's commands by name, each built from the catalogue when first looked up.

    With `listing` on, a command not built yet is a stand-in with its name and help only,
    which is all the group's help prints.
    """

    def __init__(self, catalogue: typer.Typer, *, markup: Any, suggest: bool) -> None:
        self._built: dict[str, Any] = {}
        self._build: dict[str, Callable[[], Any]] = {}
        self._summary: dict[str, Callable[[], Any]] = {}
        self.listing = False
        short = catalogue.pretty_exceptions_short
        for info in catalogue.registered_commands:
            name = info.name or get_command_name(info.callback.__name__)  # type: ignore[union-attr]
            self._build[name] = _command(info, short, markup)
            self._summary[name] = _command_summary(info, name)
        for group in catalogue.registered_groups:
            solved = solve_typer_info_defaults(group)
            assert solved.name, "a group of commands needs a name"
            self._build[solved.name] = _group(group, short, markup, suggest)
            self._summary[solved.name] = _group_summary(solved)

    def __getitem__(self, name: str) -> Any:
        if name in self._built:
            return self._built[name]
        if self.listing:
            return self._summary[name]()
        command = self._built[name] = self._build[name]()
        return command

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command
        self._build.setdefault(name, lambda: command)

    def __delitem__(self, name: str) -> None:
        del self._build[name]
        self._built.pop(name, None)
        self._summary.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._build)

    def __len__(self) -> int:
        return len(self._build)


def _command(info: CommandInfo, short: bool, markup: Any) -> Callable[[], Any]:
    return lambda: get_command_from_info(
        info, pretty_exceptions_short=short, rich_markup_mode=markup
    )


def _group(info: TyperInfo, short: bool, markup: Any, suggest: bool) -> Callable[[], Any]:
    return lambda: get_group_from_info(
        info, pretty_exceptions_short=short, rich_markup_mode=markup, suggest_commands=suggest
    )


def _command_summary(info: CommandInfo, name: str) -> Callable[[], Any]:
    def summary() -> TyperCommand:
        text = info.help if info.help is not None else inspect.getdoc(info.callback)
        return TyperCommand(
            name=name,
            help=inspect.cleandoc(text or ""),
            short_help=info.short_help,
            hidden=info.hidden,
            deprecated=info.deprecated,
            rich_help_panel=info.rich_help_panel,
        )

    return summary


def _group_summary(info: TyperInfo) -> Callable[[], Any]:
    return lambda: TyperGroup(
        name=info.name,
        help=info.help,
        short_help=info.short_help,
        hidden=info.hidden,
        deprecated=info.deprecated,
        rich_help_panel=info.rich_help_panel,
    )


class LazyGroup(OneLineUsageErrors):
    """The app's group: commands come from `catalogue`, built one at a time when used.

    Subclass it with `catalogue` set (`lazy_group`); typer makes the group itself, with
    the app's callback and options, as usual.
    """

    catalogue: ClassVar[typer.Typer]

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = Commands(
            self.catalogue, markup=self.rich_markup_mode, suggest=self.suggest_commands
        )

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names, in the order declared: nothing built

    def format_help(self, ctx: Any, formatter: Any) -> None:
        commands = self.commands
        assert isinstance(commands, Commands)
        commands.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            commands.listing = False


def lazy_group(catalogue: typer.Typer) -> type[LazyGroup]:
    """The group class (typer's `cls=`) for an app whose commands are on `catalogue`."""
    return type("AttnvizGroup", (LazyGroup,), {"catalogue": catalogue})

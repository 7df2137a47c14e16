"""`attnviz --help` without rich.markdown and rich.traceback, about half of its start-up."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


def _stand_in(module: str, name: str) -> type:
    """A class that stands for `module.name` and imports `module` only when it is used."""

    def real() -> Any:
        return getattr(importlib.import_module(module), name)

    class Deferred(type):
        def __getattr__(cls, attr: str) -> Any:
            return getattr(real(), attr)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real())

    class StandIn(metaclass=Deferred):
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return real()(*args, **kwargs)

    return StandIn


def import_rich_help() -> None:
    """Import typer's rich help formatter without rich.markdown and rich.traceback.

    typer.rich_utils imports both at the top, and with them markdown-it, pygments and
    attrs: about half of `attnviz --help`. attnviz's help is rich markup, never Markdown
    (`rich_markup_mode="rich"`), and tracebacks are typer's pretty exceptions, which are
    off; so while rich_utils is imported, those two names are stand-ins that import the
    real module if they are ever used. sys.modules is left as it was.
    """
    if "typer.rich_utils" in sys.modules:
        return
    placeholders = {}
    for module, name in (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback")):
        if module not in sys.modules:
            placeholder = types.ModuleType(module)
            setattr(placeholder, name, _stand_in(module, name))
            placeholders[module] = placeholder
    sys.modules.update(placeholders)
    try:
        importlib.import_module("typer.rich_utils")
    finally:
        for module, placeholder in placeholders.items():
            if sys.modules.get(module) is placeholder:
                del sys.modules[module]

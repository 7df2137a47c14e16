"""`attnviz cache info` and `attnviz cache clear`: the attention cache's state, and emptying it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def info(console: Console) -> None:
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


def clear(console: Console) -> None:
    """Remove every cache entry."""
    from attnviz.cache import contents, settings
    from attnviz.render.cells import visible

    entries, size = contents.clear()
    folder = visible(str(settings.cache_dir()))
    noun = "entry" if entries == 1 else "entries"
    console.print(Text(f"removed {entries} {noun} ({_megabytes(size)}) from {folder}"))

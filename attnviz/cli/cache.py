"""`attnviz cache info` and `attnviz cache clear`: the attention cache's state, and emptying it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def info(console: Console) -> None:
    """The cache's folder, entries, size and limit; the dequantized GGUF weights kept, theirs."""
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
            f"weights  {_weights(state.weights)}, {_megabytes(state.weights_bytes)} of "
            f"{_megabytes(state.weights_limit_bytes)}\n"
            f"status   {visible(status)}"
        )
    )


def _weights(models: int) -> str:
    """`1 GGUF model dequantized`, the kept weights counted in words."""
    return f"{models} GGUF model{'' if models == 1 else 's'} dequantized"


def _megabytes(size: int) -> str:
    from attnviz.cache.settings import MB

    return f"{size / MB:.1f} MB" if size < 100 * MB else f"{size / MB:.0f} MB"


def clear(console: Console) -> None:
    """Remove every cache entry."""
    from attnviz.cache import contents, settings
    from attnviz.render.cells import visible

    before = contents.info()
    entries, size = contents.clear()
    folder = visible(str(settings.cache_dir()))
    weights = min(before.weights, entries)
    weights_bytes = min(before.weights_bytes, size) if weights else 0
    entries, size = entries - weights, size - weights_bytes
    noun = "entry" if entries == 1 else "entries"
    models = f"{weights} GGUF model{'' if weights == 1 else 's'}"
    also = f", and the dequantized weights of {models} ({_megabytes(weights_bytes)})"
    console.print(
        Text(
            f"removed {entries} {noun} ({_megabytes(size)}){also if weights else ''} from {folder}"
        )
    )

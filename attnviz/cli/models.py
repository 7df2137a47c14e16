"""`attnviz models`: the models at hand, found offline, and the `--model` value of each."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from attnviz.model.at_hand import (
    MODELS_ENV,
    MODELS_LISTED,
    MODELS_SCAN_ENTRIES,
    hub_cache,
    models_at_hand,
)
from attnviz.render.cells import json_visible


def run(console: Console, folder: Path | None, as_json: bool = False) -> None:
    """List the models at hand (the default, installed extras, `folder` or `$ATTNVIZ_MODELS`,
    the Hugging Face cache): a table, or `--json`."""
    from rich.table import Table
    from rich.text import Text

    found = models_at_hand(folder)
    if as_json:  # a folder's name may hold an escape or a bidirectional override: \u-escaped
        document = json.dumps(found.to_dict(), ensure_ascii=False, indent=2)
        print("\n".join(json_visible(line) for line in document.split("\n")))
        return
    table = Table(title="models at hand (offline)", title_justify="left", box=None)
    table.add_column("--model", no_wrap=True)  # whole, to be copied
    for column in ("family", "kind", "language", "size", "from"):
        table.add_column(column, overflow="fold")
    for m in found.models:
        kind = m.kind if m.engine == "attnviz" else f"{m.kind} (--engine transformers)"
        cells = (
            m.model,
            m.family,
            kind if not m.note else f"{kind}: cannot be read",
            ", ".join(m.languages) or "not stated",
            _size(m.bytes),
            m.source,
        )
        table.add_row(*(Text(_safe(c)) for c in cells))
    console.print(table)
    for line in found.missing:
        console.print(Text(f"not installed: {line}"))
    if found.searched:
        console.print(Text("searched: " + ", ".join(_safe(s) for s in found.searched)))
    else:
        hub = _safe(str(hub_cache()))
        said = f"no folder searched (no Hugging Face cache at {hub}): name a folder of models "
        console.print(Text(f"{said}as the argument or with {MODELS_ENV}=DIR"))
    if found.passed_over:
        console.print(
            f"at least {found.passed_over:,} entries or folders passed over (the scan's bounds: "
            f"{MODELS_SCAN_ENTRIES:,} entries, {MODELS_LISTED} models): name a smaller folder"
        )


def _safe(text: str, limit: int = 200) -> str:
    """A stranger's name, escaped for the terminal and cut to `limit` characters."""
    from attnviz.render.cells import visible

    text = visible(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(n: int) -> str:
    if n <= 0:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"

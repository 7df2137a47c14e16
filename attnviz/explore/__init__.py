"""`attnviz explore`: one analysis's attention in a full-screen terminal app (Textual).

The app reads an analysis through the `Explorable` protocol (`source`), never the face
itself: `Analysis.explore()` and the command hand it one. Textual is imported only by `app`,
when the app runs.
"""

from __future__ import annotations

__all__: list[str] = []

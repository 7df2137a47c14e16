"""Write output files atomically: all of the file or nothing.

Writers get a file object for a temporary file in the destination folder; it is
renamed over the destination only when the writer returns. A writer that raises
leaves no file behind. (Writing through a file object also stops `np.savez` from
appending `.npz` and `savefig` from guessing the format from the name.)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from attnviz.errors import AttnvizError

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")  # drawn by matplotlib, format from the suffix
DATA_SUFFIXES = (".npz", ".json")  # raw attention data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: Path, mode: str = "wb") -> Iterator[IO]:
    """Yield a file object; on success it becomes `path`, on failure it vanishes."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise AttnvizError(f"cannot write {path}: folder {folder} does not exist; create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise AttnvizError(
            f"cannot write {path}: {exc.strerror or exc}; choose a writable folder"
        ) from None
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise AttnvizError(
                f"cannot write {path}: {exc.strerror or exc}; choose a writable path"
            ) from None
        raise

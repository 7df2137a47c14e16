"""Where output goes: checked paths and image options, and atomic writes.

`check_output` refuses a bad path or image option (dpi, colormap) before any work is done.

Writers get a file object for a temporary file in the destination folder; it is
renamed over the destination only when the writer returns. A writer that raises
leaves no file behind. (Writing through a file object also stops `np.savez` from
appending `.npz` and `savefig` from guessing the format from the name.)
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import DPI, check_range

IMAGE_SUFFIXES = (".png", ".svg", ".pdf")  # drawn by matplotlib, format from the suffix
DATA_SUFFIXES = (".npz", ".json")  # raw attention data
HTML_SUFFIXES = (".html", ".htm")  # one self-contained interactive page
DPI_RANGE = DPI  # attnviz.limits holds every numeric bound


@dataclass(frozen=True)
class ImageStyle:
    """How an image is drawn and written."""

    dpi: int = 200
    cmap: str = "viridis"
    theme: str = "light"
    transparent: bool = False
    annotate: bool = False


def check_output(out: Path, allowed: tuple[str, ...], style: ImageStyle | None = None) -> None:
    """Refuse a bad output path or image option before any work is done."""
    suffix = out.suffix.lower()
    if suffix not in allowed:
        raise BadInput(
            f"cannot write {out}: unknown extension {out.suffix or '(none)'}; "
            f"use one of {', '.join(allowed)}"
        )
    folder = out.parent if str(out.parent) else Path(".")
    if folder.exists() and not folder.is_dir():
        raise AttnvizError(f"cannot write {out}: {folder} is a file, not a folder")
    if not folder.is_dir():
        raise AttnvizError(f"cannot write {out}: folder {folder} does not exist; create it first")
    if out.is_dir():
        raise AttnvizError(f"cannot write {out}: it is a folder; give a file name inside it")
    if suffix in IMAGE_SUFFIXES:
        style = style or ImageStyle()
        check_range(style.dpi, "dpi", DPI_RANGE, " (200 is the default, 300 suits print)")
        check_colormap(style.cmap)


def check_page_measure(out: Path, measure: str) -> None:
    """Refuse a page (.html) of a measure other than the weights: pages show the weights."""
    if measure != "weight" and out.suffix.lower() in HTML_SUFFIXES:
        raise BadInput(
            f"{out.suffix} pages show the attention weights: drop {{measure}}, or write an image",
            param="measure",
        )


def as_path(path: object, param: str = "path") -> Path:
    """`path` (a str or an os.PathLike) as a Path; BadInput naming `param` for anything else,
    or for a name no file system takes (a NUL)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise BadInput(
            f"{{{param}}} must be a file name (a str or a Path), got {type(path).__name__}",
            param=param,
        )
    if "\0" in path or not path.strip():
        raise BadInput(f"{{{param}}} {path[:40]!r} is not a file name", param=param)
    return Path(path)


def check_colormap(name: str) -> None:
    """Raise BadInput unless `name` is a registered matplotlib colormap."""
    if not isinstance(name, str):
        raise BadInput(
            f"{{cmap}} must be a colormap's name such as 'viridis', got {type(name).__name__}",
            param="cmap",
        )
    from attnviz.perf import import_quietly

    import_quietly("matplotlib")  # matplotlib, like torch, slowed by the GC
    import matplotlib

    known = list(matplotlib.colormaps)
    if name in known:
        return
    by_lower: dict[str, str] = {}
    for known_name in known:
        by_lower.setdefault(known_name.lower(), known_name)
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(by_lower[c] for c in close)}?)" if close else ""
    raise BadInput(
        f"unknown colormap {name!r}{hint}: use a matplotlib colormap such as "
        "viridis, magma, Blues, Greys"
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# A temporary file is `.NAME.attnviz-PID-RANDOM.tmp`: a later write to the same folder
# removes those whose process is gone (killed with -9, or the machine went down). A name
# too long for that to fit NAME_MAX (255 bytes on most file systems) is replaced by a hash
# of it: `.HASH.attnviz-PID-RANDOM.tmp`, so a legal 250-byte name can still be written.
_TEMP_MARK = ".attnviz-"
_READABLE_NAME = 180  # bytes: past it, the temp file is named by the name's hash


def temp_prefix(path: Path) -> str:
    """The start of the temporary files' names for writes to `path` (then PID-RANDOM.tmp)."""
    name = path.name
    if len(os.fsencode(name)) > _READABLE_NAME:
        import hashlib

        name = hashlib.sha256(os.fsencode(name)).hexdigest()[:32]
    return f".{name}{_TEMP_MARK}"


def _remove_stale_temps(folder: Path, path: Path) -> None:
    """Remove temporary files of earlier writes to `path` whose process no longer runs."""
    prefix = temp_prefix(path)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        pid_text = name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _running(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(folder / name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # someone else's process, or not a pid: leave its file alone
    return True


def _take_mode(tmp: str, path: Path) -> None:
    """Give the temporary file the mode (and, where permitted, the group) of the file it
    replaces, so overwriting a private (600) file keeps it private; a new file gets the
    mode the umask allows, as `open` would give it."""
    import stat

    try:
        existing = os.stat(path)
    except OSError:  # no such file (or unreadable): a new file
        existing = None
    if existing is None or not stat.S_ISREG(existing.st_mode):
        os.chmod(tmp, 0o666 & ~_umask())
        return
    if existing.st_gid != os.stat(tmp).st_gid:
        with contextlib.suppress(OSError):  # only a group the user is in
            os.chown(tmp, -1, existing.st_gid)
    os.chmod(tmp, stat.S_IMODE(existing.st_mode) & 0o777)  # never setuid/setgid/sticky


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (and SIGHUP) during the block raise SystemExit, so the temp file is removed.

    Only from the main thread and only where the signal has its default action: a
    program that handles these signals itself keeps its handler.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            previous[number] = signal.signal(number, _exit_on_signal)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _exit_on_signal(number: int, frame: object) -> None:
    raise SystemExit(128 + number)


@contextlib.contextmanager
def atomic_write(path: Path, mode: str = "wb") -> Iterator[IO]:
    """Yield a file object; on success it becomes `path`, on failure it vanishes.

    A SIGTERM while writing removes the temporary file too; one left by a process that
    was killed outright is removed by the next write to the same path.
    """
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise AttnvizError(f"cannot write {path}: folder {folder} does not exist; create it first")
    import tempfile  # here: a run that writes no file need not import it

    _remove_stale_temps(folder, path)
    with _terminate_as_exit():
        try:
            fd, tmp = tempfile.mkstemp(
                prefix=f"{temp_prefix(path)}{os.getpid()}-", suffix=".tmp", dir=folder
            )
        except OSError as exc:
            raise AttnvizError(
                f"cannot write {path}: {exc.strerror or exc}; choose a writable folder"
            ) from None
        try:
            encoding = None if "b" in mode else "utf-8"
            with os.fdopen(fd, mode, encoding=encoding) as handle:
                yield handle
            _take_mode(tmp, path)
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise AttnvizError(
                    f"cannot write {path}: {exc.strerror or exc}; choose a writable path"
                ) from None
            raise

"""What the environment says of the cache: its folder, on or off, its size bounds (the
attention's and the dequantized weights'), shared or not."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from attnviz.cache.notices import warn
from attnviz.limits import WEIGHTS_ENV, WEIGHTS_MB, shown

DEFAULT_LIMIT_MB = 512.0
MB = 2**20  # bytes in one ATTNVIZ_CACHE_MB unit
SHARED_ENV = "ATTNVIZ_CACHE_SHARED"  # set: a folder others can write is used on purpose
_OFF_VALUES = ("", "0", "false", "no", "off")


def cache_enabled(no_cache_flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """False with `--no-cache`, when ATTNVIZ_NO_CACHE is set to anything but 0/false/no/off,
    or when ATTNVIZ_CACHE_MB is 0 (a cache that may keep nothing)."""
    env = os.environ if environ is None else environ
    if no_cache_flag:
        return False
    if env.get("ATTNVIZ_NO_CACHE", "").strip().lower() not in _OFF_VALUES:
        return False
    return limit_bytes(env) > 0


def shared(environ: Mapping[str, str] | None = None) -> bool:
    """True when ATTNVIZ_CACHE_SHARED is set (to anything but 0/false/no/off)."""
    env = os.environ if environ is None else environ
    return env.get(SHARED_ENV, "").strip().lower() not in _OFF_VALUES


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder (not created here)."""
    env = os.environ if environ is None else environ
    if env.get("ATTNVIZ_CACHE_DIR"):
        return Path(env["ATTNVIZ_CACHE_DIR"]).expanduser()
    xdg = env.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative path
        return Path(xdg) / "attnviz"
    return _home(env) / ".cache" / "attnviz"


def _home(env: Mapping[str, str]) -> Path:
    """$HOME when it is an absolute path, else the user's home from the password database.

    An empty HOME (HOME="") would otherwise put the cache in /.cache or ./.cache.
    """
    home = env.get("HOME", "")
    if home and Path(home).is_absolute():
        return Path(home)
    try:
        import pwd

        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError, OSError):
        return Path.home()


def limit_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The size bound in bytes; a bad ATTNVIZ_CACHE_MB is a warning and the default."""
    return _bound("ATTNVIZ_CACHE_MB", DEFAULT_LIMIT_MB, environ)


def weights_limit_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound on the dequantized GGUF weights kept, in bytes (ATTNVIZ_WEIGHTS_MB, default
    `limits.WEIGHTS_MB`); a bad value is a warning and the default."""
    return _bound(WEIGHTS_ENV, float(WEIGHTS_MB), environ)


def _bound(name: str, default: float, environ: Mapping[str, str] | None) -> int:
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None or not raw.strip():
        return int(default * MB)
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not math.isfinite(mb) or mb < 0:
        warn(
            f"{name}={shown(raw)} is not a size in MB (a number >= 0, e.g. 512 or 0.5); "
            f"using {default:g}",
            once=True,
        )
        mb = default
    return int(mb * MB)

"""Process-level speed settings: how heavy libraries are imported, threads, the heap.

None of this changes a number attnviz computes; each item was kept because a
benchmark showed it pays (see docs/speed.md).

Imports. Importing torch creates hundreds of thousands of Python objects; the cyclic garbage
collector walks all of them several times while the import runs and again after it,
and finds nothing to free. Pausing it during the import, then freezing what the import
made (`gc.freeze`: later collections skip those objects), cut `import torch` from 1.23 s
to 0.83 s on this project's 2-core machine.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
from collections.abc import Iterator

# A sentence this short runs fastest on one thread: each op is too small to share, and on
# a busy machine every parallel op waits for a second core (measured: 3 pieces took 6 ms
# on one thread, 300 ms on two, with the other core busy).
ONE_THREAD_TOKENS = 128


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with the garbage collector off; keep what it made out of later scans."""
    gc.collect()  # what is garbage now must not be frozen with the rest
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def import_quietly(module: str) -> None:
    """Import `module` (once) with the collector paused; later imports of it are free."""
    if module in sys.modules:
        return
    with paused_gc():
        importlib.import_module(module)


def import_torch() -> None:
    """Import torch with the collector paused (see the module docstring)."""
    import_quietly("torch")


@contextlib.contextmanager
def threads(count: int | None) -> Iterator[None]:
    """torch's thread count set to `count` for the block (None leaves it alone)."""
    import torch

    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def threads_for(tokens: int) -> Iterator[None]:
    """One torch thread for a short single sentence; torch's own choice otherwise."""
    with threads(1 if tokens <= ONE_THREAD_TOKENS else None):
        yield


def return_freed_memory() -> None:
    """Have glibc hand every freed block of 1 MiB or more back to the system at once.

    By default glibc raises its threshold for mapping a block on its own each time such a
    block is freed (up to 32 MiB), so that the weights' tensors, the layers' T·T arrays and
    the drawing's buffers end up in a heap that keeps what was freed: the peak then holds
    memory no longer used. A fixed threshold of 1 MiB keeps it out (SmolLM2-135M, `show` at
    2,048 pieces to a PNG: 1.27 GB at the peak before, 0.98 GB after). The commands that
    draw call it (`stats` then prefers `reuse_freed_memory`); it lasts for the process.
    Elsewhere (not glibc) this does nothing.
    """
    _mallopt((-3, 1 << 20))  # M_MMAP_THRESHOLD, fixed: no longer raised as blocks are freed


def _mallopt(*settings: tuple[int, int]) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:  # the process's own symbols, libc's among them (`ctypes.util.find_library` would
        libc = ctypes.CDLL(None)  # run `ldconfig -p` in a child process: most of this call)
        for option, value in settings:
            libc.mallopt(option, value)
    except (OSError, AttributeError):
        return


def reuse_freed_memory() -> None:
    """Let glibc keep freed blocks for reuse instead of handing them back to the system.

    Each batch allocates the same large arrays again; by default glibc maps every one
    afresh and the first write to each page faults. Keeping them in the heap made the
    batched path about 7% faster here. It lasts for the whole process (memory once
    used stays with it), so the `stats` command calls it, not the library. Elsewhere
    (not glibc) this does nothing.
    """
    _mallopt(
        (-3, 1 << 30),  # M_MMAP_THRESHOLD: blocks under 1 GiB come from the heap
        (-1, 1 << 30),  # M_TRIM_THRESHOLD: keep up to 1 GiB of freed heap
    )

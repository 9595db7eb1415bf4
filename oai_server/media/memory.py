"""Give the memory a big decode freed back to the system.

glibc keeps freed heap memory in its arenas for the process to reuse, and a decoder
thread's arena is its own: after an image of 64 Mi pixels was decoded and shrunk, 150 to
200 MB stayed in the server's RSS though nothing held it (measured on the fake engine's
path). `malloc_trim` returns it. Elsewhere than glibc (musl, macOS) there is nothing to
call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

# Decodes smaller than this leave too little behind to be worth a trim (a few ms).
TRIM_PIXELS = 4 * 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    trim: Callable[[int], int] | None = getattr(ctypes.CDLL(name), "malloc_trim", None)
    return trim


_TRIM = _malloc_trim()


def release_freed(pixels: int) -> None:
    """After a decode of `pixels` has freed its full-size pixels: hand the freed memory
    back to the system, if it was big enough to matter. Blocking (off the event loop)."""
    if pixels >= TRIM_PIXELS and _TRIM is not None:
        _TRIM(0)

"""glibc malloc's thresholds, fixed when the service starts (issue 36, steady RSS).

glibc raises its mmap threshold to the size of any mmapped block that is freed (up to 32 MiB),
and its trim threshold to twice that: after one large transient buffer, blocks of that size come
from the heap and the heap's free top is kept, not given back. In the runtime, asyncio's reads
(a 256 KiB buffer, shrunk) and larger transients did that: over 3,000 turns the main arena grew
15 -> 21-27 MB while what it held in use grew by under 1 MB (mallinfo2 in the runtime;
malloc_trim(0) then gave 5-11 MB back). Setting both thresholds turns that adjustment off: a
block of MMAP_THRESHOLD or more is mapped and unmapped on its own, and a free top larger than
TRIM_THRESHOLD is given back at once. Both sit above the 256 KiB read buffer, so a turn's reads
still come from the heap with no system call of their own.

Not glibc (musl, another OS): nothing is done and `fix_thresholds` says so.
"""

from __future__ import annotations

import sys

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 512 * 1024
TRIM_THRESHOLD = 1024 * 1024


def fix_thresholds() -> bool:
    """Set glibc's mmap and trim thresholds (so they no longer follow freed blocks); False where
    there is no glibc mallopt to call."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: the CLI's other commands need not load it

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # glibc answers 1 for each; musl's mallopt is a stub that answers 0
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

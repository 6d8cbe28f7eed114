"""edge/host/malloc.py: after a large block is freed, glibc keeps no more than the fixed trim
threshold at the heap's top (without it, glibc raises its thresholds to that block's size and
keeps megabytes)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)

PROBE = """
import ctypes, sys
{setup}
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info
libc.free(libc.malloc(8 << 20))  # one large transient: mapped, then freed
blocks = [libc.malloc(600 << 10) for _ in range(20)]  # 12 MiB of blocks a little over 512 KiB
for block in reversed(blocks):
    libc.free(block)
print(libc.mallinfo2().keepcost)
"""


def kept_after_free(setup: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},  # no MALLOC_* from the caller's environment
    )
    return int(out.stdout)


def test_the_heap_keeps_at_most_the_trim_threshold_after_a_large_free() -> None:
    from edge.host.malloc import TRIM_THRESHOLD

    setup = "from edge.host.malloc import fix_thresholds\nassert fix_thresholds()"
    assert kept_after_free(setup) <= TRIM_THRESHOLD


def test_the_service_fixes_them_before_it_builds_the_runtime() -> None:
    import inspect

    from edge.cli import service

    source = inspect.getsource(service.cmd_run)
    assert source.index("fix_thresholds()") < source.index("build_runtime(")

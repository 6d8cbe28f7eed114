"""The process's clock: steady over the system clock, or over a test or demo offset clock
named by the environment (`A2A_CLOCK_OFFSET_FILE`, `A2A_WALL_SKEW_FILE`)."""

from __future__ import annotations

from collections.abc import Mapping

from a2a_common.clock import Clock, OffsetClock, SteadyClock, SystemClock


def runtime_clock(environ: Mapping[str, str]) -> Clock:
    """The steady clock over the system clock (or a test/demo offset clock)."""
    base: Clock = SystemClock()
    if environ.get("A2A_CLOCK_OFFSET_FILE"):  # demos that let days pass
        base = OffsetClock(environ["A2A_CLOCK_OFFSET_FILE"])
    elif environ.get("A2A_WALL_SKEW_FILE"):  # tests that make the wall clock jump
        base = OffsetClock(environ["A2A_WALL_SKEW_FILE"], wall_only=True)
    return SteadyClock(base)

"""Where one unit of work's time goes: consecutive laps measured with `perf_counter`.

Laps are durations, not instants, so a stopwatch started in paho's network thread (when a
message arrived) and lapped on the loop measures the hand-off too; `perf_counter` is one
monotonic clock for every thread of the process.
"""

from __future__ import annotations

import time


class Stopwatch:
    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self._last = self.started
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> float:
        """Seconds since the previous lap, added to `name` (a lap may repeat, e.g. retries)."""
        now = time.perf_counter()
        took = now - self._last
        self._last = now
        self.laps[name] = self.laps.get(name, 0.0) + took
        return took

    def total(self) -> float:
        """Seconds from the start to the latest lap."""
        return self._last - self.started

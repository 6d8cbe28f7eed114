"""What READY does not wait for (~100-170 ms of a cold start), done right after READY (which
waits for the broker to hold our subscriptions), or at the first connection, or a moment after
READY when no broker answers.

- `gc.collect()` + `gc.freeze()`: what start-up built lives as long as the process; out of the
  collector's way, a full collection walks only what came after (38 ms -> 2 ms in
  bench.runtime). From then on each collection's pause is observed (`a2a_gc_pause_seconds`).
- what a first turn would otherwise build: the cloud client's TLS context, the lexicon's regex.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import Any

from edge.host.metrics import Metrics


class Warmup:
    def __init__(self, metrics: Metrics, prepares: Sequence[Callable[[], object]]) -> None:
        self._metrics = metrics
        self._prepares = prepares
        self._done = False
        self._started = 0.0

    def run(self) -> None:
        """At most once; later calls do nothing."""
        if self._done:
            return
        self._done = True
        gc.collect()
        gc.freeze()
        gc.callbacks.append(self._timer)
        for prepare in self._prepares:
            prepare()

    def stop(self) -> None:
        if self._timer in gc.callbacks:
            gc.callbacks.remove(self._timer)

    def _timer(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._metrics.observe(
                "a2a_gc_pause_seconds",
                "cyclic garbage collection pauses by generation",
                time.perf_counter() - self._started,
                generation=str(info["generation"]),
            )

"""Virtual time: an event loop whose clock is the simulator's, and seeded ids.

Timers (`call_later`, `asyncio.sleep`, `wait_for`) fall due only when the simulator moves the
clock; the simulator never blocks on the loop, it turns it (`settle`) until nothing is ready."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from a2a_common import ids
from a2a_common.clock import ManualClock

MAX_TURNS = 400  # loop iterations one settle may take (a bound, never reached in practice)


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self._sim_clock = clock

    def time(self) -> float:
        return self._sim_clock.monotonic()

    def ready(self) -> int:
        """Callbacks ready to run now, timers that fell due included."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        now = self.time()
        due = sum(1 for t in scheduled if t.when() <= now and not t.cancelled())
        return len(self._ready) + due  # type: ignore[attr-defined]


async def settle() -> int:
    """Turn the loop until nothing is ready (everything waits on the clock or on an input)."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualLoop)
    turns = 0
    await asyncio.sleep(0)
    while loop.ready() and turns < MAX_TURNS:
        await asyncio.sleep(0)
        turns += 1
    return turns


class SeededBits:
    """`secrets` for `a2a_common.ids` while a run lasts: the ULIDs the app makes are the
    seed's (a trace is byte-identical run to run)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k)


def seed_ids(seed: int) -> Any:
    """Seed the ULIDs; returns what to restore."""
    saved = (getattr(ids, "secrets"), list(ids._last))  # noqa: B009 (not re-exported)
    setattr(ids, "secrets", SeededBits(random.Random(f"ids-{seed}")))  # noqa: B010
    ids._last[:] = [0, 0]
    return saved


def restore_ids(saved: Any) -> None:
    bits, last = saved
    setattr(ids, "secrets", bits)  # noqa: B010
    ids._last[:] = last

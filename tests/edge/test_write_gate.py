"""The checkpointer's gate: past `hold_at` the next unit of work waits for the checkpointer's
pass, never longer than the hold (a checkpointer that never comes cannot stall the writer)."""

from __future__ import annotations

import threading
import time

from edge.host.checkpointer import WriteGate, hold_at, restart_at


def test_a_held_unit_waits_for_the_release() -> None:
    gate = WriteGate()
    gate.hold(timeout_s=30)
    entered = threading.Event()

    def unit() -> None:
        with gate.writing():
            entered.set()

    worker = threading.Thread(target=unit)
    worker.start()
    assert not entered.wait(0.2)
    gate.release()
    assert entered.wait(5)
    worker.join()


def test_a_hold_ends_by_itself() -> None:
    gate = WriteGate()
    gate.hold(timeout_s=0.05)
    began = time.monotonic()
    with gate.writing():
        waited = time.monotonic() - began
    assert 0.04 <= waited < 5


def test_the_hold_sits_between_the_restart_and_the_bound() -> None:
    for mb in (1, 16, 256):
        bound = mb * 2**20
        assert restart_at(bound) < hold_at(bound) < bound

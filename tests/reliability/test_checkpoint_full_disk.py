"""WAL checkpoints on a full disk (SPEC §6; issue 30 items 10 and 16), with the real service on a
real 8 MiB tmpfs: an outside reader pins the log while turns grow it, the disk fills, the reader
ends. The checkpointer then fails for want of space, not because of a reader: it backs off and
says so a few times, and `STATUS=` names the full disk. Before: `WAL checkpoint failed (tried
again in 0.05s)` at WARNING about 20 times a second, and STATUS= kept blaming "a reader outside
the service" after the reader was gone."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, eventually, fill
from tests.reliability.test_safety_full_disk import NO_RESERVE, status_lines

pytestmark = pytest.mark.xdist_group("system")  # mounts a tmpfs on the host

FAILED = "WAL checkpoint"  # the checkpointer's failure lines start so
LINES_AT_MOST = 8  # in WATCH_S of a full disk (main: about 20 a second)
WATCH_S = 5.0


def failure_lines(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if FAILED in line and ("failed" in line or "fail" in line) and " DEBUG " not in line
    ]


def test_checkpoints_on_a_full_disk_back_off_and_status_names_the_disk_not_a_reader(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(
        storage={**NO_RESERVE, "max_wal_mb": 1}, env={"WATCHDOG_USEC": "1000000"}
    )
    db, wal = small_disk / "state.db", small_disk / "state.db-wal"
    reader = sqlite3.connect(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # an old snapshot, held
    for n in range(8):  # the log grows past restart_at (256 KB): it cannot be restarted
        assert probe.turn(f"grow-{n}", "가" * 4000, timeout_s=15)["status"] == "ok"
    assert wal.stat().st_size > 300 * 1024
    assert eventually(
        lambda: any("a reader outside the service" in x for x in status_lines(runtime)), 15
    )
    filler = fill(small_disk)
    reader.rollback()
    reader.close()  # the reader is gone; the disk stays full
    released = time.monotonic()
    eventually(lambda: failure_lines(runtime.log()), 10)  # it tried, and failed for want of space
    before = len(failure_lines(runtime.log()))
    eventually(lambda: time.monotonic() > released + 2, 5)  # any report of the reader settles
    last = status_lines(runtime)[-1]
    assert "a reader outside the service" not in last, last  # main: it still blames the reader
    assert "WAL checkpoints fail (database or disk is full)" in last, last
    start = time.monotonic()
    eventually(lambda: time.monotonic() > start + WATCH_S, WATCH_S + 5)
    lines = failure_lines(runtime.log())[before:]
    assert len(lines) <= LINES_AT_MOST, (len(lines), lines[:3])  # main: ~100 in 5 s
    filler.unlink()  # space returns: the WAL is brought back under its bound
    assert eventually(lambda: wal.stat().st_size <= 1024 * 1024, 20)
    assert eventually(lambda: "WAL checkpoints fail" not in status_lines(runtime)[-1], 20)
    assert runtime.terminate() == 0

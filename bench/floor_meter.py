"""bench.floor's meters: CPU (/proc/PID/stat) and bytes written to storage (/proc/PID/io,
bench.disk's measure) of one process over blocks of load, each block from a WAL copied back and
ending with a PASSIVE checkpoint run from here whose bytes are added, idle taken out."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from bench.benchlib import proc_stat
from bench.disk import io


def cpu(pid: int) -> float:
    return proc_stat(pid)[1]


def written(pid: int) -> int:
    """Bytes the process has sent toward storage so far (bench.disk: what writeback sends)."""
    counters = io(pid)
    return counters["write_bytes"] - counters["cancelled_write_bytes"]


class Store:
    """A process and its SQLite file, which this process checkpoints between blocks."""

    def __init__(self, pid: int, db: Path) -> None:
        self.pid = pid
        self._copier = sqlite3.connect(db, timeout=5)

    def copy_back(self) -> int:
        """A PASSIVE checkpoint from here: the bytes it wrote."""
        before = written(os.getpid())
        self._copier.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return written(os.getpid()) - before

    def close(self) -> None:
        self._copier.close()


class Meter:
    """CPU seconds, bytes written and wall seconds of one process, summed over its blocks."""

    def __init__(self, store: Store, idle_rates: tuple[float, float]) -> None:
        self.store = store
        self.idle_cpu, self.idle_bytes = idle_rates  # per second (`idle`)
        self.cpu_s = self.wall_s = 0.0
        self.bytes = 0

    def block(self, work: Callable[[], None], settle_s: float) -> None:
        self.store.copy_back()  # each block starts from a WAL wholly copied back
        pid = self.store.pid
        b0, c0, t0 = written(pid), cpu(pid), time.monotonic()
        work()
        time.sleep(settle_s)
        c1, b1, t1 = cpu(pid), written(pid), time.monotonic()
        self.bytes += b1 - b0 + self.store.copy_back()
        self.cpu_s += c1 - c0
        self.wall_s += t1 - t0

    def cpu_us(self, count: int) -> float:
        """CPU-µs per operation, idle taken out."""
        return max(0.0, self.cpu_s - self.idle_cpu * self.wall_s) / count * 1e6

    def bytes_per(self, count: int) -> float:
        return max(0.0, self.bytes - self.idle_bytes * self.wall_s) / count


def idle(stores: list[Store], seconds: float) -> list[tuple[float, float]]:
    """Each process's idle (CPU seconds, bytes) a second, measured together as a block of
    nothing (its WAL copied back before, and after with the bytes added)."""
    for store in stores:
        store.copy_back()
    t0 = time.monotonic()
    before = [(cpu(store.pid), written(store.pid)) for store in stores]
    time.sleep(seconds)
    rates = []
    for store, (c0, b0) in zip(stores, before, strict=True):
        c1, b1 = cpu(store.pid), written(store.pid)
        took = time.monotonic() - t0
        rates.append(((c1 - c0) / took, (b1 - b0 + store.copy_back()) / took))
    return rates

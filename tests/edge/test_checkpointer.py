"""WAL checkpoints in a thread of their own: the bound under a writer in a tight loop, and a
forget's TRUNCATE while the thread checkpoints — over a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from a2a_common.sqlite import open_state_db
from edge.checkpointer import Checkpointer, restart_at
from edge.commits import Commits
from edge.schema import MIGRATIONS

MB = 2**20


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite_utils.Database]:
    """The service's writing connection: no checkpoint inside a COMMIT, the file trimmed."""
    conn = open_state_db(tmp_path / "state.db", MIGRATIONS)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={restart_at(MB)}")
    conn.execute("CREATE TABLE filler (n INTEGER, x TEXT)")
    yield conn
    conn.close()


def started(path: Path, *, every_s: float = 1.0, poll_s: float = 0.05) -> Checkpointer:
    checkpointer = Checkpointer(
        path, busy_timeout_ms=5000, max_wal_bytes=MB, every_s=every_s, poll_s=poll_s
    )
    checkpointer.start()
    return checkpointer


def write(commits: Commits, db: sqlite_utils.Database, n: int) -> None:
    """One unit of work that reads before it writes, as the app's do."""
    with commits.atomic():
        db.execute("SELECT count(*) FROM filler").fetchone()
        db.execute("INSERT INTO filler VALUES (?, ?)", [n, "x" * 3000])


def test_a_burst_of_writes_keeps_the_wal_under_its_bound(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    checkpointer = started(path)
    # as the service wires it: RESTART waits at the gate for a unit to end, not for a gap a
    # writer in a tight loop never leaves; the end of a unit wakes the thread past restart_at
    commits = Commits(db, gate=checkpointer.gate.writing)
    largest = 0
    try:
        for n in range(1500):  # ~18 MB of WAL when it only grew
            write(commits, db, n)
            largest = max(largest, wal.stat().st_size)
    finally:
        checkpointer.close()
    assert checkpointer.restarts > 0
    assert largest <= MB, f"the WAL reached {largest / MB:.2f} MB"
    assert db.execute("SELECT count(*) FROM filler").fetchone()[0] == 1500


def test_a_forget_truncates_the_wal_while_the_thread_checkpoints(
    db: sqlite_utils.Database, tmp_path: Path
) -> None:
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    checkpointer = started(path, every_s=0.001, poll_s=0.001)  # PASSIVE all the time
    commits = Commits(db, gate=checkpointer.gate.writing)
    results = []
    try:
        for n in range(100):
            write(commits, db, n)
            results.append(checkpointer.truncate())
    finally:
        checkpointer.close()
    assert all(results)  # under the thread's lock: never busy against its PASSIVE
    assert wal.stat().st_size == 0

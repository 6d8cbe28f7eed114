"""WAL checkpoints in a thread of their own: the bound, the writer never refused, a forget's
TRUNCATE off the caller, the state files' check — over a real SQLite file."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from functools import partial
from pathlib import Path

import pytest

from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from edge.host.checkpointer import Checkpointer, restart_at
from edge.host.statefiles import StateFiles
from edge.store.commits import Commits
from edge.store.schema import MIGRATIONS
from tests.conftest import eventually

MB = 2**20


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """The service's writing connection: no checkpoint inside a COMMIT, the file trimmed."""
    conn = open_state_db(tmp_path / "state.db", MIGRATIONS)
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"PRAGMA journal_size_limit={restart_at(MB)}")
    conn.execute("CREATE TABLE filler (n INTEGER, x TEXT)")
    yield conn
    conn.close()


def started(
    path: Path, *, files: StateFiles | None = None, every_s: float = 1.0, poll_s: float = 0.05
) -> Checkpointer:
    checkpointer = Checkpointer(
        path, busy_timeout_ms=5000, max_wal_bytes=MB, files=files, every_s=every_s, poll_s=poll_s
    )
    checkpointer.start()
    return checkpointer


def write(commits: Commits, db: Database, n: int) -> None:
    """One unit of work that reads before it writes, as the app's do."""
    with commits.atomic():
        db.execute("SELECT count(*) FROM filler").fetchone()
        db.execute("INSERT INTO filler VALUES (?, ?)", [n, "x" * 3000])


def test_a_burst_of_writes_keeps_the_wal_under_its_bound(db: Database, tmp_path: Path) -> None:
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


def test_a_forget_with_a_reader_open_returns_at_once_and_truncates_when_it_ends(
    db: Database, tmp_path: Path
) -> None:
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    commits = Commits(db)
    write(commits, db, 0)
    checkpointer = started(path)
    with closing(sqlite3.connect(path)) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM filler").fetchone()  # holds its snapshot
        write(commits, db, 1)  # the "forget"
        began = time.monotonic()
        assert checkpointer.truncate() is False  # queued
        assert time.monotonic() - began < 0.01
        assert checkpointer.residue
        write(commits, db, 2)  # the loop goes on meanwhile
        eventually(lambda: checkpointer.blocked_s() is not None, 5)
        assert "forgotten data still in the WAL" in checkpointer.note()
        assert checkpointer.health()["wal_residue"] is True
        assert wal.stat().st_size > 0
        reader.execute("ROLLBACK")
    try:
        eventually(lambda: not checkpointer.residue, 5)
        assert wal.stat().st_size == 0
        assert checkpointer.note() == ""
    finally:
        checkpointer.close()


def test_a_reader_that_pins_the_log_is_a_problem_until_it_ends(
    db: Database, tmp_path: Path
) -> None:
    """SPEC §6: a checkpoint kept from finishing past 1 s is a reader outside the project; the
    service says so (the problem degrades it) and says it no more once the reader ends."""
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    commits = Commits(db)
    write(commits, db, 0)
    checkpointer = started(path)
    try:
        with closing(sqlite3.connect(path)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM filler").fetchone()
            for n in range(1, 200):  # ~600 KB: past restart_at (256 KB)
                write(commits, db, n)
            problem = eventually(checkpointer.problem, 5)
            assert "storage.max_wal_mb = 1" in problem
            assert checkpointer.health()["wal_blocked_s"] >= 1
            reader.execute("ROLLBACK")
        eventually(lambda: checkpointer.problem() is None, 5)
        write(commits, db, 200)  # the next write starts the restarted log over and trims it
        eventually(lambda: wal.stat().st_size <= MB, 5)
    finally:
        checkpointer.close()


def test_without_the_thread_truncate_runs_at_once(db: Database, tmp_path: Path) -> None:
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    write(Commits(db), db, 0)
    checkpointer = Checkpointer(path, busy_timeout_ms=1000)
    assert checkpointer.truncate() is True
    assert wal.stat().st_size == 0 and not checkpointer.residue
    checkpointer.close()


def test_a_removed_wal_is_noticed_and_its_frames_copied_into_the_db(
    db: Database, tmp_path: Path
) -> None:
    path, wal = tmp_path / "state.db", tmp_path / "state.db-wal"
    files = StateFiles(path)
    lost: list[str] = []
    files.when_lost(lost.append)
    checkpointer = started(path, files=files, every_s=3600.0)  # no periodic copy meanwhile
    commits = Commits(db, guard=files.intact)
    effects: list[int] = []
    for n in range(21):
        if n == 20:
            wal.unlink()  # the 21st commit goes into the removed file: its effect must not run
        with commits.atomic():
            db.execute("INSERT INTO filler VALUES (?, 'x')", [n])
            commits.after_commit(partial(effects.append, n))
    assert effects == list(range(20))
    assert len(lost) == 1 and "state.db-wal was removed" in lost[0]
    assert files.check() == lost[0] and files.wal_removed
    checkpointer.close()  # the service stops: the removed WAL's frames go into state.db
    # state.db alone, as the next start will find it (a connection on the path now would make
    # a new WAL under the old shared index; the writer's own close would copy them too)
    shutil.copyfile(path, tmp_path / "alone.db")
    with closing(sqlite3.connect(tmp_path / "alone.db")) as alone:
        assert alone.execute("SELECT count(*) FROM filler").fetchone()[0] == 21


def test_a_replaced_db_is_noticed_by_the_checkpointer_thread(db: Database, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    files = StateFiles(path)
    lost = threading.Event()
    files.when_lost(lambda _reason: lost.set())
    checkpointer = started(path, files=files, every_s=0.05)
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE x (y)")
    other.replace(path)
    try:
        assert lost.wait(5)
        assert "was replaced" in str(files.lost) and not files.wal_removed
        # the old file's log is out of the way of the next start
        assert not (tmp_path / "state.db-wal").exists()
        assert list(tmp_path.glob("state.db-wal.orphaned-*"))
    finally:
        checkpointer.close()

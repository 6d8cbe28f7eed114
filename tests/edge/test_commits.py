"""The one writer's transactions: effects wait for the outermost commit; a rolled-back part's
effects never happen; a unit waits for a checkpoint holding the write lock instead of failing;
the gate and the guard."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest

from a2a_common.db import Database
from a2a_common.sqlite import StorageUnavailable, open_state_db
from edge.store.commits import Commits
from edge.store.schema import MIGRATIONS


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(sqlite3.connect(tmp_path / "t.db"))
    database.execute("CREATE TABLE t (x INTEGER)")
    return database


def rows(db: Database) -> list[int]:
    return [r[0] for r in db.execute("SELECT x FROM t ORDER BY x").fetchall()]


def test_effect_outside_a_transaction_runs_at_once(db: Database) -> None:
    ran: list[str] = []
    Commits(db).after_commit(lambda: ran.append("now"))
    assert ran == ["now"]


def test_effects_wait_for_the_outermost_commit_and_keep_their_order(
    db: Database,
) -> None:
    commits = Commits(db)
    ran: list[str] = []
    with commits.atomic():
        for n in (1, 2):
            with commits.atomic():
                db.execute("INSERT INTO t VALUES (?)", [n])
                commits.after_commit(lambda n=n: ran.append(f"sent {n}"))
        assert ran == [] and commits.open
    assert ran == ["sent 1", "sent 2"] and not commits.open
    assert rows(db) == [1, 2]


def test_a_savepoint_that_rolls_back_takes_its_effects_and_rows_with_it(
    db: Database,
) -> None:
    commits = Commits(db)
    ran: list[int] = []
    with commits.atomic():
        for n in (1, 2, 3):
            try:
                with commits.atomic():
                    db.execute("INSERT INTO t VALUES (?)", [n])
                    commits.after_commit(lambda n=n: ran.append(n))
                    if n == 2:
                        raise ValueError("refused")
            except ValueError:
                pass
    assert ran == [1, 3]
    assert rows(db) == [1, 3]


def test_an_outer_rollback_drops_every_effect(db: Database) -> None:
    commits = Commits(db)
    ran: list[int] = []
    with pytest.raises(RuntimeError), commits.atomic():
        with commits.atomic():
            db.execute("INSERT INTO t VALUES (1)")
            commits.after_commit(lambda: ran.append(1))
        raise RuntimeError("the commit failed")
    assert ran == [] and rows(db) == [] and not commits.open


def test_a_failing_effect_does_not_skip_the_others(db: Database) -> None:
    commits = Commits(db)
    ran: list[str] = []

    def boom() -> None:
        raise OSError("broker gone")

    with commits.atomic():
        commits.after_commit(boom)
        commits.after_commit(lambda: ran.append("acked"))
    assert ran == ["acked"]


def test_a_unit_that_reads_first_waits_while_a_checkpoint_holds_the_write_lock(
    tmp_path: Path,
) -> None:
    """A RESTART/TRUNCATE checkpoint holds the writer's lock while it runs. A unit whose
    deferred BEGIN had read before it wrote got "database is locked" at once (SQLite does not
    wait there: it could deadlock); BEGIN IMMEDIATE waits in the busy handler instead."""
    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS, busy_timeout_ms=5000)
    db.execute("CREATE TABLE t (x INTEGER)")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, as a checkpoint takes it
    release = threading.Timer(0.2, holder.execute, ["COMMIT"])
    release.start()
    began = time.monotonic()
    try:
        with Commits(db).atomic():
            db.execute("SELECT count(*) FROM t").fetchone()
            db.execute("INSERT INTO t VALUES (1)")  # StorageUnavailable with a deferred BEGIN
    except StorageUnavailable:
        pytest.fail("the unit was refused instead of waiting for the lock")
    finally:
        release.join()
        holder.close()
    assert time.monotonic() - began >= 0.15
    assert rows(db) == [1]
    db.close()


def test_the_gate_is_entered_once_around_the_outermost_transaction(
    db: Database,
) -> None:
    entered: list[bool] = []

    @contextmanager
    def gate() -> Iterator[None]:
        entered.append(db.conn.in_transaction)
        yield
        entered.append(db.conn.in_transaction)

    commits = Commits(db, gate=gate)
    with commits.atomic(), commits.atomic():
        db.execute("INSERT INTO t VALUES (1)")
    assert entered == [False, False]  # before BEGIN, after COMMIT


def test_a_failing_guard_drops_the_effects_of_a_commit(db: Database) -> None:
    intact = [True]
    ran: list[int] = []
    commits = Commits(db, on_commit=lambda: ran.append(0), guard=lambda: intact[0])
    for n in (1, 2):
        if n == 2:
            intact[0] = False  # the state files are not the ones written any more
        with commits.atomic():
            db.execute("INSERT INTO t VALUES (?)", [n])
            commits.after_commit(partial(ran.append, n))
    assert ran == [0, 1]  # the second commit's on_commit and effect never ran
    assert rows(db) == [1, 2]


def test_the_commits_rows_are_sent_before_its_other_effects(db: Database) -> None:
    """`on_commit` (the outbox's flush) runs first after the commit: a dependant's command or a
    turn's answer reaches the socket before the acks, counters and wake-ups (issue 36);
    `before_send` effects (a forget's WAL truncation) run before it."""
    ran: list[str] = []
    commits = Commits(db, on_commit=lambda: ran.append("send"))
    with commits.atomic():
        commits.after_commit(lambda: ran.append("ack"))
        with commits.atomic():
            db.execute("INSERT INTO t VALUES (1)")
            commits.after_commit(lambda: ran.append("count"))
            commits.before_send(lambda: ran.append("truncate"))
        commits.before_send(lambda: ran.append("truncate 2"))
        assert ran == []
    assert ran == ["truncate", "truncate 2", "send", "ack", "count"]

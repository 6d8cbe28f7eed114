"""The runtime's connection is sqlite-utils' Database with its transaction semantics
(a2a_common/db.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from a2a_common.db import Database


def open_db(path: Path) -> Database:
    db = Database(sqlite3.connect(path))
    db.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")
    return db


def count(path: Path) -> int:
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT count(*) FROM t").fetchone()[0])


def test_a_write_outside_a_transaction_is_committed_at_once(tmp_path: Path) -> None:
    db = open_db(tmp_path / "t.db")
    db.execute("INSERT INTO t (x) VALUES (?)", [1])
    assert not db.conn.in_transaction
    assert count(tmp_path / "t.db") == 1  # another connection sees it
    assert db.execute("PRAGMA recursive_triggers").fetchone()[0] == 1


def test_a_failing_write_outside_a_transaction_leaves_none_open(tmp_path: Path) -> None:
    db = open_db(tmp_path / "t.db")
    db.execute("INSERT INTO t (x) VALUES (1)")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO t (x) VALUES (1)")
    assert not db.conn.in_transaction


def test_atomic_commits_rolls_back_and_nests_as_savepoints(tmp_path: Path) -> None:
    db = open_db(tmp_path / "t.db")
    with db.atomic():
        db.execute("INSERT INTO t (x) VALUES (1)")
        assert count(tmp_path / "t.db") == 0  # not yet committed
        with pytest.raises(RuntimeError), db.atomic():
            db.execute("INSERT INTO t (x) VALUES (2)")
            raise RuntimeError("inner")
        assert db.conn.in_transaction  # the outer one goes on
    assert [r[0] for r in db.execute("SELECT x FROM t").fetchall()] == [1]
    with pytest.raises(RuntimeError), db.atomic():
        db.execute("INSERT INTO t (x) VALUES (3)")
        raise RuntimeError("outer")
    assert not db.conn.in_transaction and count(tmp_path / "t.db") == 1


def test_transaction_control_is_never_committed_behind_the_caller(tmp_path: Path) -> None:
    db = open_db(tmp_path / "t.db")
    db.execute("BEGIN")
    db.execute("INSERT INTO t (x) VALUES (1)")
    assert db.conn.in_transaction and count(tmp_path / "t.db") == 0
    db.execute("COMMIT")
    assert count(tmp_path / "t.db") == 1
    db.execute("  -- note\n /* c */ ; begin immediate")  # found past comments, `;`, case
    db.execute("INSERT INTO t (x) VALUES (2)")
    assert db.conn.in_transaction and count(tmp_path / "t.db") == 1
    db.execute("ROLLBACK")
    assert count(tmp_path / "t.db") == 1


def test_it_is_sqlite_utils_database_with_one_savepoint_name(tmp_path: Path) -> None:
    db = open_db(tmp_path / "t.db")
    assert isinstance(db, sqlite_utils.Database)
    seen: list[str] = []
    db.conn.set_trace_callback(seen.append)
    with db.atomic(), db.atomic(), db.atomic():
        db["t"].insert({"x": 7})  # the table API writes inside the caller's transaction
        assert count(tmp_path / "t.db") == 0
    db.conn.set_trace_callback(None)
    savepoints = [s for s in seen if "SAVEPOINT" in s]  # insert() nests one of its own
    assert set(savepoints) == {"SAVEPOINT a2a_sp;", "RELEASE SAVEPOINT a2a_sp;"}
    assert savepoints.count("SAVEPOINT a2a_sp;") == savepoints.count("RELEASE SAVEPOINT a2a_sp;")
    assert savepoints.count("SAVEPOINT a2a_sp;") >= 2
    assert count(tmp_path / "t.db") == 1

"""The runtime's connection wrapper keeps sqlite-utils' transaction semantics (a2a_common/db.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from a2a_common.db import Database, first_keyword


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
    assert first_keyword("  -- note\n /* c */ ; begin immediate") == "BEGIN"
    assert first_keyword("-- only a comment") == ""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from a2a_common.db import Database
from a2a_common.sqlite import (
    PAGE_SIZE,
    Migration,
    SchemaTooNew,
    StorageError,
    open_readonly,
    open_state_db,
    schema_version,
)
from edge.store.schema import MIGRATIONS


def _make(db: Database) -> None:
    db.execute("CREATE TABLE t (x INTEGER)")


def _more(db: Database) -> None:
    db.execute("ALTER TABLE t ADD COLUMN y TEXT")


def test_created_private_with_wal_and_full_sync(tmp_path: Path) -> None:
    path = tmp_path / "state" / "state.db"
    db = open_state_db(path, [Migration("m1", _make)])
    assert path.stat().st_mode & 0o777 == 0o600
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert db.execute("PRAGMA secure_delete").fetchone()[0] == 1
    db.close()
    db = open_state_db(path, [Migration("m1", _make)], synchronous="NORMAL")
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 1
    db.close()


def test_a_new_db_has_small_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    """A commit writes a WAL frame per page it changes: a new DB's pages are 1 KiB (issue 36);
    a DB made with another size keeps it (changing it would be a VACUUM)."""
    db = open_state_db(tmp_path / "new.db", [Migration("m1", _make)])
    assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 1024
    db.close()
    old = sqlite3.connect(tmp_path / "old.db")
    old.execute("CREATE TABLE other (x INTEGER)")  # made at SQLite's default size
    old.close()
    db = open_state_db(tmp_path / "old.db", [Migration("m1", _make)])
    assert db.execute("PRAGMA page_size").fetchone()[0] == 4096
    db.close()


def test_migrations_run_once_in_order_and_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_state_db(path, [Migration("m1", _make)]).close()
    db = open_state_db(path, [Migration("m1", _make), Migration("m2", _more)])
    assert schema_version(db) == 2
    names = db.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert names == [(1, "m1"), (2, "m2")]
    assert [r[1] for r in db.execute("PRAGMA table_info(t)").fetchall()] == ["x", "y"]
    db.close()


def test_failed_migration_leaves_the_old_version(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_state_db(path, [Migration("m1", _make)]).close()

    def broken(db: Database) -> None:
        db.execute("CREATE TABLE u (z)")
        db.execute("THIS IS NOT SQL")

    with pytest.raises(StorageError):
        open_state_db(path, [Migration("m1", _make), Migration("m2", broken)])
    db = open_state_db(path, [Migration("m1", _make)])
    assert schema_version(db) == 1
    assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'u'").fetchall()
    db.close()


def test_newer_schema_is_refused_for_writing_and_reading(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_state_db(path, [Migration("m1", _make), Migration("m2", _more)]).close()
    with pytest.raises(SchemaTooNew) as info:
        open_state_db(path, [Migration("m1", _make)])
    assert "schema version 2" in str(info.value) and "newer" in str(info.value)
    with pytest.raises(SchemaTooNew):
        open_readonly(path, known=1)


def test_readonly_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_state_db(path, MIGRATIONS).close()
    db = open_readonly(path, known=len(MIGRATIONS))
    with pytest.raises(sqlite3.OperationalError):
        db.execute("DELETE FROM pairs")
    db.close()

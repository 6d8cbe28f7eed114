from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from a2a_common.backup import BackupError, PreMigrationBackups, backup_file, copy_db
from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import Migration, StorageError, open_state_db


def _make(db: Database) -> None:
    db.execute("CREATE TABLE t (x)")


def _db(path: Path) -> sqlite3.Connection:
    db = open_state_db(path, [Migration("m1", _make)])
    db.execute("INSERT INTO t VALUES (42)")
    db.conn.commit()
    conn: sqlite3.Connection = db.conn
    return conn


def test_a_copy_is_private_checked_and_complete(tmp_path: Path) -> None:
    conn = _db(tmp_path / "state.db")
    size = copy_db(conn, tmp_path / "copy.db")
    assert size == (tmp_path / "copy.db").stat().st_size
    assert (tmp_path / "copy.db").stat().st_mode & 0o777 == 0o600
    with closing(sqlite3.connect(tmp_path / "copy.db")) as copy:
        assert copy.execute("SELECT x FROM t").fetchall() == [(42,)]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == ["copy.db"]


def test_pre_migration_backups_keep_the_newest_and_leave_other_files(tmp_path: Path) -> None:
    conn = _db(tmp_path / "state.db")
    clock = ManualClock(datetime(2025, 1, 1, tzinfo=UTC))
    backups = PreMigrationBackups(tmp_path / "backups", clock, keep=3)
    (tmp_path / "backups").mkdir(mode=0o755)
    (tmp_path / "backups" / "operator-notes.txt").write_text("mine")
    for version in range(1, 6):
        backups(conn, version)
        clock.advance(3600)
    names = sorted(p.name for p in (tmp_path / "backups").iterdir())
    assert names == [
        "operator-notes.txt",
        "state-v3-20250101T020000Z.db",
        "state-v4-20250101T030000Z.db",
        "state-v5-20250101T040000Z.db",
    ]
    assert (tmp_path / "backups").stat().st_mode & 0o777 == 0o700


def test_a_backup_that_cannot_be_written_stops_the_migration(tmp_path: Path) -> None:
    conn = _db(tmp_path / "state.db")
    (tmp_path / "backups").write_text("a file where the directory should be")
    with pytest.raises(StorageError, match="nothing was migrated"):
        PreMigrationBackups(tmp_path / "backups", ManualClock())(conn, 1)


def test_backup_file_names_the_missing_directory(tmp_path: Path) -> None:
    _db(tmp_path / "state.db").close()
    with pytest.raises(BackupError, match="does not exist"):
        backup_file(tmp_path / "state.db", tmp_path / "nope" / "copy.db", known=1)

"""Opening the one state DB: file mode, pragmas, schema migrations.

Each package contributes named migrations; `edge.schema` fixes their order. `PRAGMA user_version`
holds how many have run, so a DB written by a newer a2a-edge (more migrations than we know) is
refused instead of being misread.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlite_utils

from a2a_common.errors import EdgeError

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class StorageError(EdgeError):
    """The state DB cannot be opened or used."""


class StorageUnavailable(StorageError):
    """A write or commit the DB refused for now (disk or size cap full, read-only file, I/O
    error, locked): nothing of the unit of work is on disk; the same work may succeed later."""


class StorageCorrupt(StorageError):
    """The DB file is damaged (or not a database): no retry will help; restore a backup."""


# primary result codes (the low byte of an extended code) that mean "not now", not "never"
_TRANSIENT = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
}
_CORRUPT = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def storage_error(exc: sqlite3.Error) -> StorageError:
    """What a `sqlite3.Error` means for the runtime: `StorageUnavailable` (retry later),
    `StorageCorrupt` (stop), or a plain `StorageError` (a statement of ours is wrong: a bug,
    treated like any failing handler)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in _CORRUPT or "malformed" in str(exc):
        return StorageCorrupt(str(exc))
    if primary in _TRANSIENT or (primary is None and isinstance(exc, sqlite3.OperationalError)):
        return StorageUnavailable(str(exc))
    return StorageError(str(exc))


class SchemaTooNew(StorageError):
    def __init__(self, path: Path, found: int, known: int) -> None:
        super().__init__(
            f"{path} has schema version {found}, newer than this a2a-edge knows ({known}); "
            "upgrade a2a-edge or restore a backup taken before the upgrade"
        )
        self.found = found
        self.known = known


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[sqlite_utils.Database], None]


CACHE_KB = 1024  # page cache of the writing connection: the working set is indexed and small


def _create_private(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)


def open_state_db(
    path: Path,
    migrations: Sequence[Migration],
    *,
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 5000,
    max_size_kb: int = 0,
) -> sqlite_utils.Database:
    """Open (creating 0600 if needed) and migrate the DB for the one writer."""
    try:
        _create_private(path)
        conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KB}")
        db = sqlite_utils.Database(conn, execute_plugins=False)
        migrate(db, path, migrations)
        if max_size_kb:  # a cap (also how tests make the disk "full")
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            conn.execute(f"PRAGMA max_page_count={max(1, max_size_kb * 1024 // page)}")
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc
    return db


def open_readonly(path: Path, known: int, *, busy_timeout_ms: int = 5000) -> sqlite_utils.Database:
    """Open for a CLI read while the service may be writing (WAL lets both proceed)."""
    if not path.exists():
        raise StorageError(f"{path} does not exist (has the service ever run?)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {path} read-only: {exc}") from exc
    if found > known:
        raise SchemaTooNew(path, found, known)
    return sqlite_utils.Database(conn, execute_plugins=False)


def migrate(db: sqlite_utils.Database, path: Path, migrations: Sequence[Migration]) -> None:
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > len(migrations):
        raise SchemaTooNew(path, found, len(migrations))
    for index in range(found, len(migrations)):
        step = migrations[index]
        with db.atomic():
            step.apply(db)
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
            )
            db.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                [index + 1, step.name],
            )
            db.execute(f"PRAGMA user_version={index + 1}")


def schema_version(db: sqlite_utils.Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])

"""Opening the one state DB: file mode, pragmas, schema migrations.

Each package contributes named migrations; `edge.store.schema` fixes their order. `PRAGMA
user_version` holds how many have run, so a DB written by a newer a2a-edge (more migrations than we
know) is refused instead of being misread.

Before SQLite sees the file, the writer checks what it is (SPEC §6's start-up check): `state.db`
and its `-wal`/`-shm` are regular files or absent, never symlinks (a chmod or an O_CREAT through
a link would act on a file outside the state dir), and the state dir is writable (SQLite must
create the WAL there), and each file present opens for writing. Once open, `PRAGMA quick_check`
runs before any migration or read. Each failure is a `StorageError` with a one-line message
(exit 3). Memory-mapped I/O of the DB is off on every connection (`mmap_size=0`): with it, a
fault on a mapped page is SIGBUS, not an error. (The WAL index in -shm is mapped whatever
`mmap_size` says; docs/design.md, *State files*, says what that leaves.)
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from a2a_common.db import Database
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
    apply: Callable[[Database], None]


CACHE_KB = 1024  # page cache of the writing connection: the working set is indexed and small
# the page size of a new DB: a commit writes one WAL frame (a page and a 24-byte header) per
# b-tree it touches, so the frame size is what a turn's dozen small rows cost on the flash
# (issue 36); a DB made before keeps the size it has (changing it is a VACUUM)
PAGE_SIZE = 1024


BeforeMigration = Callable[[sqlite3.Connection, int], None]  # (connection, version found)

_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}


def check_files(path: Path, *, writable: bool = False) -> None:
    """`path` and its -wal/-shm are regular files or absent: never a symlink, never a directory
    or device (a symlink is refused even when it points at a good DB: our chmod and SQLite's
    O_CREAT would follow it out of the state dir). `writable`: each one there opens for writing
    (an immutable or read-only file; SQLite would fall back to read-only, or fault on -shm)."""
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = os.lstat(name).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageError(f"cannot stat {name}: {exc.strerror or exc}") from exc
        if stat.S_ISLNK(mode):
            raise StorageError(
                f"{name} is a symlink; the state DB must be a regular file in the state dir"
            )
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise StorageError(f"{name} is {kind}; the state DB must be a regular file")
        if writable:
            try:
                os.close(os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
            except OSError as exc:
                raise StorageError(f"{name} cannot be written: {exc.strerror or exc}") from exc


def check_writable(directory: Path) -> None:
    """Create and remove a file in `directory`: SQLite must be able to make the WAL there."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StorageError(f"state dir {directory} is not writable: {exc.strerror or exc}") from exc


def check_intact(conn: sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check` (every page, every record's format; not index contents): a damaged
    DB is refused before anything reads it or migrates it."""
    rows = conn.execute("PRAGMA quick_check(3)").fetchall()
    found = [" ".join(str(row[0]).split()) for row in rows]
    if found != ["ok"]:
        raise StorageError(
            f"{path} is damaged (quick_check: {'; '.join(found)}); restore a backup"
            f" (`a2a-edge db backup`, or {path.parent / 'backups'}) or move it away"
        )


def _create_private(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_files(path, writable=True)
    check_writable(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)


def open_state_db(
    path: Path,
    migrations: Sequence[Migration],
    *,
    synchronous: Synchronous = "FULL",
    busy_timeout_ms: int = 5000,
    max_size_kb: int = 0,
    before_migration: BeforeMigration | None = None,
) -> Database:
    """Open (creating 0600 if needed), check and migrate the DB for the one writer.
    `before_migration` runs when an existing DB is about to be migrated (the backup)."""
    try:
        _create_private(path)
        conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA mmap_size=0")
        check_intact(conn, path)
        if int(conn.execute("PRAGMA page_count").fetchone()[0]) == 0:  # new: before any page
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KB}")
        db = Database(conn)
        found = schema_version(db)
        if before_migration is not None and 0 < found < len(migrations):
            before_migration(conn, found)
        migrate(db, path, migrations)
        if max_size_kb:  # a cap (also how tests make the disk "full")
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            conn.execute(f"PRAGMA max_page_count={max(1, max_size_kb * 1024 // page)}")
    except (sqlite3.Error, OSError) as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc
    return db


def open_readonly(path: Path, known: int, *, busy_timeout_ms: int = 5000) -> Database:
    """Open for a CLI read while the service may be writing (WAL lets both proceed)."""
    check_files(path)
    if not path.exists():
        raise StorageError(f"{path} does not exist (has the service ever run?)")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=busy_timeout_ms / 1000)
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA mmap_size=0")
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {path} read-only: {exc}") from exc
    if found > known:
        raise SchemaTooNew(path, found, known)
    return Database(conn)


def migrate(db: Database, path: Path, migrations: Sequence[Migration]) -> None:
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


def schema_version(db: Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])

"""Consistent copies of the state DB, with SQLite's online backup API (SPEC §6).

`copy_db` copies every page in one step (`Connection.backup(pages=-1)`), so the copy is one
read transaction of the source: a snapshot as of one commit. In WAL mode a reader never blocks
the writer, so the service keeps committing meanwhile. The copy is written to a 0600 temporary
file beside the destination, put in rollback-journal mode (one file, nothing beside it),
checked (`quick_check`), fsynced and renamed into place, so a crash or a full disk never
leaves a half copy under the destination's name.

`a2a-edge db backup FILE` opens the source read-only rather than asking the service: it works
the same whether a service runs or not, needs no broker, and takes nothing from the service's
loop (a copy of a large DB is seconds of I/O the loop must not wait on).

`PreMigrationBackups` is the runtime's own: before a schema migration of an existing DB, a copy
in `<state_dir>/backups/` (0700) named with the schema version it had and a UTC timestamp,
keeping the newest few. Each holds the user's words as they were, so none outlives them: a
forget, a retention pass that removed anything and `storage.backup_keep_days` remove them
(edge/host/copies.py, SPEC §5.5).
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from a2a_common.clock import Clock
from a2a_common.errors import EdgeError
from a2a_common.sqlite import StorageError, open_readonly

log = logging.getLogger(__name__)

KEEP = 3  # pre-migration backups kept in <state_dir>/backups
_NAME = re.compile(r"^state-v(\d+)-(\d{8}T\d{6}Z)\.db$")


class BackupError(EdgeError):
    """The copy could not be written where it was asked for (the source is fine)."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_db(source: sqlite3.Connection, dest: Path) -> int:
    """A checked copy of `source` at `dest` (0600, replaced atomically); returns its size.
    Raises OSError or sqlite3.Error for the caller to translate."""
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    os.close(fd)  # mkstemp made it 0600
    tmp = Path(name)
    try:
        target = sqlite3.connect(tmp)
        try:
            target.execute("PRAGMA mmap_size=0")
            source.backup(target)
            # one self-contained file: a reader of the copy makes no -wal/-shm beside it (the
            # service puts its DB back in WAL mode when it opens a restored copy)
            target.execute("PRAGMA journal_mode=DELETE")
            (found,) = target.execute("PRAGMA quick_check").fetchone()
            if found != "ok":
                raise sqlite3.DatabaseError(f"the copy fails quick_check: {found}")
        finally:
            target.close()
        with tmp.open("rb+") as copy:
            os.fsync(copy.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)
    return dest.stat().st_size


def backup_file(state_db: Path, dest: Path, known: int) -> int:
    """`a2a-edge db backup`: copy the state DB (read-only, safe while the service writes) to
    `dest`. A source that cannot be read is a `StorageError`; a destination that cannot be
    written, a `BackupError`."""
    if not dest.parent.is_dir():
        raise BackupError(f"cannot write {dest}: directory {dest.parent} does not exist")
    if dest.is_dir():
        raise BackupError(f"cannot write {dest}: it is a directory")
    db = open_readonly(state_db, known)
    try:
        return copy_db(db.conn, dest)
    except OSError as exc:
        raise BackupError(f"cannot write {dest}: {exc.strerror or exc}") from exc
    except sqlite3.Error as exc:
        raise StorageError(f"cannot copy {state_db}: {exc}") from exc
    finally:
        db.close()


@dataclass(frozen=True)
class PreMigrationBackups:
    """`open_state_db(before_migration=...)`: a copy before migrating an existing DB. A copy
    that fails stops the start (no migration without a backup)."""

    directory: Path
    clock: Clock
    keep: int = KEEP

    def __call__(self, conn: sqlite3.Connection, version: int) -> None:
        stamp = self.clock.now().astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        dest = self.directory / f"state-v{version}-{stamp}.db"
        try:
            self._prepare()
            size = copy_db(conn, dest)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(
                f"cannot back up the state DB to {dest} before migrating it from schema"
                f" v{version}: {exc}; nothing was migrated"
            ) from exc
        log.info("backed up schema v%d to %s (%d bytes) before migrating", version, dest, size)
        self._prune()

    def _prepare(self) -> None:
        self.directory.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(self.directory)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(f"{self.directory} is not a directory")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(self.directory, 0o700)

    def _prune(self) -> None:
        ours = []
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                ours.append((match[2], path))
        ours.sort()
        for _stamp, path in ours[: -self.keep]:
            path.unlink(missing_ok=True)
            log.info("removed old backup %s (keeping the newest %d)", path, self.keep)

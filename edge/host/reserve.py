"""The storage reserve (SPEC §2.4; docs/design.md *Safety does not wait for storage*): a
preallocated file, `<state_dir>/reserve` (`storage.reserve_mb`), that the runtime deletes when
the disk fills, so the inputs it holds and the state change of a cancel can be committed, and
makes again once space is back.

The disk counts as full below `FLOOR_BYTES` free: the runtime then answers turns `error`
(`storage_full`) instead of taking them, so its own writes never take the last space, which is
kept for safety (a cancel, a callback, a heartbeat)."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

from a2a_common.db import Database
from a2a_common.sqlite import StorageError

log = logging.getLogger(__name__)

FLOOR_BYTES = 512 * 1024  # free space below this: the disk is full
CHUNK = 1 << 20


class Reserve:
    def __init__(self, state_dir: Path, size_mb: int) -> None:
        self.path = state_dir / "reserve"
        self.size = size_mb * 2**20
        self.released = False  # given back in this run and not made again yet
        self.read_only = ""  # why the DB was opened read-only at start (a full disk), or ""

    def free(self) -> int:
        """Bytes free for the runtime on the state dir's filesystem (a large number when it
        cannot be told: never a reason to stop)."""
        try:
            st = os.statvfs(self.path.parent)
        except OSError:
            return 1 << 62
        return st.f_bavail * st.f_frsize

    def full(self) -> bool:
        return self.free() < FLOOR_BYTES

    def present(self) -> bool:
        try:
            return self.path.stat().st_size == self.size
        except OSError:
            return False

    def at_start(self) -> None:
        """Before the state DB opens: a full disk gets the reserve back at once (the start
        needs space); else it is made when missing."""
        if self.full() and self.path.exists():
            self.release("the disk is full at start")
        elif not self.size:
            self.path.unlink(missing_ok=True)  # none wanted (any more)
        else:
            self.make()

    def release(self, why: str) -> bool:
        """Delete the reserve (a write was refused for lack of space); True when it freed
        space."""
        if not self.path.exists():
            return False
        try:
            self.path.unlink()
        except OSError as exc:
            log.error("could not release the storage reserve %s: %s", self.path, exc)
            return False
        self.released = True
        log.warning(
            "disk full: released the storage reserve (%d MB) so held inputs can be committed"
            " (%s); turns are answered error storage_full while less than %d KB is free",
            self.size // 2**20,
            why,
            FLOOR_BYTES // 1024,
        )
        return True

    def make(self) -> bool:
        """Make the reserve when it is missing and space allows (its size plus twice the
        floor, so making it leaves the disk not full); True when made now."""
        if not self.size or self.present():
            return False
        if self.free() + self._size_now() < self.size + 2 * FLOOR_BYTES:
            return False
        tmp = self.path.with_name("reserve.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                self._allocate(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("storage reserve not made: %s", exc)
            return False
        if self.released:
            log.warning("space is back: storage reserve made again (%d MB)", self.size // 2**20)
        else:
            log.info("storage reserve of %d MB at %s", self.size // 2**20, self.path)
        self.released = False
        return True

    def _size_now(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _allocate(self, fd: int) -> None:
        """Real blocks, not a sparse file: zeros written (posix_fallocate where it works)."""
        try:
            os.posix_fallocate(fd, 0, self.size)
            return
        except (OSError, AttributeError):
            pass
        zeros = b"\0" * CHUNK
        left = self.size
        while left > 0:
            left -= os.write(fd, zeros[: min(CHUNK, left)])

    def line(self) -> str:
        """What `STATUS=` and the status say of it ("" when nothing is wrong)."""
        if self.read_only:
            return "storage full at start: state DB read-only, turns answered error"
        if self.full():
            return "storage full: turns answered error, safety inputs acted on from memory"
        if self.released:
            return "disk full: storage reserve released (made again once space is back)"
        return ""


def open_on_full_disk(path: Path, known: int) -> Database:
    """The state DB read as it is, when the disk is too full to open it for writing (SQLite
    cannot make the -wal and -shm files): `immutable`, so nothing is written, not even a lock.
    Only when nothing waits in a log (the last run stopped cleanly) and its schema is this
    build's; every write fails (read-only: held by the door). Raises StorageError otherwise."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StorageError(f"{wal} holds changes not in {path.name}: cannot read it as it is")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise StorageError(f"cannot read {path} on the full disk: {exc}") from exc
    if found != known:
        conn.close()
        raise StorageError(f"{path} has schema v{found}, this build v{known}: cannot migrate")
    return Database(conn)

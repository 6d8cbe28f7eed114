"""WAL checkpoints off the loop.

SQLite's automatic checkpoint runs inside whichever COMMIT pushes the WAL past 1000 pages: that
commit copies the pages back and, with `synchronous=FULL`, fsyncs the database file — tens of
milliseconds on the loop every few dozen turns. The service turns it off on its writing
connection (`wal_autocheckpoint=0`) and runs PASSIVE checkpoints here instead, on a connection
of their own in a worker thread (sqlite releases the GIL while it works; PASSIVE never blocks
the writer). Durability is unchanged: a commit is durable once it is in the WAL.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger(__name__)

EVERY_S = 1.0


class Checkpointer:
    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        # held while a checkpoint runs: by close() (a cancelled run may leave one running in
        # its thread) and by a forget's TRUNCATE on the loop's connection
        self.lock = threading.Lock()
        self.runs = 0

    def _checkpoint(self) -> tuple[int, int]:
        """(WAL frames, frames copied) — runs in a worker thread, one call at a time."""
        with self.lock:
            return self._checkpoint_locked()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(str(self._path), check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            self._conn.execute("PRAGMA cache_size=-64")  # copying pages back needs no cache
            self._conn.execute("PRAGMA mmap_size=0")  # an unwritable file: an error, not SIGBUS
        return self._conn

    def _checkpoint_locked(self) -> tuple[int, int]:
        conn = self._connection()
        _busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames), int(copied)

    def truncate(self) -> bool:
        """Copy the whole WAL back and truncate it (after a forget: no page of the forgotten
        text may linger in the WAL file); True when it did. Under the lock: a TRUNCATE that met
        a PASSIVE checkpoint mid-run would return busy and leave the WAL in place."""
        try:
            with self.lock:
                busy, _log, _done = (
                    self._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                )
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint after a forget failed: %s", exc)
            return False
        if busy:
            log.warning(
                "WAL checkpoint after a forget was blocked by a reader; old WAL pages stay until"
                " they are overwritten or a later forget truncates the WAL"
            )
        return not busy

    async def run(self, every_s: float = EVERY_S) -> None:
        try:
            while True:
                await asyncio.sleep(every_s)
                try:
                    await asyncio.to_thread(self._checkpoint)
                    self.runs += 1
                except sqlite3.Error as exc:
                    log.warning("WAL checkpoint failed (retried in %gs): %s", every_s, exc)
        finally:
            self.close()

    def close(self) -> None:
        """Close the connection; waits for a checkpoint still running in its thread."""
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

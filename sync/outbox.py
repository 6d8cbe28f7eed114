"""The pending-sync outbox (SPEC §3.2): writes owed to the cloud, oldest first by `write_id`.

Rows are written in the same transaction as the local change that caused them. This is the
minimal table and its enqueue; replay, acks, conflicts and dead letters come with the sync issue.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlite_utils

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.ids import new_ulid
from a2a_common.sqlite import Migration
from a2a_common.writes import SyncWrite


def _v1(db: sqlite_utils.Database) -> None:
    db.execute(
        """CREATE TABLE sync_outbox (
            write_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT)"""
    )


MIGRATIONS = [Migration("sync_0001_outbox", _v1)]


class SyncOutbox:
    def __init__(self, *, db: sqlite_utils.Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def enqueue(self, writes: Iterable[SyncWrite]) -> list[str]:
        """Call inside the transaction of the change; returns the new write ids."""
        ids = []
        for write in writes:
            write_id = new_ulid(self._clock)
            self._db.execute(
                "INSERT INTO sync_outbox (write_id, kind, payload, created_at) VALUES (?, ?, ?, ?)",
                [write_id, write.kind, jsonx.dumps(write.payload), iso(self._clock.now())],
            )
            ids.append(write_id)
        return ids

    def pending(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM sync_outbox").fetchone()[0])

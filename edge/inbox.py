"""Ids of applied inbound messages, so a redelivery (QoS 1 is at least once) is applied once."""

from __future__ import annotations

import sqlite_utils

from a2a_common.clock import Clock, iso


class InboxDedupe:
    """Ids of applied inbound messages, so a redelivery is applied once."""

    def __init__(self, *, db: sqlite_utils.Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def seen(self, key: str) -> bool:
        row = self._db.execute("SELECT 1 FROM inbox_seen WHERE key = ?", [key]).fetchone()
        return row is not None

    def mark(self, key: str, topic: str) -> None:
        """Call inside the transaction that applies the message."""
        self._db.execute(
            "INSERT OR IGNORE INTO inbox_seen (key, topic, seen_at) VALUES (?, ?, ?)",
            [key, topic, iso(self._clock.now())],
        )

    def prune(self, before: str, limit: int) -> int:
        """Forget up to `limit` marks taken before `before` (a redelivery comes within minutes
        of a crash, not days); inside the caller's transaction. Returns how many."""
        cursor = self._db.execute(
            "DELETE FROM inbox_seen WHERE rowid IN"
            " (SELECT rowid FROM inbox_seen WHERE seen_at < ? LIMIT ?)",
            [before, limit],
        )
        return int(cursor.rowcount)

"""What the runtime keeps of inbound messages: the ids of applied ones, so a redelivery (QoS 1 is
at least once) is applied once; and the dead letters, the payloads of messages a handler failed
on (SPEC §2.4), refused and acknowledged, kept for the operator (`a2a-edge inbox dead`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.queues import Handed
from a2a_common.sqlite import Migration

if TYPE_CHECKING:
    from a2a_common.queues import DurableQueue


def _v1(db: Database) -> None:
    db.execute(  # AUTOINCREMENT: raw SQL
        """CREATE TABLE inbox_dead (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            topic TEXT NOT NULL,
            payload BLOB NOT NULL,
            error TEXT NOT NULL,
            received_at TEXT NOT NULL)"""
    )
    db.table("inbox_dead").create_index(["received_at"], index_name="inbox_dead_at")


MIGRATIONS = [Migration("edge_0003_inbox_dead_letters", _v1)]


def _v2(db: Database) -> None:
    db.table("inbox_seen").add_column("fingerprint", str)
    db.table("inbox_seen").add_column("answer", str)


MIGRATIONS_2 = [Migration("edge_0004_inbox_seen_answers", _v2)]


def _v3(db: Database) -> None:
    """Keyed by `key` alone (WITHOUT ROWID): every inbound message wrote three b-trees (rows,
    the key's index, `seen_at`), now two — a WAL frame less per commit (issue 23). WITHOUT
    ROWID: raw SQL (sqlite-utils' create() and transform() cannot make one)."""
    db.execute(
        """CREATE TABLE inbox_seen_keyed (
            key TEXT PRIMARY KEY,
            topic TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            fingerprint TEXT,
            answer TEXT) WITHOUT ROWID"""
    )
    db.execute(
        "INSERT INTO inbox_seen_keyed (key, topic, seen_at, fingerprint, answer)"
        " SELECT key, topic, seen_at, fingerprint, answer FROM inbox_seen"
    )
    db.execute("DROP TABLE inbox_seen")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE inbox_seen_keyed RENAME TO inbox_seen")
    db.table("inbox_seen").create_index(["seen_at"], index_name="inbox_seen_at")


MIGRATIONS_3 = [Migration("edge_0006_inbox_seen_without_rowid", _v3)]


def _v4(db: Database) -> None:
    """A rowid table without the `seen_at` index (issue 36, bytes per turn). As WITHOUT ROWID
    a row keeps at most 231 bytes in its 1 KiB leaf, so every turn's stored answer (~250-400
    bytes) spilled into an overflow page, freed and zeroed (secure_delete) when pruned or
    forgotten, with the freelist trunk and page 1 each time: ~4 of a turn's 26 WAL frames.
    A rowid row keeps up to 989 bytes in its leaf. The key's index stays (a look-up per
    message); `seen_at` loses its own: rows come in rowid order, which is the order they were
    taken, so the prune reads the oldest first and stops at its limit."""
    db.execute(
        """CREATE TABLE inbox_seen_inline (
            key TEXT PRIMARY KEY,
            topic TEXT NOT NULL,
            seen_at TEXT NOT NULL,
            fingerprint TEXT,
            answer TEXT)"""
    )
    db.execute(
        "INSERT INTO inbox_seen_inline (key, topic, seen_at, fingerprint, answer)"
        " SELECT key, topic, seen_at, fingerprint, answer FROM inbox_seen ORDER BY seen_at, key"
    )
    db.execute("DROP TABLE inbox_seen")  # and its index; secure_delete: the pages are zeroed
    db.execute("ALTER TABLE inbox_seen_inline RENAME TO inbox_seen")


MIGRATIONS_4 = [Migration("edge_0011_inbox_seen_inline", _v4)]


@dataclass(frozen=True)
class Seen:
    """An applied message's mark: what tells a repeat from a reuse of its id (`fingerprint`),
    and the answer it got, to give again to a repeat (SPEC §2.4)."""

    fingerprint: str | None
    answer: dict[str, Any] | None


class InboxDedupe:
    """Ids of applied inbound messages, so a redelivery is applied once."""

    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def seen(self, key: str) -> Seen | None:
        row = self._db.execute(
            "SELECT fingerprint, answer FROM inbox_seen WHERE key = ?", [key]
        ).fetchone()
        if row is None:
            return None
        return Seen(row[0], json.loads(row[1]) if row[1] else None)

    def mark(self, key: str, topic: str, fingerprint: str | None = None) -> None:
        """Call inside the transaction that applies the message."""
        self._db.execute(
            "INSERT OR IGNORE INTO inbox_seen (key, topic, seen_at, fingerprint)"
            " VALUES (?, ?, ?, ?)",
            [key, topic, iso(self._clock.now()), fingerprint],
        )

    def answered(self, key: str, answer: dict[str, Any]) -> None:
        """The answer the message got (in the transaction that sends it)."""
        self._db.execute(
            "UPDATE inbox_seen SET answer = ? WHERE key = ?", [jsonx.dumps(answer), key]
        )

    def forget_answers(self, keys: list[str] | None) -> None:
        """Stored answers go with what the user had forgotten (None: every turn's)."""
        if keys is None:
            self._db.execute("UPDATE inbox_seen SET answer = NULL WHERE key LIKE 'turn:%'")
            return
        self._db.conn.executemany(
            "UPDATE inbox_seen SET answer = NULL WHERE key = ?", [(key,) for key in keys]
        )

    def prune(self, before: str, limit: int) -> int:
        """Forget up to `limit` marks taken before `before` (a redelivery comes within minutes
        of a crash, not days); inside the caller's transaction. Returns how many. No index on
        `seen_at` (edge_0011): the rowid order is the order marks were taken, oldest first."""
        cursor = self._db.execute(
            "DELETE FROM inbox_seen WHERE rowid IN"
            " (SELECT rowid FROM inbox_seen WHERE seen_at < ? ORDER BY rowid LIMIT ?)",
            [before, limit],
        )
        return int(cursor.rowcount)


@dataclass(frozen=True)
class DeadLetter:
    """An inbound message a handler failed on, as `put` takes it and `hand_out` gives it."""

    topic: str
    payload: bytes
    error: str


class InboxDeadLetters:
    """Bounded in count (`keep`), in bytes (each payload at most `max_bytes`, cut beyond it,
    the error saying so; all payloads together at most `max_total` bytes, the oldest going
    first, the newest always kept) and in age (the retention loop prunes them); a payload may
    hold the user's words, so `forget --all` wipes them too. Also a `DurableQueue`
    (a2a_common.queues): what an operator or a tool has dealt with is `ack`ed and goes at the
    next `reap`."""

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        keep: int,
        max_bytes: int = 65536,
        max_total: int = 4096 * 1024,
    ) -> None:
        self._db = db
        self._clock = clock
        self._keep = keep
        self._max_bytes = max_bytes
        self._max_total = max_total
        self._acked: list[int] = []  # ids the next `reap()` deletes

    def add(self, topic: str, payload: bytes, error: str) -> None:
        """Inside the caller's transaction; the oldest beyond the bounds go at once."""
        self.put(DeadLetter(topic, payload, error))

    def put(self, item: DeadLetter) -> int:
        """`add`; returns the new id (AUTOINCREMENT: never one used before)."""
        payload, error = item.payload, item.error
        if len(payload) > self._max_bytes:  # a message refused outside its handler: any size
            error = f"payload cut at {self._max_bytes} of {len(payload)} bytes; {error}"
            payload = payload[: self._max_bytes]
        cursor = self._db.execute(
            "INSERT INTO inbox_dead (topic, payload, error, received_at) VALUES (?, ?, ?, ?)",
            [item.topic, payload, error[:500], iso(self._clock.now())],
        )
        row_id = int(cursor.lastrowid or 0)
        self._db.execute(
            "DELETE FROM inbox_dead WHERE id <= (SELECT max(id) FROM inbox_dead) - ?",
            [self._keep],
        )
        self._db.execute(  # newest first, a running total; past the bound the older ones go
            "DELETE FROM inbox_dead WHERE id IN (SELECT id FROM (SELECT id, sum(length(payload))"
            " OVER (ORDER BY id DESC) AS total FROM inbox_dead) WHERE total > ? AND id < ?)",
            [self._max_total, row_id],
        )
        return row_id

    def hand_out(self, limit: int) -> list[Handed[int, DeadLetter]]:
        """Up to `limit` dead letters not acked, oldest first."""
        skip = set(self._acked)
        rows = self._db.execute(
            "SELECT id, topic, payload, error FROM inbox_dead ORDER BY id LIMIT ?",
            [limit + len(skip)],
        ).fetchall()
        letters = [
            Handed(int(row_id), DeadLetter(topic, bytes(payload), error))
            for row_id, topic, payload, error in rows
            if row_id not in skip
        ]
        return letters[:limit]

    def ack(self, ids: Iterable[int]) -> None:
        self._acked.extend(ids)

    def reap(self) -> int:
        """Delete the acked dead letters (inside the caller's transaction, or one of its own)."""
        done = list(self._acked)
        if done:
            with self._db.atomic():
                self._db.conn.executemany(
                    "DELETE FROM inbox_dead WHERE id = ?", [(row_id,) for row_id in done]
                )
            del self._acked[: len(done)]
        return len(done)

    def listing(self, limit: int = 100) -> list[dict[str, Any]]:
        rows = self._db.table("inbox_dead").rows_where(
            select="id, topic, payload, error, received_at", order_by="id DESC", limit=int(limit)
        )
        return [
            {
                "id": row["id"],
                "topic": row["topic"],
                "error": row["error"],
                "received_at": row["received_at"],
                "bytes": len(row["payload"]),
                "payload": bytes(row["payload"]).decode("utf-8", errors="replace"),
            }
            for row in rows
        ]

    def count(self) -> int:
        return int(self._db.table("inbox_dead").count_where())

    def prune(self, before: str, limit: int) -> int:
        """Up to `limit` dead letters received before `before`; returns how many."""
        cursor = self._db.execute(
            "DELETE FROM inbox_dead WHERE id IN"
            " (SELECT id FROM inbox_dead WHERE received_at < ? LIMIT ?)",
            [before, limit],
        )
        return int(cursor.rowcount)

    def wipe(self) -> int:
        return int(self._db.execute("DELETE FROM inbox_dead").rowcount)


if TYPE_CHECKING:  # mypy checks that it conforms
    _conforms: type[DurableQueue[DeadLetter, int]] = InboxDeadLetters

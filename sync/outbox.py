"""The pending-sync outbox (SPEC §3.2): writes owed to the cloud, oldest first by `write_id`.

Rows are written in the same transaction as the local change that caused them; a row's content
never changes after that (the same `write_id` is never sent with different content). A row
leaves only when the cloud acks it, or moves to the dead letters with the cloud's reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.db import Database
from a2a_common.ids import new_ulid
from a2a_common.queues import Handed
from a2a_common.sqlite import Migration
from a2a_common.writes import SyncWrite, WriteKind
from sync.core import Pending

if TYPE_CHECKING:
    from a2a_common.queues import DurableQueue


def _v1(db: Database) -> None:
    db.table("sync_outbox").create(
        {
            "write_id": str,
            "kind": str,
            "payload": str,
            "created_at": str,
            "attempts": int,
            "last_error": str,
        },
        pk="write_id",
        not_null={"kind", "payload", "created_at", "attempts"},
        defaults={"attempts": 0},
    )


def _v2(db: Database) -> None:
    db.table("sync_dead").create(
        {
            "write_id": str,
            "kind": str,
            "payload": str,
            "created_at": str,
            "attempts": int,
            "reason": str,
            "dead_at": str,
        },
        pk="write_id",
        not_null={"kind", "payload", "created_at", "attempts", "reason", "dead_at"},
    )
    db.table("sync_meta").create({"key": str, "value": str}, pk="key", not_null={"value"})


def _v3(db: Database) -> None:
    """`sync_outbox` keyed by `write_id` alone (WITHOUT ROWID; a ULID, so new rows go at the
    end): a queued write and its ack wrote two b-trees each (rows, the key's index), now one
    (issue 23); `sync_meta` likewise. WITHOUT ROWID: raw SQL (sqlite-utils' create() and
    transform() cannot make one)."""
    db.execute(
        """CREATE TABLE sync_outbox_keyed (
            write_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT) WITHOUT ROWID"""
    )
    db.execute(
        "INSERT INTO sync_outbox_keyed (write_id, kind, payload, created_at, attempts,"
        " last_error) SELECT write_id, kind, payload, created_at, attempts, last_error"
        " FROM sync_outbox"
    )
    db.execute("DROP TABLE sync_outbox")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE sync_outbox_keyed RENAME TO sync_outbox")
    db.execute(
        "CREATE TABLE sync_meta_keyed (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID"
    )
    db.execute("INSERT INTO sync_meta_keyed (key, value) SELECT key, value FROM sync_meta")
    db.execute("DROP TABLE sync_meta")
    db.execute("ALTER TABLE sync_meta_keyed RENAME TO sync_meta")


MIGRATIONS = [Migration("sync_0001_outbox", _v1)]
MIGRATIONS_2 = [Migration("sync_0002_dead_letters_meta", _v2)]
MIGRATIONS_3 = [Migration("sync_0003_outbox_without_rowid", _v3)]


def _v4(db: Database) -> None:
    """`sync_outbox` a rowid table without an index (issue 36, bytes per turn): as WITHOUT
    ROWID a row keeps at most 231 bytes in its 1 KiB leaf, so a turn's pair write (both texts,
    ~400-600 bytes) took an overflow page, freed and zeroed (secure_delete) when the cloud
    acked it a moment later, with the freelist trunk and page 1. A rowid row keeps 989. The
    rowid is the order the writes were put (ULIDs made in order, so `write_id` order too); the
    table holds the few writes between their commit and the cloud's ack, so a look-up by
    `write_id` scans it (an ack batch is one statement)."""
    db.execute(
        """CREATE TABLE sync_outbox_inline (
            id INTEGER PRIMARY KEY,
            write_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT)"""
    )
    db.execute(
        "INSERT INTO sync_outbox_inline (write_id, kind, payload, created_at, attempts,"
        " last_error) SELECT write_id, kind, payload, created_at, attempts, last_error"
        " FROM sync_outbox ORDER BY write_id"
    )
    db.execute("DROP TABLE sync_outbox")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE sync_outbox_inline RENAME TO sync_outbox")


MIGRATIONS_4 = [Migration("sync_0004_outbox_inline", _v4)]


def _chunks(values: list[str], size: int = 500) -> list[list[str]]:
    return [values[start : start + size] for start in range(0, len(values), size)]


class SyncOutbox:
    """Also a `DurableQueue` (a2a_common.queues): `put`, `hand_out` (the replayer's `oldest`),
    `ack` (deletes at once: `reap` has nothing left to do), `prune` (old dead letters)."""

    def __init__(self, *, db: Database, clock: Clock) -> None:
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

    def put(self, item: SyncWrite) -> str:
        """One `enqueue`d write (inside the change's transaction); returns its write id."""
        return self.enqueue([item])[0]

    def pending(self) -> int:
        return int(self._db.table("sync_outbox").count_where())

    def count(self) -> int:
        """Writes owed (dead letters are not: `dead_count`)."""
        return self.pending()

    def hand_out(self, limit: int) -> list[Handed[str, SyncWrite]]:
        """`oldest`, as the writes were put: the same ones again until acked or dead."""
        return [
            Handed(p.write_id, SyncWrite(cast(WriteKind, p.kind), p.payload))
            for p in self.oldest(limit)
        ]

    def reap(self) -> int:
        """Nothing: `ack` and `kill` delete in the caller's transaction."""
        return 0

    def prune(self, before: str, limit: int) -> int:
        """Up to `limit` dead letters that died before `before`; a write still owed is never
        pruned (it leaves when acked or dead). Returns how many."""
        cursor = self._db.execute(
            "DELETE FROM sync_dead WHERE write_id IN"
            " (SELECT write_id FROM sync_dead WHERE dead_at < ? ORDER BY dead_at LIMIT ?)",
            [before, limit],
        )
        return int(cursor.rowcount)

    def oldest(self, limit: int) -> list[Pending]:
        rows = self._db.execute(
            "SELECT write_id, kind, created_at, payload FROM sync_outbox ORDER BY id LIMIT ?",
            [limit],
        ).fetchall()
        return [Pending(w, k, c, json.loads(p)) for w, k, c, p in rows]

    def ack(self, write_ids: Iterable[str]) -> None:
        """Delete them, inside the caller's transaction (or one of its own: a bare executemany
        outside one would leave the driver's implicit transaction open, never committed)."""
        with self._db.atomic():  # no index on write_id (sync_0004): one scan a chunk
            for chunk in _chunks(list(write_ids)):
                marks = ",".join("?" * len(chunk))
                self._db.execute(f"DELETE FROM sync_outbox WHERE write_id IN ({marks})", chunk)

    def kill(self, dead: Iterable[tuple[str, str]]) -> None:
        """Move rejected writes to the dead letters, with the cloud's reason."""
        now = iso(self._clock.now())
        for write_id, reason in dead:
            self._db.execute(
                "INSERT OR REPLACE INTO sync_dead (write_id, kind, payload, created_at, attempts,"
                " reason, dead_at) SELECT write_id, kind, payload, created_at, attempts + 1, ?, ?"
                " FROM sync_outbox WHERE write_id = ?",
                [reason, now, write_id],
            )
            self._db.execute("DELETE FROM sync_outbox WHERE write_id = ?", [write_id])

    def attempted(self, write_ids: Iterable[str], error: str | None) -> None:
        for chunk in _chunks(list(write_ids)):  # one scan a chunk (no index on write_id)
            marks = ",".join("?" * len(chunk))
            self._db.execute(
                "UPDATE sync_outbox SET attempts = attempts + 1, last_error = ?"
                f" WHERE write_id IN ({marks})",
                [error, *chunk],
            )

    def drop_reports(self, workflow_ids: list[str]) -> int:
        """Unsent (and dead-lettered) `task_terminal` reports of these workflows (forget --all
        removed them); returns how many."""
        dropped = 0
        for chunk in _chunks(workflow_ids):
            marks = ",".join("?" * len(chunk))
            for table in ("sync_outbox", "sync_dead"):
                dropped += int(
                    self._db.execute(
                        f"DELETE FROM {table} WHERE kind = 'task_terminal'"
                        f" AND json_extract(payload, '$.workflow_id') IN ({marks})",
                        chunk,
                    ).rowcount
                )
        return dropped

    def drop_memory(
        self,
        *,
        pairs: list[str],
        sessions: list[str],
        items: list[str],
        keys: list[str],
        everything: bool = False,
    ) -> int:
        """Unsent (and dead-lettered) memory writes about forgotten things; returns how many.
        `task_terminal` and earlier `memory_deletion` writes carry no memory and stay."""
        memory_kinds = "('short_term_pair', 'profile_candidate', 'profile_confirmed')"
        dropped = 0
        for table in ("sync_outbox", "sync_dead"):
            if everything:
                dropped += int(
                    self._db.execute(f"DELETE FROM {table} WHERE kind IN {memory_kinds}").rowcount
                )
                continue
            for field, values in (
                ("pair_id", pairs),
                ("session_id", sessions),
                ("item_id", items),
                ("key", keys),
            ):
                if not values:
                    continue
                marks = ",".join("?" * len(values))
                dropped += int(
                    self._db.execute(
                        f"DELETE FROM {table} WHERE kind IN {memory_kinds}"
                        f" AND json_extract(payload, '$.{field}') IN ({marks})",
                        values,
                    ).rowcount
                )
            if pairs:  # profile writes whose provenance names a forgotten pair
                marks = ",".join("?" * len(pairs))
                dropped += int(
                    self._db.execute(
                        f"DELETE FROM {table} WHERE kind IN {memory_kinds} AND EXISTS (SELECT 1"
                        f" FROM json_each({table}.payload, '$.source_pair_ids')"
                        f" WHERE value IN ({marks}))",
                        pairs,
                    ).rowcount
                )
        return dropped

    def requeue_dead(self) -> int:
        """Dead letters back into the outbox, with their own write_id and content, among the
        writes owed in `write_id` order (the outbox hands out in rowid order: they are put
        again together, and the old rows go)."""
        with self._db.atomic():
            last = self._db.execute("SELECT coalesce(max(id), 0) FROM sync_outbox").fetchone()[0]
            moved = self._db.execute(
                "INSERT INTO sync_outbox (write_id, kind, payload, created_at, attempts,"
                " last_error) SELECT write_id, kind, payload, created_at, attempts, last_error"
                " FROM (SELECT write_id, kind, payload, created_at, attempts, last_error"
                " FROM sync_outbox UNION ALL SELECT write_id, kind, payload, created_at,"
                " attempts, reason FROM sync_dead WHERE write_id NOT IN"
                " (SELECT write_id FROM sync_outbox)) ORDER BY write_id"
            ).rowcount
            owed = self._db.execute("DELETE FROM sync_outbox WHERE id <= ?", [last]).rowcount
            self._db.execute("DELETE FROM sync_dead")
        return int(moved) - int(owed)

    def dead_count(self) -> int:
        return int(self._db.table("sync_dead").count_where())

    def dead_listing(self, limit: int) -> list[dict[str, Any]]:
        """Dead letters, newest first: ids, kind, tries and reason — never the payload."""
        return list(
            self._db.table("sync_dead").rows_where(
                select="write_id, kind, created_at, attempts, reason, dead_at",
                order_by="dead_at DESC, write_id",
                limit=int(limit),
            )
        )

    def oldest_created(self) -> str | None:
        row = self._db.execute("SELECT min(created_at) FROM sync_outbox").fetchone()
        return row[0] if row else None

    def warnings(
        self, now: str, *, warn_pending: int, warn_age_s: int, age_of: Callable[[str, str], float]
    ) -> list[str]:
        """Why an operator should look: too many unsent writes, or too old ones."""
        out = []
        pending = self.pending()
        if pending > warn_pending:
            out.append(f"sync outbox holds {pending} writes (> {warn_pending})")
        oldest = self.oldest_created()
        if oldest is not None and age_of(now, oldest) > warn_age_s:
            out.append(f"oldest unsent write is from {oldest} (> {warn_age_s} s old)")
        dead = self.dead_count()
        if dead:
            out.append(f"{dead} dead-lettered sync writes")
        return out

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM sync_meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO sync_meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )

    def clear_meta(self, key: str) -> None:
        self._db.execute("DELETE FROM sync_meta WHERE key = ?", [key])


if TYPE_CHECKING:  # mypy checks that it conforms
    _conforms: type[DurableQueue[SyncWrite, str]] = SyncOutbox

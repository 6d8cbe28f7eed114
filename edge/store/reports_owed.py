"""Terminal workflow reports owed to the cloud, on disk from the commit that ended the workflow
until the cloud took them (SPEC §3.3, §6: nothing lost at a power cut).

The reporter sends them directly (`/v1/a2a/workflow/events`); this table is what survives the
process meanwhile. A delivered report's row is deleted with the next commit (a crash before
that sends it once more, through the replay, with the same `request_id`: the cloud can tell).
A report the cloud refused, and every row a stop or a crash left, moves to the sync outbox as a
`task_terminal` write and is replayed from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from a2a_common import jsonx
from a2a_common.clock import parse_iso
from a2a_common.db import Database
from a2a_common.ids import ulid_floor
from a2a_common.queues import Handed
from a2a_common.sqlite import Migration
from a2a_common.writes import SyncWrite
from sync import SyncOutbox


def _v1(db: Database) -> None:
    db.execute(
        """CREATE TABLE reports_owed (
            request_id TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            payload TEXT NOT NULL) WITHOUT ROWID"""
    )


MIGRATIONS = [Migration("edge_0008_reports_owed", _v1)]


def _v2(db: Database) -> None:
    """A rowid table, no index (issue 36): WITHOUT ROWID keeps at most 231 bytes of a row in
    its 1 KiB leaf, so every report (300-400 bytes) took an overflow page, freed and zeroed
    (secure_delete) once delivered a second later. The table holds the few reports between
    their commit and the cloud's answer: a look-up by `request_id` scans them."""
    db.execute(
        """CREATE TABLE reports_owed_inline (
            id INTEGER PRIMARY KEY,
            request_id TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            payload TEXT NOT NULL)"""
    )
    db.execute(
        "INSERT INTO reports_owed_inline (request_id, workflow_id, payload)"
        " SELECT request_id, workflow_id, payload FROM reports_owed ORDER BY request_id"
    )
    db.execute("DROP TABLE reports_owed")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE reports_owed_inline RENAME TO reports_owed")


MIGRATIONS_2 = [Migration("edge_0010_reports_owed_inline", _v2)]

if TYPE_CHECKING:
    from a2a_common.queues import DurableQueue


class OwedReports:
    """Also a `DurableQueue` (a2a_common.queues) of report bodies by `request_id`: `put` is
    `owe`, `ack` is `delivered`; `prune` moves stale rows to the replay."""

    def __init__(self, *, db: Database, sync_outbox: SyncOutbox) -> None:
        self._db = db
        self.sync = sync_outbox
        self._delivered: list[str] = []  # request_ids the next `reap()` deletes

    def owe(self, body: dict[str, Any]) -> None:
        """Inside the unit of work that ended the workflow."""
        self._db.execute("DELETE FROM reports_owed WHERE request_id = ?", [body["request_id"]])
        self._db.execute(
            "INSERT INTO reports_owed (request_id, workflow_id, payload) VALUES (?, ?, ?)",
            [body["request_id"], str(body.get("workflow_id", "")), jsonx.dumps(body)],
        )

    def put(self, item: dict[str, Any]) -> str:
        """`owe`; returns the body's `request_id`."""
        self.owe(item)
        return str(item["request_id"])

    def hand_out(self, limit: int) -> list[Handed[str, dict[str, Any]]]:
        """Owed bodies not delivered, oldest first (`request_id`s are ULIDs)."""
        skip = set(self._delivered)
        rows = self._db.execute(
            "SELECT request_id, payload FROM reports_owed ORDER BY request_id LIMIT ?",
            [limit + len(skip)],
        ).fetchall()
        owed = [Handed(str(r), json.loads(p)) for r, p in rows if r not in skip]
        return owed[:limit]

    def ack(self, ids: Iterable[str]) -> None:
        for request_id in ids:
            self.delivered(request_id)

    def count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM reports_owed").fetchone()[0])

    def prune(self, before: str, limit: int) -> int:
        """Up to `limit` rows owed since before `before` (by their ULID `request_id`) move to
        the replay, as `to_replay` (a report the worker never settled is not left behind);
        inside a unit of work. Returns how many."""
        rows = self._db.execute(
            "SELECT request_id FROM reports_owed WHERE request_id < ? ORDER BY request_id LIMIT ?",
            [ulid_floor(parse_iso(before)), limit],
        ).fetchall()
        return self.to_replay([row[0] for row in rows]) if rows else 0

    def still_owed(self, request_id: str) -> bool:
        """False once forgotten (`drop`), moved to the sync outbox or delivered: nothing to
        send."""
        return bool(self.owed_among([request_id]))

    def owed_among(self, request_ids: list[str]) -> set[str]:
        """Those of `request_ids` still to send (`still_owed`), in one statement."""
        delivered = set(self._delivered)
        wanted = [r for r in request_ids if r not in delivered]
        if not wanted:
            return set()
        marks = ",".join("?" * len(wanted))
        rows = self._db.execute(
            f"SELECT request_id FROM reports_owed WHERE request_id IN ({marks})", wanted
        ).fetchall()
        return {str(row[0]) for row in rows}

    def delivered(self, request_id: str) -> None:
        self._delivered.append(request_id)

    @property
    def reapable(self) -> int:
        return len(self._delivered)

    def reap(self) -> int:
        """Delete the delivered rows (inside the caller's transaction, or one of its own)."""
        done = list(self._delivered)
        if done:
            with self._db.atomic():
                self._db.conn.executemany(
                    "DELETE FROM reports_owed WHERE request_id = ?", [(r,) for r in done]
                )
            del self._delivered[: len(done)]
        return len(done)

    def to_replay(self, request_ids: Iterable[str] | None = None) -> int:
        """These rows (every row when None) become `task_terminal` writes of the sync outbox;
        call inside a unit of work. Returns how many moved."""
        self.reap()
        if request_ids is None:
            rows = self._db.execute(
                "SELECT request_id, payload FROM reports_owed ORDER BY request_id"
            ).fetchall()
        else:
            ids = list(request_ids)
            marks = ",".join("?" * len(ids))
            rows = self._db.execute(
                f"SELECT request_id, payload FROM reports_owed WHERE request_id IN ({marks})"
                " ORDER BY request_id",
                ids,
            ).fetchall()
        self.sync.enqueue(SyncWrite("task_terminal", json.loads(row[1])) for row in rows)
        self._db.conn.executemany(
            "DELETE FROM reports_owed WHERE request_id = ?", [(row[0],) for row in rows]
        )
        return len(rows)

    def drop(self, workflow_ids: list[str]) -> int:
        """Owed reports of these workflows (forget --all removed them); returns how many."""
        dropped = 0
        for start in range(0, len(workflow_ids), 500):
            chunk = workflow_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            dropped += int(
                self._db.execute(
                    f"DELETE FROM reports_owed WHERE workflow_id IN ({marks})", chunk
                ).rowcount
            )
        return dropped


if TYPE_CHECKING:  # mypy checks that it conforms
    _conforms: type[DurableQueue[dict[str, Any], str]] = OwedReports

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
from typing import Any

from a2a_common import jsonx
from a2a_common.db import Database
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


class OwedReports:
    def __init__(self, *, db: Database, sync_outbox: SyncOutbox) -> None:
        self._db = db
        self.sync = sync_outbox
        self._delivered: list[str] = []  # request_ids the next `reap()` deletes

    def owe(self, body: dict[str, Any]) -> None:
        """Inside the unit of work that ended the workflow."""
        self._db.execute(
            "INSERT OR REPLACE INTO reports_owed (request_id, workflow_id, payload)"
            " VALUES (?, ?, ?)",
            [body["request_id"], str(body.get("workflow_id", "")), jsonx.dumps(body)],
        )

    def still_owed(self, request_id: str) -> bool:
        """False once forgotten (`drop`) or moved to the sync outbox: nothing to send."""
        row = self._db.execute(
            "SELECT 1 FROM reports_owed WHERE request_id = ?", [request_id]
        ).fetchone()
        return row is not None

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

"""Workflows on disk: one row per workflow (its JSON document plus the columns queries need) and
a trace of everything that happened to it, one row per change (taskmanager/trace_rows.py).
Writes run inside the caller's transaction."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.sqlite import Migration
from taskmanager.board import Board
from taskmanager.model import (
    TERMINAL_STEP,
    TERMINAL_WORKFLOW,
    Workflow,
    full_json,
    workflow_from_json,
    workflow_to_json,
)
from taskmanager.redact import fold, fragments
from taskmanager.trace_rows import Entry, Row, TraceBuffer, expand

TERMINAL_SQL = "('completed', 'failed', 'cancelled', 'rejected')"


def _v1(db: Database) -> None:
    workflows = db.table("workflows").create(
        {
            "workflow_id": str,
            "status": str,
            "etag": int,
            "source": str,
            "turn_id": str,
            "reason": str,
            "doc": str,
            "created_at": str,
            "updated_at": str,
        },
        pk="workflow_id",
        not_null={"status", "etag", "source", "doc", "created_at", "updated_at"},
    )
    workflows.create_index(["status"], index_name="workflows_status")
    workflows.create_index(["created_at"], index_name="workflows_created")
    db.execute(  # AUTOINCREMENT: raw SQL
        """CREATE TABLE workflow_trace (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            workflow_id TEXT NOT NULL,
            ts TEXT NOT NULL,
            etag INTEGER,
            kind TEXT NOT NULL,
            detail TEXT NOT NULL)"""
    )
    db.table("workflow_trace").create_index(["workflow_id", "id"], index_name="workflow_trace_wf")


MIGRATIONS = [Migration("taskmanager_0001_workflows_trace", _v1)]


def _v2(db: Database) -> None:
    db.table("workflows").create_index(["status", "updated_at"], index_name="workflows_ended")


MIGRATIONS_2 = [Migration("taskmanager_0002_workflows_ended_index", _v2)]


def _v3(db: Database) -> None:
    """Fewer pages per commit (issue 23): `workflows_status` goes, and `workflows_ended`
    holds ended workflows only (its queries name the same statuses), so a running workflow's
    every change no longer moves its entry; trace ids are plain integer ids — an
    AUTOINCREMENT rewrote `sqlite_sequence`'s page in every commit that traced. A new row's id
    is still larger than every row left (the largest + 1), so `ORDER BY id` keeps its order."""
    workflows = db.table("workflows")
    workflows.drop_index("workflows_status")
    workflows.drop_index("workflows_ended")
    db.execute(  # a partial index: raw SQL
        f"CREATE INDEX workflows_ended ON workflows (updated_at) WHERE status IN {TERMINAL_SQL}"
    )
    # the rebuild by hand, not transform(): it keeps the column order `SELECT *` copies by,
    # zeroes the old pages (secure_delete) and clears the table's sqlite_sequence row
    db.table("workflow_trace_plain").create(
        {"id": int, "workflow_id": str, "ts": str, "etag": int, "kind": str, "detail": str},
        pk="id",
        not_null={"workflow_id", "ts", "kind", "detail"},
    )
    db.execute("INSERT INTO workflow_trace_plain SELECT * FROM workflow_trace")
    db.execute("DROP TABLE workflow_trace")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE workflow_trace_plain RENAME TO workflow_trace")
    db.table("workflow_trace").create_index(["workflow_id", "id"], index_name="workflow_trace_wf")
    db.execute(
        "DELETE FROM sqlite_sequence WHERE name IN ('workflow_trace', 'workflow_trace_plain')"
    )


MIGRATIONS_3 = [Migration("taskmanager_0004_trace_plain_ids", _v3)]


def _without_ended_args(doc: dict[str, Any]) -> bool:
    """A step's args are kept only until it ends (docs/design.md "A step's words live as long
    as the step"): an ended step's are emptied in `doc`. True when any was not yet."""
    cleared = False
    for step in doc.get("steps", []):
        if step.get("status") in TERMINAL_STEP and step.get("args"):
            step["args"] = {}
            cleared = True
    return cleared


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*(str(k) for k in value), *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


class WorkflowStore:
    def __init__(self, *, db: Database) -> None:
        self._db = db
        # workflows whose words a forget reached while a step of theirs still needed them:
        # id -> its steps ended when last written. When another of them ends (its args
        # cleared), the WAL's older pages still hold the args: `take_scrub()` says a
        # TRUNCATE is owed once the unit commits. Kept in memory; every workflow read back
        # from disk counts as marked (a forget before a restart is not remembered).
        self._marked: dict[str, frozenset[str]] = {}
        self._scrub = False
        self._trace = TraceBuffer(self._write_trace)

    def load_active(self) -> Board:
        rows = self._db.execute(
            f"SELECT doc FROM workflows WHERE status NOT IN {TERMINAL_SQL} ORDER BY created_at"
        ).fetchall()
        board = Board.of([workflow_from_json(json.loads(doc)) for (doc,) in rows])
        for wf in board.workflows.values():
            self._mark(wf.workflow_id, {s.step_id for s in wf.steps if s.terminal})
        return board

    def _mark(self, workflow_id: str, ended: set[str]) -> None:
        self._marked[workflow_id] = self._marked.get(workflow_id, frozenset()) | ended

    def take_scrub(self) -> bool:
        """A marked workflow's step ended since the last call: the WAL is to be truncated
        after the commit (SPEC 5.5), so no older page of its args stays in it."""
        owed, self._scrub = self._scrub, False
        return owed

    def _stored_doc(self, wf: Workflow) -> dict[str, Any]:
        doc = workflow_to_json(wf)
        seen = self._marked.get(wf.workflow_id)
        if seen is not None:
            ended = {s.step_id for s in wf.steps if s.terminal}
            self._scrub |= any(s.args for s in wf.steps if s.step_id in ended - seen)
            if wf.terminal:
                del self._marked[wf.workflow_id]
            else:
                self._marked[wf.workflow_id] = frozenset(ended | seen)
        _without_ended_args(doc)
        return doc

    def save(self, wf: Workflow, now: datetime) -> None:
        created = iso(wf.created_at or now)
        self._db.execute(
            "INSERT INTO workflows (workflow_id, status, etag, source, turn_id, reason, doc,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (workflow_id) DO UPDATE SET status = excluded.status,"
            " etag = excluded.etag, reason = excluded.reason, doc = excluded.doc,"
            " updated_at = excluded.updated_at",
            [
                wf.workflow_id,
                wf.status,
                wf.etag,
                wf.source,
                wf.turn_id,
                wf.cancel_reason or wf.end_reason,
                jsonx.dumps(self._stored_doc(wf)),
                created,
                iso(now),
            ],
        )

    def save_rejected(
        self,
        workflow_id: str,
        reason: str,
        request: Any,
        source: str,
        turn_id: str | None,
        now: datetime,
    ) -> None:
        plan_id = request.get("plan_id") if isinstance(request, dict) else None
        doc = {
            "workflow_id": workflow_id,
            "plan_id": plan_id if isinstance(plan_id, str) else None,
            "status": "rejected",
            "reason": reason,
            "request": request,
            "steps": [],
        }
        self._db.execute(
            "INSERT INTO workflows (workflow_id, status, etag, source, turn_id, reason, doc,"
            " created_at, updated_at) VALUES (?, 'rejected', 1, ?, ?, ?, ?, ?, ?)",
            [workflow_id, source, turn_id, reason, jsonx.dumps(doc), iso(now), iso(now)],
        )

    def exists(self, workflow_id: str) -> bool:
        row = self._db.execute("SELECT 1 FROM workflows WHERE workflow_id = ?", [workflow_id])
        return row.fetchone() is not None

    def prune_ended(self, before: str, limit: int) -> int:
        """Delete up to `limit` ended workflows last changed before `before`, traces and all;
        inside the caller's transaction. Returns how many."""
        ids = [
            r[0]
            for r in self._db.execute(
                # the statuses as literals: the same words as `workflows_ended`'s WHERE
                f"SELECT workflow_id FROM workflows WHERE status IN {TERMINAL_SQL}"
                " AND updated_at < ? LIMIT ?",
                [before, limit],
            ).fetchall()
        ]
        if ids:
            marks = ",".join("?" * len(ids))
            self._db.execute(f"DELETE FROM workflow_trace WHERE workflow_id IN ({marks})", ids)
            self._db.execute(f"DELETE FROM workflows WHERE workflow_id IN ({marks})", ids)
        return len(ids)

    def forget_all(self) -> tuple[list[str], int]:
        """`forget --all` (SPEC 5.5), inside the caller's transaction: every ended workflow
        with its trace, and the trace so far of the active ones (they keep running). Returns
        the ended ids removed and how many trace rows went."""
        ids = [
            r[0]
            for r in self._db.execute(
                "SELECT workflow_id FROM workflows WHERE status IN"
                f" ({','.join('?' * len(TERMINAL_WORKFLOW))})",
                sorted(TERMINAL_WORKFLOW),
            ).fetchall()
        ]
        traces = int(self._db.execute("DELETE FROM workflow_trace").rowcount)
        self._db.execute(
            f"DELETE FROM workflows WHERE status IN ({','.join('?' * len(TERMINAL_WORKFLOW))})",
            sorted(TERMINAL_WORKFLOW),
        )
        for workflow_id, doc in self._docs(f"status NOT IN {TERMINAL_SQL}"):
            self._forget_active(workflow_id, doc)
        return ids, traces

    def _docs(self, where: str, params: list[Any] | None = None) -> list[tuple[str, Any]]:
        rows = self._db.execute(
            f"SELECT workflow_id, doc FROM workflows WHERE {where}", params or []
        ).fetchall()
        return [(str(workflow_id), json.loads(doc)) for workflow_id, doc in rows]

    def _forget_active(self, workflow_id: str, doc: dict[str, Any]) -> None:
        """An active workflow a forget reached: the args of its ended steps go now (a doc
        written before they were cleared at the end), the rest when each step ends."""
        if _without_ended_args(doc):
            self._db.execute(
                "UPDATE workflows SET doc = ? WHERE workflow_id = ?",
                [jsonx.dumps(doc), workflow_id],
            )
        ended = {s["step_id"] for s in doc.get("steps", []) if s.get("status") in TERMINAL_STEP}
        self._mark(workflow_id, ended)

    def forget_words(self, turn_ids: list[str], texts: list[str]) -> tuple[list[str], int]:
        """A forget of some turns (SPEC 5.5), inside the caller's transaction: every workflow
        those turns asked for, or quoting a fragment of their `texts` (as redact.py finds
        one) in what it stores, loses its trace; an ended one goes whole, an active one keeps
        running with its ended steps' args cleared now and the rest cleared as each ends.
        Returns the ended ids removed and how many trace rows went."""
        found = [p.pattern for p in (fragments(t) for t in texts) if p is not None]
        # one expression for every text (each is an alternation without groups), each string
        # folded once: a forget of many turns over many kept workflows was texts x strings folds
        quote = re.compile("|".join(f"(?:{p})" for p in found)) if found else None
        turns = set(turn_ids)
        hit: dict[str, str | None] = {}  # workflow id -> its status (None: a trace alone)
        for workflow_id, status, turn_id, doc in self._db.execute(
            "SELECT workflow_id, status, turn_id, doc FROM workflows"
        ).fetchall():
            quoted = quote is not None and any(
                quote.search(fold(s)) for s in _strings(json.loads(doc))
            )
            if turn_id in turns or quoted:
                hit[str(workflow_id)] = str(status)
        if quote is not None:  # a trace may quote what the document no longer holds (an ask)
            for workflow_id, detail, status in self._db.execute(
                "SELECT t.workflow_id, t.detail, w.status FROM workflow_trace t"
                " LEFT JOIN workflows w USING (workflow_id)"
            ).fetchall():
                if str(workflow_id) not in hit and quote.search(fold(detail)):
                    hit[str(workflow_id)] = status
        if not hit:
            return [], 0
        ids = sorted(hit)
        marks = ",".join("?" * len(ids))
        traces = int(
            self._db.execute(
                f"DELETE FROM workflow_trace WHERE workflow_id IN ({marks})", ids
            ).rowcount
        )
        ended = [w for w in ids if hit[w] in TERMINAL_WORKFLOW]
        if ended:
            gone = ",".join("?" * len(ended))
            self._db.execute(f"DELETE FROM workflows WHERE workflow_id IN ({gone})", ended)
        for workflow_id, doc in self._docs(
            f"workflow_id IN ({marks}) AND status NOT IN {TERMINAL_SQL}", ids
        ):
            self._forget_active(workflow_id, doc)
        return ended, traces

    def accepted(self, workflow_id: str) -> bool:
        """The workflow was accepted once (it may have ended since); a rejected one was not."""
        row = self._db.execute("SELECT status FROM workflows WHERE workflow_id = ?", [workflow_id])
        found = row.fetchone()
        return found is not None and found[0] != "rejected"

    def last_seq(self, task_id: str) -> int | None:
        """The last callback `seq` applied to a task on disk; None when no such task."""
        workflow_id, _, step_id = task_id.rpartition(":")
        row = self._db.execute(
            "SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id]
        ).fetchone()
        if row is None:
            return None
        for step in json.loads(row[0]).get("steps", []):
            if step.get("step_id") == step_id:
                return int(step.get("last_seq") or 0)
        return None

    def note_seq(self, task_id: str, seq: int) -> None:
        """Record `seq` as applied to an ended task (its cancel's confirmation, SPEC 4.2):
        bookkeeping of the document, not a change of it (its etag stays)."""
        workflow_id, _, step_id = task_id.rpartition(":")
        row = self._db.execute(
            "SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id]
        ).fetchone()
        if row is None:
            return
        doc = json.loads(row[0])
        for step in doc.get("steps", []):
            if step.get("step_id") == step_id and int(step.get("last_seq") or 0) < seq:
                step["last_seq"] = seq
                self._db.execute(
                    "UPDATE workflows SET doc = ? WHERE workflow_id = ?",
                    [jsonx.dumps(doc), workflow_id],
                )

    def trace(
        self, workflow_id: str, now: datetime, etag: int | None, kind: str, detail: dict[str, Any]
    ) -> None:
        """One entry of the workflow's trace: written with the rest of its change when a
        `change()` is open, else at once (a row of its own)."""
        self._trace.record(Entry(workflow_id, iso(now), etag, kind, detail))

    @contextmanager
    def change(self) -> Iterator[None]:
        """One change: every entry traced in it goes into one row per workflow, written when
        the outermost `change()` closes (nested ones join it), inside the transaction open then
        — or one of its own when none is open. An exception drops the entries of its level."""
        if self._db.conn.in_transaction:
            with self._trace.grouped():
                yield
            return
        with self._db.atomic(), self._trace.grouped():
            yield

    def _write_trace(self, rows: list[Row]) -> None:
        sql = (
            "INSERT INTO workflow_trace (workflow_id, ts, etag, kind, detail)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        params = [(r.workflow_id, r.ts, r.etag, r.kind, jsonx.dumps(r.detail)) for r in rows]
        if len(params) == 1:
            self._db.execute(sql, list(params[0]))
        else:
            self._db.conn.executemany(sql, params)

    def get(self, workflow_id: str) -> dict[str, Any] | None:
        """The workflow's document with every field (as stored before issue 36, whatever the
        row leaves out); a rejected request's as it was stored."""
        row = self._db.execute(
            "SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id]
        ).fetchone()
        if row is None:
            return None
        doc = json.loads(row[0])
        return doc if doc.get("status") == "rejected" else full_json(workflow_from_json(doc))

    def load(self, workflow_id: str) -> Workflow | None:
        """The workflow as stored (active or ended); None when unknown, pruned or rejected."""
        row = self._db.execute(
            "SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id]
        ).fetchone()
        doc = json.loads(row[0]) if row else None
        return workflow_from_json(doc) if doc and doc.get("status") != "rejected" else None

    def timeline(self, workflow_id: str) -> list[dict[str, Any]]:
        """Every entry of the workflow's trace in order, a change's row expanded into its
        entries (rows of one entry, and those written before issue 36, read as they are)."""
        rows = self._db.execute(
            "SELECT ts, etag, kind, detail FROM workflow_trace WHERE workflow_id = ? ORDER BY id",
            [workflow_id],
        ).fetchall()
        return [entry for row in rows for entry in expand(*row)]

    def counts_by_status(self) -> dict[str, int]:
        """status -> how many workflows have it (only statuses that occur), ordered by status."""
        rows = self._db.execute(
            "SELECT status, count(*) FROM workflows GROUP BY status ORDER BY status"
        ).fetchall()
        return {str(status): int(n) for status, n in rows}

    def active_count(self) -> int:
        """Workflows not yet in a terminal status."""
        return sum(n for s, n in self.counts_by_status().items() if s not in TERMINAL_WORKFLOW)

    def listing(self, limit: int = 50) -> list[dict[str, Any]]:
        return list(
            self._db.table("workflows").rows_where(
                select="workflow_id, status, etag, source, turn_id, reason, created_at, updated_at",
                order_by="created_at DESC, workflow_id",
                limit=int(limit),
            )
        )

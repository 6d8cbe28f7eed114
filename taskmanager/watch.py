"""The cancels waiting for confirmation (SPEC §4.2), on disk and in memory: one row per
cancelled task whose body is not yet confirmed stopped, with its window's end as a wall
instant (re-armed after a restart, fired at once when late). Writes run inside the caller's
transaction; the transitions are `taskmanager/confirm.py`'s."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from a2a_common.db import Database
from a2a_common.sqlite import Migration
from taskmanager.catalog import Catalog
from taskmanager.confirm import (
    STOP_SUFFIX,
    Confirmed,
    Unconfirmed,
    Watch,
    on_callback,
    on_due,
    verdict,
    watch_for,
)
from taskmanager.derive import report_body
from taskmanager.events import CancelTask, Command, Emit, Report
from taskmanager.model import Workflow

log = logging.getLogger(__name__)


def _create(db: Database) -> None:
    db.table("cancel_watch").create(
        {"task_id": str, "workflow_id": str, "phase": str, "due_at": str, "doc": str},
        pk="task_id",
        not_null={"workflow_id", "phase", "doc"},
    )


MIGRATIONS = [Migration("taskmanager_0003_cancel_confirm", _create)]
Message = CancelTask | Command | Emit


@dataclass
class Outcome:
    """What a window's end or a confirmation causes, for the TaskManager to carry out."""

    messages: list[Message] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    traces: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # wf, kind, detail


class CancelWatches:
    def __init__(self, *, db: Database, catalog: Catalog, window_s: float) -> None:
        self._db = db
        self._catalog = catalog
        self.window_s = window_s
        self.watches: dict[str, Watch] = {}

    def load(self) -> int:
        rows = self._db.execute("SELECT doc FROM cancel_watch").fetchall()
        self.watches = {w.task_id: w for w in (Watch.from_json(json.loads(d)) for (d,) in rows)}
        for task_id, watch in self.watches.items():  # a row written before it kept its resource
            spec = self._catalog.get(watch.capability_id, watch.operation_id)
            if watch.resource is None and spec is not None and spec.resource:
                self.watches[task_id] = replace(watch, resource=spec.resource)
        return len(self.watches)

    def find(self, task_id: str) -> Watch | None:
        return self.watches.get(task_id.removesuffix(STOP_SUFFIX))

    def rearm(self, task_ids: set[str], now: datetime) -> None:
        """These tasks' cancels are still owed: their first window starts again from `now`."""
        for task_id in sorted(task_ids & set(self.watches)):
            watch = self.watches[task_id]
            if watch.phase == "sent":
                again = replace(watch, due_at=now + timedelta(seconds=self.window_s))
                self.watches[task_id] = again
                try:  # best effort: a reload runs after failed writes too; a lost re-arm only
                    with self._db.atomic():  # makes the window end sooner after a restart
                        self._save(again)
                except Exception as exc:
                    log.warning("cancel window of %s re-armed in memory only: %s", task_id, exc)

    def next_due(self) -> datetime | None:
        return min((w.due_at for w in self.watches.values() if w.due_at), default=None)

    def alarms(self) -> list[str]:
        """The escalated tasks: the body was never confirmed stopped."""
        return sorted(t for t, w in self.watches.items() if w.phase == "escalated")

    def verdict(self, task_id: str, seq: int, status: str) -> str | None:
        watch = self.find(task_id)
        return verdict(watch, task_id, seq, status) if watch else None

    def _save(self, watch: Watch) -> None:
        self._db.execute(
            "INSERT INTO cancel_watch (task_id, workflow_id, phase, due_at, doc)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET phase = excluded.phase,"
            " due_at = excluded.due_at, doc = excluded.doc",
            [
                watch.task_id,
                watch.workflow_id,
                watch.phase,
                iso(watch.due_at) if watch.due_at else None,
                jsonx.dumps(watch.to_json()),
            ],
        )

    def _drop(self, task_id: str) -> None:
        self._db.execute("DELETE FROM cancel_watch WHERE task_id = ?", [task_id])

    def record(self, cancels: Iterable[CancelTask], changed: list[Workflow], now: datetime) -> None:
        """The cancels just queued: each starts a window (a task already watched keeps its
        own). Inside the caller's transaction; the caller swaps `watches` on success."""
        by_id = {wf.workflow_id: wf for wf in changed}
        for cancel in cancels:
            task_id = str(cancel.payload["task_id"])
            if task_id in self.watches:
                continue
            workflow_id, _, step_id = task_id.rpartition(":")
            wf = by_id.get(workflow_id)
            step = wf.step(step_id) if wf else None
            operation = step.operation_id if step else ""
            last = step.last_seq if step else 0
            watch = watch_for(cancel, step_id, operation, last, now, self.window_s)
            watch = replace(
                watch,
                resource=step.resource if step else None,
                workflow_status=wf.status if wf else None,
                etag=wf.etag if wf else None,
            )  # as `_follow` would make it: one write per new watch, not two
            self._save(watch)
            self.watches[task_id] = watch
        self._follow(by_id)

    def _follow(self, by_id: dict[str, Workflow]) -> None:
        """Keep each watch's copy of its workflow's status and etag current: once the workflow
        is pruned (its alarm outlived `keep_ended_days`), a body event says those, never
        invented ones."""
        for task_id, watch in list(self.watches.items()):
            wf = by_id.get(watch.workflow_id)
            if wf is not None and (watch.workflow_status, watch.etag) != (wf.status, wf.etag):
                kept = replace(watch, workflow_status=wf.status, etag=wf.etag)
                self._save(kept)
                self.watches[task_id] = kept

    def fences(self) -> dict[str, str]:
        """resource -> cancelled task holding it until its stop is confirmed (SPEC 4.2)."""
        return {w.resource: t for t, w in sorted(self.watches.items()) if w.resource}

    def due(self, now: datetime, workflow_of: Callable[[str], Workflow | None]) -> Outcome:
        out = Outcome()
        for task_id, watch in sorted(self.watches.items()):
            stop = self._catalog.safe_stop(watch.capability_id)
            new, effects = on_due(watch, now, self.window_s, stop)
            if new == watch:
                continue
            self._save(new)
            self.watches[task_id] = new
            for effect in effects:
                if isinstance(effect, Unconfirmed):
                    self._unconfirmed(effect, workflow_of, now, out)
                else:
                    out.messages.append(effect)
            if new.phase == "resent":
                out.traces.append((new.workflow_id, "cancel_resent", {"task_id": task_id}))
        return out

    def _unconfirmed(
        self,
        effect: Unconfirmed,
        workflow_of: Callable[[str], Workflow | None],
        now: datetime,
        out: Outcome,
    ) -> None:
        watch = effect.watch
        detail = {"task_id": watch.task_id, "reason": watch.reason, "safe_stop": effect.safe_stop}
        log.error(
            "cancel of %s not confirmed after two windows: safe stop %s commanded",
            watch.task_id,
            effect.safe_stop or "(none in the catalog)",
        )
        out.traces.append((watch.workflow_id, "cancel_unconfirmed", detail))
        event = {"status": "CANCEL_UNCONFIRMED", **detail, "step_id": watch.step_id}
        self._tell(watch, event, watch.reason, workflow_of(watch.workflow_id), now, out)

    def _tell(
        self,
        watch: Watch,
        event: dict[str, Any],
        reason: str | None,
        wf: Workflow | None,
        now: datetime,
        out: Outcome,
    ) -> None:
        """`P/workflow/event` and the cloud report of a body event. It is not a change of the
        workflow's document: it carries the workflow's current etag and status (pruned: the
        last ones the watch saw; none known, from a row older than that copy: no event)."""
        status = wf.status if wf else watch.workflow_status
        etag = wf.etag if wf else watch.etag
        if status is None or etag is None:
            log.warning("%s of %s: its workflow is gone, no event", event["status"], watch.task_id)
        else:
            out.messages.append(
                Emit(
                    {
                        "workflow_id": watch.workflow_id,
                        "step_id": watch.step_id,
                        "task_id": watch.task_id,
                        "status": event["status"],
                        "workflow_status": status,
                        "reason": reason,
                        "progress": None,
                        "etag": etag,
                        "ts": iso(now),
                    }
                )
            )
        if wf is not None:
            body = report_body(wf, event, False)
            out.reports.append(Report(wf.workflow_id, body, False, True))

    def callback(
        self,
        task_id: str,
        seq: int,
        status: str,
        evidence: Any,
        now: datetime,
        workflow_of: Callable[[str], Workflow | None],
    ) -> Outcome:
        """A callback of a watched task (`find` said so), inside the caller's transaction."""
        out = Outcome()
        watch = self.find(task_id)
        if watch is None:
            return out
        new, confirmed = on_callback(watch, task_id, seq, status, evidence)
        if new is not None:
            if new != watch:
                self._save(new)
                self.watches[watch.task_id] = new
                detail = {"task_id": task_id, "seq": seq, "status": status}
                out.traces.append((watch.workflow_id, "safe_stop_callback", detail))
            return out
        assert confirmed is not None
        self._drop(watch.task_id)
        del self.watches[watch.task_id]
        self._confirmed(confirmed, workflow_of(watch.workflow_id), now, out)
        return out

    def _confirmed(
        self, confirmed: Confirmed, wf: Workflow | None, now: datetime, out: Outcome
    ) -> None:
        """The body stopped. What it says it did is recorded as it said it: a COMPLETED after
        the cancel means the body finished the action (the robot is in the room) — the step
        stays CANCELLED for the user, the trace and the cloud get the body's word."""
        watch = confirmed.watch
        detail: dict[str, Any] = {
            "task_id": watch.task_id,
            "body_status": confirmed.status,
            "seq": confirmed.seq,
            "phase": watch.phase,
        }
        if confirmed.evidence:
            detail["evidence"] = confirmed.evidence
        late = (now - watch.sent_at).total_seconds()
        log.info("cancel of %s confirmed (%s) after %.1f s", watch.task_id, confirmed.status, late)
        out.traces.append((watch.workflow_id, "cancel_confirmed", detail))
        if watch.phase == "escalated" or confirmed.status == "COMPLETED":
            event = {
                "status": "CANCEL_CONFIRMED",
                "task_id": watch.task_id,
                "step_id": watch.step_id,
                "reason": confirmed.status.lower(),
                "evidence": confirmed.evidence or None,
            }
            self._tell(watch, event, confirmed.status.lower(), wf, now, out)

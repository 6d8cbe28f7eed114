"""A cancel is confirmed, not assumed (SPEC §4.2), as pure functions over one `Watch`.

After `task/cancel` the runtime waits `cancel_confirm_s` for the agent's terminal callback;
unconfirmed, it sends the cancel again; after a second window it escalates: the capability's
`safe_stop` operation is commanded at once (outside every queue and resource wait), the step is
shown `CANCEL_UNCONFIRMED`, an alarm stands and the cloud is told. A terminal callback of the
cancelled task, or COMPLETED of the safe stop, confirms it. No I/O, no clock: `now` is given;
the shell (`taskmanager/watch.py`) persists watches and carries the effects out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from a2a_common.clock import iso, parse_iso
from taskmanager.catalog import Operation
from taskmanager.events import CancelTask, Command

TERMINAL = frozenset({"COMPLETED", "FAILED", "BLOCKED", "TIMEOUT", "CANCELLED"})
STOP_SUFFIX = "~safe_stop"  # `~` is outside the id pattern: no step can be named so


@dataclass(frozen=True)
class Watch:
    """One cancelled task whose body has not been confirmed stopped. `phase`: `sent` (first
    window), `resent` (second window), `escalated` (safe stop commanded, alarm standing)."""

    task_id: str
    workflow_id: str
    step_id: str
    capability_id: str
    operation_id: str
    reason: str
    phase: str
    sent_at: datetime
    due_at: datetime | None
    last_seq: int = 0
    stop_operation: str | None = None
    stop_seq: int = 0
    resource: str | None = None  # held until confirmed (SPEC 4.2: a step waits for it free)
    # the workflow as last seen (status, etag): what a body event says once it is pruned
    workflow_status: str | None = None
    etag: int | None = None

    @property
    def stop_task_id(self) -> str:
        return self.task_id + STOP_SUFFIX

    def to_json(self) -> dict[str, Any]:
        """Field by field: every field is a scalar (`asdict` deep-copied each one, a third of a
        PUI cancel's CPU)."""
        data = dict(vars(self))
        data["sent_at"] = iso(self.sent_at)
        data["due_at"] = iso(self.due_at) if self.due_at else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Watch:
        body = dict(data)
        body["sent_at"] = parse_iso(body["sent_at"])
        body["due_at"] = parse_iso(body["due_at"]) if body.get("due_at") else None
        return cls(**body)


@dataclass(frozen=True)
class Unconfirmed:
    """Escalated: the step is shown CANCEL_UNCONFIRMED, the cloud is told."""

    watch: Watch
    safe_stop: str | None  # `capability.operation`, None when the catalog names none


@dataclass(frozen=True)
class Confirmed:
    """The body is confirmed stopped: by which callback (`status` of the task, or `stopped`
    when the safe stop completed) and with what evidence."""

    watch: Watch
    status: str
    seq: int
    evidence: Any


def watch_for(
    cancel: CancelTask, step_id: str, operation_id: str, last_seq: int, now: datetime, window: float
) -> Watch:
    """A `task/cancel` just sent: its first confirmation window starts."""
    payload = cancel.payload
    return Watch(
        task_id=str(payload["task_id"]),
        workflow_id=str(payload["workflow_id"]),
        step_id=step_id,
        capability_id=cancel.capability_id,
        operation_id=operation_id,
        reason=str(payload["reason"]),
        phase="sent",
        sent_at=now,
        due_at=now + timedelta(seconds=window),
        last_seq=last_seq,
    )


def cancel_again(watch: Watch) -> CancelTask:
    payload = {"task_id": watch.task_id, "workflow_id": watch.workflow_id, "reason": watch.reason}
    return CancelTask(watch.capability_id, payload)


def stop_command(watch: Watch, stop: Operation, now: datetime) -> Command:
    """SPEC §2.1 for the safe stop; `safe_stop: true` marks a command that never expires."""
    return Command(
        watch.capability_id,
        {
            "task_id": watch.stop_task_id,
            "workflow_id": watch.workflow_id,
            "step_id": watch.step_id,
            "capability_id": watch.capability_id,
            "operation_id": stop.operation_id,
            "args": {},
            "attempt": 1,
            "issued_at": iso(now),
            "ack_deadline": iso(now + timedelta(seconds=stop.ack_timeout_s)),
            "deadline": iso(now + timedelta(seconds=stop.timeout_s)),
            "safe_stop": True,
            "stops_task_id": watch.task_id,
        },
    )


def on_due(
    watch: Watch, now: datetime, window: float, stop: Operation | None
) -> tuple[Watch, list[CancelTask | Command | Unconfirmed]]:
    """A window ended unconfirmed: the first sends the cancel again, the second escalates."""
    if watch.due_at is None or now < watch.due_at:
        return watch, []
    resend: list[CancelTask | Command | Unconfirmed] = []
    if watch.phase == "sent":
        resend.append(cancel_again(watch))
        if now < watch.due_at + timedelta(seconds=window):
            return replace(watch, phase="resent", due_at=now + timedelta(seconds=window)), resend
        # both windows passed while the runtime was down: the re-send goes, and so does the stop
    name = stop.operation_id if stop else None
    escalated = replace(watch, phase="escalated", due_at=None, stop_operation=name)
    effects = resend
    if stop is not None:
        effects.append(stop_command(escalated, stop, now))
    effects.append(Unconfirmed(escalated, f"{watch.capability_id}.{name}" if name else None))
    return escalated, effects


def verdict(watch: Watch, task_id: str, seq: int, status: str) -> str:
    """A callback for a watched task: `confirm` (it ends the watch), `apply` (a safe stop's
    progress: taken, nothing changes), `duplicate` or `terminal` (the cancelled task's
    RUNNING/PROGRESS after its end: refused as SPEC 2.4 says)."""
    stop = task_id == watch.stop_task_id
    if seq <= (watch.stop_seq if stop else watch.last_seq):
        return "duplicate"
    if stop:
        return "confirm" if status == "COMPLETED" else "apply"
    return "confirm" if status in TERMINAL else "terminal"


def on_callback(
    watch: Watch, task_id: str, seq: int, status: str, evidence: Any
) -> tuple[Watch | None, Confirmed | None]:
    """The watch after a callback (None: confirmed, it ends) and the confirmation if any."""
    if verdict(watch, task_id, seq, status) != "confirm":
        if task_id == watch.stop_task_id and seq > watch.stop_seq:
            return replace(watch, stop_seq=seq), None
        return watch, None
    how = "stopped" if task_id == watch.stop_task_id else status
    return None, Confirmed(watch, how, seq, evidence)

"""One task as a device agent sees it: the command that started it and the callbacks it has
sent (SPEC §2.1, §2.2).

A `Task` numbers its callbacks itself (`seq` 1, 2, 3, … per task) and stops sending once it has
reported a terminal status, so a handler cannot break the ordering the runtime relies on: the
runtime ignores a `seq` at or below the last one it applied and refuses (`task_terminal`) a new
one after the end. Every report is numbered and handed to the MQTT client under one lock, so
callbacks leave in `seq` order whichever thread sends them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("a2a_agent")

TERMINAL = frozenset({"COMPLETED", "FAILED", "BLOCKED", "TIMEOUT", "CANCELLED"})
STATUSES = TERMINAL | {"RUNNING", "PROGRESS", "NEEDS_USER_INPUT"}
# refusals (SPEC 2.4) that say the runtime takes nothing more for this task: its handler is
# stopped (the agent's cancel hook runs; nothing else is sent)
STOPPING = frozenset({"task_terminal", "unknown_task", "not_dispatched", "wrong_capability"})


def instant(value: Any) -> datetime | None:
    """An ISO-8601 field of a command as an aware datetime; None when absent or unreadable
    (older runtimes send no `ack_deadline`: a handler then simply has no ack window to see)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Refusal:
    """A refusal on `P/runtime/error` of a callback this agent sent (SPEC §2.4). `task_id` and
    `seq` come from the refusal's `ref`; both are None on runtimes that send no `ref`."""

    error: str
    detail: str
    task_id: str | None
    seq: int | None
    body: Mapping[str, Any]


class Task:
    """A command being carried out. Handlers read the command through it and report through
    `running()`, `progress()`, `completed()`, … Each report returns True when it was sent and
    False when it was not: the task had already ended (nothing is sent after a terminal
    status), it is being cancelled (only a terminal status goes out once the cancel arrived),
    or it was stopped (`stopped`: the runtime refused one of its callbacks with an error of
    `STOPPING`; nothing more is sent). A handler that gets False stops working on it."""

    def __init__(
        self,
        command: dict[str, Any],
        *,
        lock: threading.RLock,
        send: Callable[[dict[str, Any]], None],
        clock: Callable[[], datetime],
        evidence_keys: frozenset[str] | None = None,
        received_at: float | None = None,
        agent: str | None = None,
    ) -> None:
        self.command = command  # the first delivery's payload, as it came
        self.task_id: str = command["task_id"]
        self.capability_id = str(command.get("capability_id", ""))
        self.operation_id = str(command.get("operation_id", ""))
        args = command.get("args")
        self.args: dict[str, Any] = args if isinstance(args, dict) else {}
        attempt = command.get("attempt")
        self.attempt: int = attempt if isinstance(attempt, int) else 1
        self.ack_deadline = instant(command.get("ack_deadline"))
        self.deadline = instant(command.get("deadline"))
        self.received_at = time.monotonic() if received_at is None else received_at
        self.deliveries = 1
        self.seq = 0
        self.status: str | None = None  # the last status reported
        self.last: dict[str, Any] | None = None  # the last callback body, re-sent on redelivery
        self.cancel_reason: str | None = None
        self.refusals: list[Refusal] = []
        self.stopped: str | None = None  # the refusal that stopped it (STOPPING)
        self._cancel: threading.Event | None = None  # made by the first wait_cancelled()
        self._cancel_requested = False
        self._lock = lock
        self._send = send
        self._clock = clock
        self._evidence_keys = evidence_keys
        self._agent = agent

    @property
    def workflow_id(self) -> str:
        return str(self.command.get("workflow_id", ""))

    @property
    def step_id(self) -> str:
        return str(self.command.get("step_id", ""))

    @property
    def terminal(self) -> bool:
        with self._lock:
            return self.status in TERMINAL

    @property
    def cancel_requested(self) -> bool:
        """The runtime sent `task/cancel`: a long handler checks this between steps."""
        return self._cancel_requested

    def wait_cancelled(self, timeout_s: float | None = None) -> bool:
        """Sleep until cancelled or `timeout_s` passed; True when cancelled. A handler that
        waits with this instead of `time.sleep` stops as soon as the cancel arrives."""
        with self._lock:
            if self._cancel_requested:
                return True
            if self._cancel is None:  # most tasks are never waited on: no Event for them
                self._cancel = threading.Event()
            event = self._cancel
        return event.wait(timeout_s)

    def seconds_left(self) -> float | None:
        """Seconds until `deadline` (the task must be terminal by then); None when unknown."""
        return self._left(self.deadline)

    def ack_seconds_left(self) -> float | None:
        """Seconds until `ack_deadline` (the first callback must arrive by then, else the
        runtime ends the task TIMEOUT `ack_timeout`); None when the runtime sent none."""
        return self._left(self.ack_deadline)

    def _left(self, at: datetime | None) -> float | None:
        return None if at is None else (at - self._clock()).total_seconds()

    # --- reports ------------------------------------------------------------------------------
    def running(self) -> bool:
        """RUNNING; skipped (False) when RUNNING is already the last report (the agent sends
        one on receipt by default)."""
        with self._lock:
            if self.status == "RUNNING":
                return False
            return self.report("RUNNING")

    def progress(self, pct: float) -> bool:
        return self.report("PROGRESS", progress=max(0.0, min(100.0, pct)))

    def completed(self, evidence: Mapping[str, Any] | None = None, /, **keys: Any) -> bool:
        """COMPLETED with the operation's terminal evidence, as a mapping or keywords:
        `task.completed(arrived_room="안방")`. Keys outside the operation's `terminal_evidence`
        (when the handler was registered with them) are dropped here, as the runtime would."""
        return self.report("COMPLETED", progress=100, evidence={**(evidence or {}), **keys})

    def failed(self, reason: str) -> bool:
        return self.report("FAILED", reason=reason)

    def blocked(self, reason: str) -> bool:
        return self.report("BLOCKED", reason=reason)

    def needs_input(self, reason: str) -> bool:
        return self.report("NEEDS_USER_INPUT", reason=reason)

    def cancelled(self, reason: str | None = None) -> bool:
        return self.report("CANCELLED", reason=reason or self.cancel_reason)

    def report(
        self,
        status: str,
        *,
        progress: float | None = None,
        reason: str | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> bool:
        """Send the next callback; False (nothing sent) once the task has ended."""
        with self._lock:
            body = self.callback(status, progress=progress, reason=reason, evidence=evidence)
            if body is None:
                return False
            self._send(body)
            return True

    def callback(
        self,
        status: str,
        *,
        progress: float | None = None,
        reason: str | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The next callback body — `seq` taken, recorded as the latest — without sending it;
        None once the task has ended. For tests that must break the protocol on purpose
        (send it twice, or late) with `DeviceAgent.publish_callback`."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        with self._lock:
            if self.status in TERMINAL:
                log.info("task %s already %s: %s not sent", self.task_id, self.status, status)
                return None
            if self.stopped is not None or (self._cancel_requested and status not in TERMINAL):
                why = f"refused {self.stopped}" if self.stopped else "being cancelled"
                log.info("task %s %s: %s not sent", self.task_id, why, status)
                return None
            self.seq += 1
            self.status = status
            self.last = {
                "task_id": self.task_id,
                "seq": self.seq,
                "status": status,
                "progress": progress,
                "reason": reason,
                "evidence": self._allowed(evidence),
                "ts": self._clock().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "attempt": self.attempt,  # the latest command it answers (SPEC 2.2)
            }
            if self._agent:  # who answered: `workflows trace` shows it
                self.last["agent"] = self._agent
            return self.last

    def _allowed(self, evidence: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if not evidence:
            return None
        if self._evidence_keys is None:
            return dict(evidence)
        dropped = set(evidence) - self._evidence_keys
        if dropped:
            log.warning(
                "task %s: evidence %s is not terminal evidence of %s.%s; dropped",
                self.task_id,
                sorted(dropped),
                self.capability_id,
                self.operation_id,
            )
        return {k: v for k, v in evidence.items() if k in self._evidence_keys} or None

    def _stop(self, error: str) -> bool:
        """The runtime refused a callback with a `STOPPING` error: nothing more is sent and
        waiters wake; False when it had already ended or was being cancelled (the caller
        then runs no cancel hook: one runs already, or nothing runs)."""
        with self._lock:
            if self.status in TERMINAL or self.stopped is not None:
                return False
            self.stopped = error
            first = not self._cancel_requested
            self._request_cancel(self.cancel_reason or error)
            return first

    def _request_cancel(self, reason: str | None) -> None:
        with self._lock:
            self.cancel_reason = reason
            self._cancel_requested = True
            if self._cancel is not None:
                self._cancel.set()

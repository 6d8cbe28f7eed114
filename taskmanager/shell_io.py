"""What the TaskManager shell (taskmanager.service) takes in and hands out: the messages it
publishes and the `Publisher` it hands them to, the turn a request came with (`TurnRef`), the
`Result` of each input, and the event a rejected workflow is announced with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from a2a_common.clock import iso
from a2a_common.people import HOUSEHOLD
from taskmanager.events import CancelTask, Command, Emit, Ignored, Report
from taskmanager.model import Workflow

Message = Command | CancelTask | Emit | Report  # every effect that leaves the TaskManager


class Publisher(Protocol):
    def publish(self, message: Message) -> None:
        """Queue the message inside the caller's transaction (sent after the commit): commands,
        cancels and events to the device's wire, reports to the cloud."""


@dataclass(frozen=True)
class TurnRef:
    turn_id: str
    pair_id: str
    session_id: str
    text: str = ""  # the utterance: kept out of the trace's copy of the request, never stored
    person_id: str = HOUSEHOLD  # whose turn it is (SPEC 5.7): whose capability grants cover it


@dataclass
class Result:
    accepted: list[str] = field(default_factory=list)
    rejected: list[tuple[str | None, str]] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    finished: list[Workflow] = field(default_factory=list)
    commands: int = 0  # task commands queued

    def merge(self, other: Result) -> Result:
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.ignored += other.ignored
        self.finished += other.finished
        self.commands += other.commands
        return self


def rejected_event(workflow_id: str, reason: str, now: datetime) -> Emit:
    """The WORKFLOW_REJECTED event of a request refused before it became a workflow (SPEC 4.3)."""
    return Emit(
        {
            "workflow_id": workflow_id,
            "step_id": None,
            "task_id": None,
            "status": "WORKFLOW_REJECTED",
            "workflow_status": "rejected",
            "reason": reason,
            "progress": None,
            "etag": 1,
            "ts": iso(now),
        }
    )

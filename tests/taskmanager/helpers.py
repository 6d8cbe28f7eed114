from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from taskmanager.board import Board
from taskmanager.catalog import load_catalog
from taskmanager.context import Outcome
from taskmanager.core import decide
from taskmanager.events import (
    Callback,
    CancelTask,
    Command,
    Emit,
    Event,
    Ignored,
    Report,
    Submit,
    Tick,
)
from taskmanager.model import Workflow
from taskmanager.validate import Rejected, validate_workflow

T0 = datetime(2026, 6, 24, 20, 0, tzinfo=UTC)
CATALOG = load_catalog()

MOVE_PURIFY = {
    "workflow_id": "wf-1",
    "plan_id": "room_clean",
    "steps": [
        {
            "step_id": "step_move",
            "capability_id": "mobility",
            "operation_id": "move_to_room",
            "args": {"room": "안방"},
            "depends_on": [],
            "timeout_s": 120,
        },
        {
            "step_id": "step_purify",
            "capability_id": "air_purifier",
            "operation_id": "start",
            "args": {"mode": "auto"},
            "depends_on": ["step_move"],
        },
    ],
    "experience": None,
}


def workflow(raw: dict[str, Any] | None = None, **changes: Any) -> Workflow:
    result = validate_workflow(
        {**(raw or MOVE_PURIFY), **changes}, CATALOG, now=T0, source="planner"
    )
    assert not isinstance(result, Rejected), result
    return result


class Run:
    """Feeds events through `decide`, keeping the board and every effect."""

    def __init__(self) -> None:
        self.board = Board()
        self.now = T0
        self.effects: list[Any] = []
        self.last: Outcome | None = None

    def __call__(self, event: Event, *, at: float | None = None) -> Outcome:
        if at is not None:
            self.now = T0 + timedelta(seconds=at)
        self.last = decide(self.board, event, self.now)
        self.board = self.last.board
        self.effects.extend(self.last.effects)
        return self.last

    def submit(self, wf: Workflow | None = None) -> Outcome:
        return self(Submit(wf or workflow()))

    def cb(
        self, task: str, seq: int, status: str, *, at: float | None = None, **extra: Any
    ) -> Outcome:
        return self(Callback(task, seq, status, **extra), at=at)

    def confirm(self, task_id: str) -> Outcome:
        """What the shell does when a cancelled task's stop is confirmed (SPEC 4.2): its
        resource is free again, and a tick lets the next in line start."""
        self.board.fenced = {r: t for r, t in self.board.fenced.items() if t != task_id}
        return self(Tick())

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.effects if isinstance(e, kind)]

    def commands(self) -> list[str]:
        return [c.payload["task_id"] for c in self.of(Command)]

    def cancels(self) -> list[tuple[str, str]]:
        return [(c.payload["task_id"], c.payload["reason"]) for c in self.of(CancelTask)]

    def events(self, workflow_id: str = "wf-1") -> list[tuple[str | None, str]]:
        return [
            (e.payload["step_id"], e.payload["status"])
            for e in self.of(Emit)
            if e.payload["workflow_id"] == workflow_id
        ]

    def reports(self) -> list[Report]:
        return self.of(Report)

    def ignored(self) -> list[str]:
        return [i.reason for i in self.of(Ignored)]

    def status(self, workflow_id: str = "wf-1") -> str:
        assert self.last is not None
        for wf in self.last.changed:
            if wf.workflow_id == workflow_id:
                return wf.status
        return self.board.workflows[workflow_id].status


class ReportSink:
    """Stands in for the report worker: keeps what the TaskManager reported."""

    def __init__(self) -> None:
        self.reports: list[Report] = []

    def settle(self, reports: list[Report]) -> None:
        self.reports += reports

    def committed(self, _reports: list[Report]) -> None:
        pass


def task_publisher(outbox: Any, sink: ReportSink | None = None) -> Any:
    """The edge's publisher onto `a2a/robot-t`, its reports kept by `sink`."""
    from edge.app.publisher import TaskPublisher
    from edge.channel.topics import Topics

    return TaskPublisher(
        topics=Topics("a2a", "robot-t"),
        outbox=outbox,
        reports=sink or ReportSink(),  # type: ignore[arg-type]
        after_commit=lambda fn: fn(),
    )

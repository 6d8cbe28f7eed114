"""The working context of one `decide`: workflows copied on first write (the input board is
never mutated), and the effects, workflow events and reports the event causes, gathered until
the core settles and stamps them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from taskmanager.board import Board
from taskmanager.events import Effect, Trace
from taskmanager.model import Step, Workflow, clone


@dataclass(frozen=True)
class Outcome:
    board: Board
    effects: list[Effect]
    changed: list[Workflow]  # with their new etag; terminal ones have left the board


class Ctx:
    def __init__(self, now: datetime, board: Board) -> None:
        self.now = now
        self.board = board
        self._owned: set[str] = set()
        self.effects: list[Effect] = []
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.reports: dict[str, list[tuple[dict[str, Any], bool, bool]]] = {}
        self.touched: dict[str, Workflow] = {}

    def own(self, workflow_id: str) -> Workflow:
        """The workflow, copied on first write: the input board is never mutated. Steps are
        copied one level deep; the core replaces, never mutates, their dicts and lists."""
        if workflow_id not in self._owned:
            self.board.workflows[workflow_id] = clone(self.board.workflows[workflow_id])
            self._owned.add(workflow_id)
        return self.board.workflows[workflow_id]

    @property
    def owned(self) -> list[str]:
        return sorted(self._owned)

    def adopt(self, wf: Workflow) -> None:
        self.board.workflows[wf.workflow_id] = wf
        self._owned.add(wf.workflow_id)

    def touch(self, wf: Workflow) -> None:
        self.touched.setdefault(wf.workflow_id, wf)

    def step_event(self, wf: Workflow, step: Step, status: str, reason: str | None = None) -> None:
        self.touch(wf)
        self.events.setdefault(wf.workflow_id, []).append(
            {
                "workflow_id": wf.workflow_id,
                "step_id": step.step_id,
                "task_id": step.task_id(wf.workflow_id),
                "status": status,
                "reason": reason,
                "progress": step.progress,
            }
        )

    def wf_event(self, wf: Workflow, status: str, reason: str | None = None) -> None:
        self.touch(wf)
        self.events.setdefault(wf.workflow_id, []).append(
            {
                "workflow_id": wf.workflow_id,
                "step_id": None,
                "task_id": None,
                "status": status,
                "reason": reason,
                "progress": None,
            }
        )

    def report(
        self, wf: Workflow, event: dict[str, Any], *, decision: bool, terminal: bool
    ) -> None:
        self.touch(wf)
        self.reports.setdefault(wf.workflow_id, []).append((event, decision, terminal))

    def trace(self, wf: Workflow, trace_kind: str, /, **detail: Any) -> None:
        self.touch(wf)
        self.effects.append(Trace(wf.workflow_id, trace_kind, detail))

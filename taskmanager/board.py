"""The board of active workflows and the indexes `decide` keeps in step with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from taskmanager.model import ACTIVE_STEP, Workflow


@dataclass
class Board:
    """Active workflows plus indexes kept in step with them, so one event costs work in
    proportion to what it touches, not to how many workflows wait: `held` (resource -> task_id
    holding it), `queues` (resource, or None for steps that need none -> {(workflow_id,
    step_id): ready_seq} of QUEUED steps whose dependencies completed), `queued` (workflow_id ->
    where its steps sit in `queues`) and `timed` (workflows with a deadline pending).
    `fenced` (resource -> task_id): a cancelled task whose body is not yet confirmed stopped
    (SPEC 4.2) keeps its resource; the shell lifts the fence when the cancel is confirmed.

    `decide` works on a copy whose dicts are shallow copies; a queue is copied the first time
    that copy changes it (`_own_queue`), so the input board is never mutated."""

    workflows: dict[str, Workflow] = field(default_factory=dict)
    next_ready_seq: int = 1
    held: dict[str, str] = field(default_factory=dict)
    queues: dict[str | None, dict[tuple[str, str], int]] = field(default_factory=dict)
    queued: dict[str, list[tuple[str | None, str]]] = field(default_factory=dict)
    timed: set[str] = field(default_factory=set)
    fenced: dict[str, str] = field(default_factory=dict)
    # SPEC 4.8: capability -> (state, boot_id) of its agent's last status; the shell keeps it
    agents: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    _owned_queues: set[str | None] = field(default_factory=set, compare=False, repr=False)

    def copy(self) -> Board:
        """What `decide` changes: workflows are copied on write, queues on first change."""
        return Board(
            dict(self.workflows),
            self.next_ready_seq,
            dict(self.held),
            dict(self.queues),
            dict(self.queued),
            set(self.timed),
            dict(self.fenced),
            dict(self.agents),
        )

    def _own_queue(self, key: str | None) -> dict[tuple[str, str], int]:
        if key not in self._owned_queues:
            self.queues[key] = dict(self.queues.get(key, {}))
            self._owned_queues.add(key)
        return self.queues[key]

    def reindex(self, wf: Workflow) -> None:
        workflow_id = wf.workflow_id
        for resource in [r for r, t in self.held.items() if t.rpartition(":")[0] == workflow_id]:
            del self.held[resource]
        for key, step_id in self.queued.pop(workflow_id, []):
            self._own_queue(key).pop((workflow_id, step_id), None)
        self.timed.discard(workflow_id)
        if workflow_id not in self.workflows:
            return
        entries: list[tuple[str | None, str]] = []
        for step in wf.steps:
            if step.status in ACTIVE_STEP and step.resource and step.kind == "task":
                self.held[step.resource] = step.task_id(workflow_id)
            elif step.status == "QUEUED" and step.ready_seq is not None:
                key = step.resource if step.kind == "task" and step.resource else None
                self._own_queue(key)[(workflow_id, step.step_id)] = step.ready_seq
                entries.append((key, step.step_id))
        if entries:
            self.queued[workflow_id] = entries
        if _deadlines(wf):
            self.timed.add(workflow_id)

    @classmethod
    def of(cls, workflows: list[Workflow]) -> Board:
        board = cls({wf.workflow_id: wf for wf in workflows})
        seqs = [s.ready_seq for wf in workflows for s in wf.steps if s.ready_seq is not None]
        board.next_ready_seq = max(seqs, default=0) + 1
        for wf in workflows:
            board.reindex(wf)
        return board


def _deadlines(wf: Workflow) -> list[datetime]:
    """The instants at which a Tick must look at this workflow."""
    instants = [
        t
        for s in wf.steps
        for t in (
            s.ack_deadline if s.status == "DISPATCHED" else None,
            s.deadline if s.status in ACTIVE_STEP else None,
            s.wait_until if s.status == "RUNNING" else None,
        )
        if t is not None
    ]
    if wf.ask_deadline:
        instants.append(wf.ask_deadline)
    return instants


def next_deadline(board: Board) -> datetime | None:
    """When the next Tick is due (ack/timeout deadlines, waits, unanswered questions)."""
    instants = [t for wf_id in board.timed for t in _deadlines(board.workflows[wf_id])]
    return min(instants) if instants else None

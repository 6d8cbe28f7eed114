"""Workflows and steps as plain values, with their JSON form for the store.

The core copies a board, changes the copy and returns it; nothing outside the core mutates
these objects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, get_args

from a2a_common.clock import iso, parse_iso
from a2a_common.people import HOUSEHOLD

StepStatus = Literal[
    "QUEUED",
    "DISPATCHED",
    "RUNNING",
    "NEEDS_USER_INPUT",
    "COMPLETED",
    "FAILED",
    "BLOCKED",
    "TIMEOUT",
    "CANCELLED",
]
WorkflowStatus = Literal[
    "accepted", "running", "waiting_user", "completed", "failed", "cancelled", "rejected"
]
CallbackStatus = Literal[
    "RUNNING",
    "PROGRESS",
    "COMPLETED",
    "FAILED",
    "BLOCKED",
    "TIMEOUT",
    "NEEDS_USER_INPUT",
    "CANCELLED",
]
CALLBACK_STATUSES: tuple[str, ...] = get_args(CallbackStatus)
TERMINAL_STEP = frozenset({"COMPLETED", "FAILED", "BLOCKED", "TIMEOUT", "CANCELLED"})
FAILURE_STEP = frozenset({"FAILED", "BLOCKED", "TIMEOUT"})
ACTIVE_STEP = frozenset({"DISPATCHED", "RUNNING", "NEEDS_USER_INPUT"})
TERMINAL_WORKFLOW = frozenset({"completed", "failed", "cancelled", "rejected"})
DEFAULT_DECISION_EVENTS = ("FAILED", "BLOCKED", "TIMEOUT", "NEEDS_USER_INPUT")
DEFAULT_TERMINAL_EVENTS = ("COMPLETED", "CANCELLED", "WORKFLOW_COMPLETED")
EXPERIENCE_MODES = ("enforce", "shadow", "off")  # SPEC 4.7
# what `awaiting_decision` holds while a decision is asked about no step (never a step id)
AWAITING_CRITERIA = "*criteria"
AWAITING_OBSERVATION = "*observation"

_TIMES = {"dispatched_at", "ack_deadline", "deadline", "wait_until", "ask_deadline", "created_at"}


@dataclass
class Step:
    step_id: str
    kind: Literal["task", "wait"] = "task"
    capability_id: str = ""
    operation_id: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    depends_on: list[str] = field(default_factory=list)
    timeout_s: float = 0.0
    ack_timeout_s: float = 0.0
    wait_s: float = 0.0
    resource: str | None = None
    cancelable: bool = True
    status: StepStatus = "QUEUED"
    reason: str | None = None
    attempt: int = 0
    last_seq: int = 0
    progress: float | None = None
    ready_seq: int | None = None
    dispatched_at: datetime | None = None
    ack_deadline: datetime | None = None
    deadline: datetime | None = None
    wait_until: datetime | None = None
    evidence: dict[str, Any] | None = None
    continued: bool = False  # a failure the supervisor chose to continue past
    effects_met: list[str] = field(default_factory=list)  # bound effects its evidence proved
    # SPEC 4.8: the agent's boot the task was (last) dispatched under (None: no status known)
    # and what its catalog operation says happens when that agent is lost or restarts
    boot_id: str | None = None
    on_agent_lost: str = "fail"
    on_restart: str = "fail"
    epoch_attempt: int = 0  # the attempt a restarted agent was re-sent (its seqs start again)

    def task_id(self, workflow_id: str) -> str:
        return f"{workflow_id}:{self.step_id}"

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STEP


@dataclass
class Workflow:
    workflow_id: str
    steps: list[Step]
    plan_id: str = ""
    status: WorkflowStatus = "accepted"
    etag: int = 0
    source: str = "planner"
    experience: dict[str, Any] | None = None
    experience_refusal: str | None = None
    # the Experience layer (SPEC 4.5-4.7): active | shadow | refused | shadow_refused | off,
    # None: no contract
    experience_state: str | None = None
    effect_bindings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    subscriptions: list[dict[str, Any]] = field(default_factory=list)
    refused_events: list[str] = field(default_factory=list)  # named in the policy, unknown
    refused_experience_id: str | None = None  # the refused contract's, for its report only
    criteria_asked: bool = False
    observations_seen: int = 0
    decisions_used: int = 0
    replans_used: int = 0
    max_decisions: int = 3
    max_replans: int = 1
    decision_events: list[str] = field(default_factory=lambda: list(DEFAULT_DECISION_EVENTS))
    terminal_events: list[str] = field(default_factory=lambda: list(DEFAULT_TERMINAL_EVENTS))
    awaiting_decision: str | None = None  # step id whose failure waits on the supervisor
    ask_deadline: datetime | None = None
    question: str | None = None
    cancel_reason: str | None = None
    end_reason: str | None = None
    turn_id: str | None = None
    pair_id: str | None = None
    session_id: str | None = None
    # whose turn started it (SPEC 5.7): a capability grant given for that person covers it, a
    # household grant covers anyone's; a workflow with no turn (pushed) is the household's
    person_id: str = HOUSEHOLD
    created_at: datetime | None = None

    def step(self, step_id: str) -> Step | None:
        for step in self.steps:
            if step.step_id == step_id:
                return step
        return None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_WORKFLOW

    @property
    def experience_id(self) -> str | None:
        exp = self.experience or {}
        value = exp.get("experience_id")
        return value if isinstance(value, str) else None


_STEP_FIELDS = tuple(f.name for f in fields(Step))
_WF_FIELDS = tuple(f.name for f in fields(Workflow) if f.name != "steps")
_STEP_TIMES = tuple(name for name in _STEP_FIELDS if name in _TIMES)
_WF_TIMES = tuple(name for name in _WF_FIELDS if name in _TIMES)


# The stored document leaves out a field still at its default (issue 36: a two-step
# workflow's document went from ~1.7 KB, an overflow page past its row's leaf at 1 KiB pages,
# to about half), except the few every reader of the raw row looks at. A default changed here
# changes what stored documents mean: migrate them first (tests/taskmanager/test_compact_doc.py
# pins the defaults).
_STEP_KEPT = frozenset(
    {"step_id", "kind", "capability_id", "operation_id", "status", "args", "evidence"}
)
_WF_KEPT = frozenset({"workflow_id", "status", "etag"})


def _omittable(obj: Step | Workflow, kept: frozenset[str]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in vars(obj).items() if k not in kept and k != "steps")


_STEP_DEFAULTS = _omittable(Step(step_id=""), _STEP_KEPT)
_WF_DEFAULTS = _omittable(Workflow(workflow_id="", steps=[]), _WF_KEPT)


def _fields_of(
    obj: Step | Workflow, times: tuple[str, ...], defaults: tuple[tuple[str, Any], ...]
) -> dict[str, Any]:
    data = dict(vars(obj))
    for name, default in defaults:
        value = data[name]
        # the same type too: a timeout_s of 0 (int) is kept, so it loads back as 0, not 0.0
        if value is default or (value == default and type(value) is type(default)):
            del data[name]
    for name in times:
        value = data.get(name)
        if value is not None:
            data[name] = iso(value)
    return data


def workflow_to_json(wf: Workflow) -> dict[str, Any]:
    """The stored document: field by field (dataclasses.asdict deep-copies everything, which
    this hot path pays), a field at its default left out (`workflow_from_json` puts it back),
    the instants (and only they, by name) as RFC 3339 text."""
    data = _fields_of(wf, _WF_TIMES, _WF_DEFAULTS)
    del data["steps"]  # last, as the document always had it
    data["steps"] = [_fields_of(step, _STEP_TIMES, _STEP_DEFAULTS) for step in wf.steps]
    return data


def full_json(wf: Workflow) -> dict[str, Any]:
    """Every field, as documents were stored before issue 36: what a reader is shown."""
    data = _fields_of(wf, _WF_TIMES, ())
    del data["steps"]
    data["steps"] = [_fields_of(step, _STEP_TIMES, ()) for step in wf.steps]
    return data


def clone(wf: Workflow) -> Workflow:
    """A copy the core may change: the workflow and its steps one level deep (the core
    replaces, never mutates, their dicts and lists). `copy.deepcopy` was half of a submit's CPU."""
    copied = copy.copy(wf)
    copied.steps = [copy.copy(step) for step in wf.steps]
    return copied


def _load_times(data: dict[str, Any]) -> dict[str, Any]:
    return {k: parse_iso(v) if k in _TIMES and isinstance(v, str) else v for k, v in data.items()}


def workflow_from_json(data: dict[str, Any]) -> Workflow:
    step_names = {f.name for f in fields(Step)}
    wf_names = {f.name for f in fields(Workflow)}
    steps = [
        Step(**_load_times({k: v for k, v in s.items() if k in step_names})) for s in data["steps"]
    ]
    body = _load_times({k: v for k, v in data.items() if k in wf_names and k != "steps"})
    return Workflow(steps=steps, **body)


def split_task_id(task_id: str) -> tuple[str, str]:
    """(workflow_id, step_id) of a task id `<workflow_id>:<step_id>` (`Step.task_id`)."""
    workflow_id, _, step_id = task_id.rpartition(":")
    return workflow_id, step_id

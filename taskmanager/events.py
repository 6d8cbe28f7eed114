"""What goes into the TaskManager's core (events) and what comes out (effects)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from taskmanager.evidence import Dropped
from taskmanager.model import Step, Workflow

# --- events ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submit:
    workflow: Workflow


@dataclass(frozen=True)
class Callback:
    task_id: str
    seq: int
    status: str
    progress: float | None = None
    reason: str | None = None
    evidence: Any = None  # as the agent sent it; `TaskManager.callback` screens it (evidence.py)
    ask_timeout_s: float = 300.0  # how long a NEEDS_USER_INPUT waits for the user
    dropped: tuple[Dropped, ...] = ()  # what the screen took out of the agent's evidence
    contradicted: tuple[str, ...] = ()  # kept evidence keys naming another target (SPEC 4.5)
    # who answered, for the trace (`workflows trace`): the callback's `agent` and its topic
    answered_by: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Tick:
    # False: only what a freed resource lets start, no deadline fired — a release applied from
    # the held backlog must not fire deadlines ahead of inputs that came before them
    deadlines: bool = True


@dataclass(frozen=True)
class Cancel:
    workflow_id: str | None  # None: every active workflow
    reason: str


@dataclass(frozen=True)
class Decide:
    workflow_id: str
    kind: str | None  # None: no decision (the cloud answered null or not at all)
    question: str | None = None
    steps: list[Step] | None = None  # validated replan steps
    ask_timeout_s: float = 120.0


@dataclass(frozen=True)
class Redispatch:
    """Send these tasks' commands again (same task_id, attempt + 1) when their step is in
    `statuses`: after a restart for commands never PUBACKed, and when the broker lost our
    session (callbacks published meanwhile went nowhere). `task_ids` None: every task.
    `at_start`: the runtime's start-up (a restart, the robot's power): a task whose operation
    says `on_restart: fail` (a move) is never sent again then (SPEC 4.8) — its agent's status
    ends it, else its deadlines do."""

    task_ids: tuple[str, ...] | None
    statuses: frozenset[str]
    at_start: bool = False


@dataclass(frozen=True)
class Observe:
    """A semantic observation (SPEC §4.6), validated by the caller."""

    observation_id: str
    kind: str
    observed_at: datetime
    scope: dict[str, str]
    value: dict[str, Any]
    requires_cloud_decision: bool = False


@dataclass(frozen=True)
class SetMode:
    """`[experience] mode` changed (SIGHUP, SPEC §4.7): active contracts step down to it."""

    mode: str


@dataclass(frozen=True)
class Presence:
    """An agent's status changed (SPEC 4.8): `offline` (its status or its will), or `online`
    under `boot_id` holding `tasks`. `startup`: read at the runtime's start, before anything
    left in flight was re-armed."""

    capability_id: str
    state: str  # online | offline
    boot_id: str | None
    tasks: frozenset[str] = frozenset()
    startup: bool = False
    # when this run of the runtime started: a task dispatched before it was left in flight by
    # a restart (the robot's power, the service): lost then, it ends `agent_restarted`
    run_started: datetime | None = None


Event = Submit | Callback | Tick | Cancel | Decide | Redispatch | Observe | SetMode | Presence

# --- effects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    capability_id: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class CancelTask:
    capability_id: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Emit:
    payload: dict[str, Any]  # P/workflow/event


@dataclass(frozen=True)
class Report:
    workflow_id: str
    body: dict[str, Any]  # POST /v1/a2a/workflow/events, without request_id / device_id
    decision_requested: bool
    terminal: bool


@dataclass(frozen=True)
class Trace:
    workflow_id: str
    kind: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Ignored:
    reason: str  # unknown_task | late | duplicate | not_dispatched | unknown_workflow | ended
    detail: str


Effect = Command | CancelTask | Emit | Report | Trace | Ignored

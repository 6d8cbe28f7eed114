"""Validation of device workflow requests and device task requests (SPEC §4.3).

A request that fails any rule is rejected as a whole with a reason and nothing is dispatched.
A step's `args` meet the MQTT gate's rule (a2a_common/jsonx.py `finite`: finite numbers, nesting
at most 32 deep) as they would sit in the step's `task/command`, whichever door the request came
by (a turn's answer, a replan, `P/workflow/request`): what the runtime accepts it can send.
An experience contract that does not bind to the plan is refused on its own; the plan runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from a2a_common.jsonx import MAX_DEPTH, canonical, finite
from taskmanager.catalog import Catalog
from taskmanager.effects import EffectCatalog
from taskmanager.experience import activate
from taskmanager.model import Step, Workflow

ID_PATTERN = r"^[A-Za-z0-9._\-]{1,96}$"
MAX_STEPS = 64
MAX_ARGS_BYTES = 8192
MAX_TIMEOUT_S = 3600.0
MAX_WAIT_S = 86400.0
CONSENT_REQUIRED = "consent_required"  # the rejection reason (SPEC §4.2), a machine word
ARGS_DEPTH = 1  # where a step's args sit in its task/command: they must fit the MQTT gate's cap


class _StepWire(BaseModel):
    model_config = ConfigDict(extra="allow")
    step_id: str = Field(pattern=ID_PATTERN)
    kind: Literal["task", "wait"] = "task"
    capability_id: str | None = None
    operation_id: str | None = None
    args: dict[str, Any] = {}
    depends_on: list[str] = []
    timeout_s: StrictFloat | StrictInt | None = Field(None, allow_inf_nan=False)  # no "10"
    ack_timeout_s: StrictFloat | StrictInt | None = Field(None, allow_inf_nan=False)  # no "10"
    wait_s: StrictFloat | StrictInt | None = Field(None, allow_inf_nan=False)  # no "10"


class _WorkflowWire(BaseModel):
    model_config = ConfigDict(extra="allow")
    workflow_id: str = Field(pattern=ID_PATTERN)
    plan_id: str = ""
    steps: list[_StepWire] = Field(min_length=1)
    experience: dict[str, Any] | None = None


class _TaskWire(BaseModel):
    model_config = ConfigDict(extra="allow")
    task_id: str | None = Field(None, pattern=ID_PATTERN)
    capability_id: str
    operation_id: str
    args: dict[str, Any] = {}
    timeout_s: StrictFloat | StrictInt | None = Field(None, allow_inf_nan=False)  # no "10"


@dataclass(frozen=True)
class Rejected:
    reason: str
    workflow_id: str | None = None


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(request)"
    return f"{where}: {err['msg']}"


def _task_step(raw: _StepWire, catalog: Catalog, held: frozenset[str]) -> Step | str:
    cap, op = raw.capability_id or "", raw.operation_id or ""
    spec = catalog.get(cap, op)
    if spec is None:
        return f"step {raw.step_id}: unknown capability/operation {cap}.{op}"
    if spec.requires_consent and cap not in held:  # SPEC 5.6: a flag in the request grants nothing
        return CONSENT_REQUIRED
    if not finite(raw.args, ARGS_DEPTH):  # what the gate would refuse is never sent (SPEC 2.4)
        return (
            f"step {raw.step_id}: args must hold finite numbers and nest at most"
            f" {MAX_DEPTH - ARGS_DEPTH} deep"
        )
    if len(canonical(raw.args)) > MAX_ARGS_BYTES:
        return f"step {raw.step_id}: args larger than {MAX_ARGS_BYTES} bytes"
    timeout = raw.timeout_s if raw.timeout_s is not None else spec.timeout_s
    # a step that sets only a short timeout gets an ack window of the same length (SPEC 4.2)
    ack = raw.ack_timeout_s if raw.ack_timeout_s is not None else min(spec.ack_timeout_s, timeout)
    if not 0 < timeout <= MAX_TIMEOUT_S:
        return f"step {raw.step_id}: timeout_s must be in (0, {MAX_TIMEOUT_S:g}]"
    if not 0 < ack <= timeout:
        return f"step {raw.step_id}: ack_timeout_s must be in (0, timeout_s]"
    return Step(
        step_id=raw.step_id,
        kind="task",
        capability_id=cap,
        operation_id=op,
        args=dict(raw.args),
        depends_on=list(raw.depends_on),
        timeout_s=timeout,
        ack_timeout_s=ack,
        resource=spec.resource,
        cancelable=spec.cancelable,
        on_agent_lost=spec.on_agent_lost,
        on_restart=spec.on_restart,
    )


def _wait_step(raw: _StepWire) -> Step | str:
    if raw.capability_id or raw.operation_id:
        return f"step {raw.step_id}: a wait step names no capability"
    if raw.wait_s is None or not 0 < raw.wait_s <= MAX_WAIT_S:
        return f"step {raw.step_id}: wait_s must be in (0, {MAX_WAIT_S:g}]"
    return Step(
        step_id=raw.step_id, kind="wait", depends_on=list(raw.depends_on), wait_s=raw.wait_s
    )


def build_steps(
    raws: Iterable[_StepWire], catalog: Catalog, held: frozenset[str], known: Iterable[str] = ()
) -> list[Step] | str:
    """Steps in order; each may depend only on `known` ids and on steps before it. `held`: the
    capabilities a consent grant covers now (the register's, SPEC §5.6)."""
    seen = set(known)
    steps: list[Step] = []
    for raw in raws:
        if raw.step_id in seen:
            return f"duplicate step_id {raw.step_id}"
        missing = [d for d in raw.depends_on if d not in seen]
        if missing:
            return f"step {raw.step_id}: depends_on {missing[0]} which is not an earlier step"
        step = _wait_step(raw) if raw.kind == "wait" else _task_step(raw, catalog, held)
        if isinstance(step, str):
            return step
        steps.append(step)
        seen.add(raw.step_id)
    if len(steps) + len(set(known)) > MAX_STEPS:
        return f"more than {MAX_STEPS} steps"
    return steps


def _apply_experience(
    wf: Workflow, exp: dict[str, Any], effects: EffectCatalog | None, mode: str
) -> None:
    """SPEC §4.5, §4.7: `off` ignores the contract; `shadow` keeps it for the trace only (the
    plan runs on the defaults); `enforce` binds it when it activates."""
    if mode == "off":
        wf.experience_state = "off"
        return
    act = activate(exp, plan_id=wf.plan_id, steps=wf.steps, effects=effects or EffectCatalog({}))
    if act.contract is None:
        refused = "refused" if mode == "enforce" else "shadow_refused"  # shadow: traced only
        wf.experience_refusal, wf.experience_state = act.refusal, refused
        named = exp.get("experience_id") if isinstance(exp, dict) else None
        wf.refused_experience_id = named if isinstance(named, str) and len(named) <= 128 else None
        return
    wf.experience, wf.experience_state = act.contract, "active" if mode == "enforce" else "shadow"
    wf.effect_bindings, wf.subscriptions = act.bindings, act.subscriptions
    wf.refused_events = act.refused_events
    if wf.experience_state != "active":
        return
    wf.max_decisions = wf.max_decisions if act.max_decisions is None else act.max_decisions
    wf.max_replans = wf.max_replans if act.max_replans is None else act.max_replans
    wf.decision_events = list(act.decision_events or wf.decision_events)
    wf.terminal_events = list(act.terminal_events or wf.terminal_events)


def validate_workflow(
    raw: object,
    catalog: Catalog,
    *,
    now: datetime,
    source: str,
    held: Iterable[str] = (),
    effects: EffectCatalog | None = None,
    mode: str = "enforce",
) -> Workflow | Rejected:
    if not isinstance(raw, dict):
        return Rejected("a workflow request must be a JSON object")
    workflow_id = raw.get("workflow_id") if isinstance(raw.get("workflow_id"), str) else None
    if len(raw.get("steps") or []) > MAX_STEPS:
        return Rejected(f"more than {MAX_STEPS} steps", workflow_id)
    try:
        wire = _WorkflowWire.model_validate(raw)
    except ValidationError as exc:
        return Rejected(_first(exc), workflow_id)
    steps = build_steps(wire.steps, catalog, frozenset(held))
    if isinstance(steps, str):
        return Rejected(steps, wire.workflow_id)
    wf = Workflow(
        workflow_id=wire.workflow_id,
        steps=steps,
        plan_id=wire.plan_id,
        source=source,
        created_at=now,
    )
    if wire.experience is not None:
        _apply_experience(wf, wire.experience, effects, mode)
    return wf


def validate_task(
    raw: object, catalog: Catalog, *, now: datetime, fallback_id: str, held: Iterable[str] = ()
) -> Workflow | Rejected:
    """A device task request runs as a one-step workflow named after its task_id."""
    if not isinstance(raw, dict):
        return Rejected("a task request must be a JSON object")
    try:
        wire = _TaskWire.model_validate(raw)
    except ValidationError as exc:
        return Rejected(_first(exc))
    step: dict[str, Any] = {
        "step_id": "task",
        "capability_id": wire.capability_id,
        "operation_id": wire.operation_id,
        "args": wire.args,
    }
    if wire.timeout_s is not None:
        step["timeout_s"] = wire.timeout_s
    return validate_workflow(
        {"workflow_id": wire.task_id or fallback_id, "steps": [step]},
        catalog,
        now=now,
        source="task",
        held=held,
    )


def validate_replan(
    raw_steps: object, wf: Workflow, catalog: Catalog, held: Iterable[str] = ()
) -> list[Step] | str:
    """Steps of a `replan` decision: validated like a new workflow, after the existing ones."""
    if not isinstance(raw_steps, list) or not raw_steps:
        return "replan carries no steps"
    try:
        wires = [_StepWire.model_validate(s) for s in raw_steps]
    except ValidationError as exc:
        return _first(exc)
    return build_steps(wires, catalog, frozenset(held), known=[s.step_id for s in wf.steps])

"""The transitions every event shares: a task's cancel, a step's end, and a failure that asks the
supervisor while the decision budget has room (SPEC §4.2, §4.4). Pure: they change the workflow
the core owns and record what they cause in the context."""

from __future__ import annotations

from typing import Any

from taskmanager.context import Ctx
from taskmanager.derive import step_report
from taskmanager.events import CancelTask
from taskmanager.model import ACTIVE_STEP, FAILURE_STEP, TERMINAL_STEP, Step, Workflow


def cancel_task(wf: Workflow, step: Step, reason: str) -> CancelTask:
    """`P/task/cancel/<capability>` for a dispatched task (SPEC §2)."""
    payload = {
        "task_id": step.task_id(wf.workflow_id),
        "workflow_id": wf.workflow_id,
        "reason": reason,
    }
    return CancelTask(step.capability_id, payload)


def cancel_step(wf: Workflow, step: Step, reason: str, ctx: Ctx) -> None:
    if step.status in ACTIVE_STEP and step.kind == "task":
        ctx.effects.append(cancel_task(wf, step, reason))
    step.status, step.reason = "CANCELLED", reason
    step.ack_deadline = step.deadline = step.wait_until = None
    if reason == "pui":
        step.evidence = {"cancelled_by_pui": True}
    ctx.step_event(wf, step, "CANCELLED", reason)


def fail(wf: Workflow, step: Step, status: str, reason: str | None, ctx: Ctx) -> None:
    """A step ended FAILED/BLOCKED/TIMEOUT (or is NEEDS_USER_INPUT): ask the supervisor while
    the budget has room, else just report."""
    ask = (
        status in wf.decision_events
        and wf.decisions_used < wf.max_decisions
        and wf.awaiting_decision is None
    )
    if ask:
        wf.decisions_used += 1
        if status in TERMINAL_STEP:
            wf.awaiting_decision = step.step_id
    ctx.report(wf, step_report(wf, step), decision=ask, terminal=status in TERMINAL_STEP)
    ctx.trace(
        wf,
        "decision_requested" if ask else "failure",
        step_id=step.step_id,
        status=status,
        reason=reason,
        decisions_used=wf.decisions_used,
    )


def end_step(
    wf: Workflow,
    step: Step,
    status: str,
    reason: str | None,
    ctx: Ctx,
    evidence: dict[str, Any] | None = None,
) -> None:
    step.status, step.reason = status, reason  # type: ignore[assignment]
    step.ack_deadline = step.deadline = step.wait_until = None
    if evidence is not None:
        step.evidence = evidence
    ctx.step_event(wf, step, status, reason)
    if status in FAILURE_STEP:
        fail(wf, step, status, reason, ctx)
    elif status in wf.terminal_events:
        ctx.report(wf, step_report(wf, step), decision=False, terminal=True)

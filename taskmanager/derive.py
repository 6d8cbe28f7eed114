"""What the core derives from a workflow, without changing it: its status, a task's command
(SPEC §2.1), the reason it ended and its cloud report (SPEC §3.3)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from a2a_common.clock import iso
from taskmanager.model import FAILURE_STEP, Step, Workflow, WorkflowStatus


def step_report(wf: Workflow, step: Step) -> dict[str, Any]:
    event: dict[str, Any] = {
        "task_id": step.task_id(wf.workflow_id),
        "step_id": step.step_id,
        "status": step.status,
        "reason": step.reason,
    }
    if step.evidence:
        event["evidence"] = step.evidence
    return event


def command_payload(wf: Workflow, step: Step) -> dict[str, Any]:
    """SPEC §2.1; `task_id` is stable across restarts and re-dispatches, `attempt` grows."""
    assert step.dispatched_at is not None and step.deadline is not None
    return {
        "task_id": step.task_id(wf.workflow_id),
        "workflow_id": wf.workflow_id,
        "step_id": step.step_id,
        "capability_id": step.capability_id,
        "operation_id": step.operation_id,
        "args": step.args,
        "attempt": step.attempt,
        "issued_at": iso(step.dispatched_at),
        "ack_deadline": iso(step.dispatched_at + timedelta(seconds=step.ack_timeout_s)),
        "deadline": iso(step.deadline),
    }


def derive_status(wf: Workflow) -> WorkflowStatus:
    if all(s.terminal for s in wf.steps) and wf.awaiting_decision is None:
        if wf.cancel_reason:
            return "cancelled"
        if wf.end_reason == "supervisor_complete":
            return "completed"
        if any(s.status in FAILURE_STEP and not s.continued for s in wf.steps):
            return "failed"
        if any(
            s.status == "CANCELLED" and s.reason not in ("dependency", "supervisor")
            for s in wf.steps
        ):
            return "cancelled"
        return "completed"
    if wf.question is not None or any(s.status == "NEEDS_USER_INPUT" for s in wf.steps):
        return "waiting_user"
    if any(s.status != "QUEUED" for s in wf.steps):
        return "running"
    return "accepted"


def end_reason(wf: Workflow) -> str | None:
    """Why the workflow ended, for its event and report: the cancel's or the end's reason,
    else the failing step's."""
    if wf.cancel_reason or wf.end_reason:
        return wf.cancel_reason or wf.end_reason
    if wf.status != "failed":
        return None
    failed = [s for s in wf.steps if s.status in FAILURE_STEP and not s.continued]
    return (failed[0].reason or failed[0].status.lower()) if failed else None


def report_body(wf: Workflow, event: dict[str, Any], decision: bool) -> dict[str, Any]:
    """SPEC §3.3 without `request_id` and `device_id` (the shell adds them)."""
    return {
        "workflow_id": wf.workflow_id,
        "experience_id": wf.experience_id,
        "event": {k: v for k, v in event.items() if v is not None},
        "workflow": {
            "status": wf.status,
            "etag": wf.etag,
            "completed_step_ids": [s.step_id for s in wf.steps if s.status == "COMPLETED"],
            "decisions_used": wf.decisions_used,
            "replans_used": wf.replans_used,
        },
        "decision_requested": decision,
    }

"""The step and workflow life cycle of SPEC §4.2 as a pure function.

`decide(board, event, now)` copies the board of active workflows, applies one event, settles
(dependants cancelled, eligible steps dispatched FIFO per resource, waits started, statuses
derived), stamps each changed workflow with etag + 1, and returns the new board with the effects
the shell must carry out (commands, cancels, workflow events, cloud reports, trace lines).
No I/O, no clock: `now` is given. The event handlers are here; settling is taskmanager.settle.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

from taskmanager.board import Board
from taskmanager.context import Ctx, Outcome
from taskmanager.derive import command_payload
from taskmanager.events import (
    Callback,
    Cancel,
    Command,
    Decide,
    Event,
    Ignored,
    Observe,
    Presence,
    Redispatch,
    SetMode,
    Submit,
    Tick,
)
from taskmanager.events import Emit as Emit  # tests import it from here (settle now emits)
from taskmanager.evidence import dropped_detail
from taskmanager.goal import check_completion, on_observe, on_set_mode
from taskmanager.model import ACTIVE_STEP, Step, Workflow, clone, split_task_id
from taskmanager.presence import on_presence
from taskmanager.settle import settle
from taskmanager.steps import cancel_step, cancel_task, end_step, fail


def _on_callback(board: Board, cb: Callback, ctx: Ctx) -> None:
    workflow_id, step_id = split_task_id(cb.task_id)
    wf = board.workflows.get(workflow_id)
    step = wf.step(step_id) if wf else None
    if wf is None or step is None or step.kind != "task":
        ctx.effects.append(Ignored("unknown_task", f"no active task {cb.task_id}"))
        return
    if step.status == "QUEUED":
        ctx.effects.append(Ignored("not_dispatched", f"{cb.task_id} was never dispatched"))
        return
    if step.terminal:
        ctx.effects.append(Ignored("late", f"{cb.task_id} is already {step.status}"))
        return
    if cb.seq <= step.last_seq:
        ctx.effects.append(Ignored("duplicate", f"{cb.task_id} seq {cb.seq} <= {step.last_seq}"))
        return
    wf = ctx.own(workflow_id)
    step = wf.step(step_id)
    assert step is not None
    step.last_seq = cb.seq
    step.ack_deadline = None
    if cb.dropped:  # by key, never a value (SPEC 4.5)
        ctx.trace(
            wf, "evidence_dropped", step_id=step_id, seq=cb.seq, dropped=dropped_detail(cb.dropped)
        )
    if cb.progress is not None:
        step.progress = cb.progress
    if cb.status in ("RUNNING", "PROGRESS"):
        step.status = "RUNNING"
        ctx.step_event(wf, step, cb.status, cb.reason)
    elif cb.status == "NEEDS_USER_INPUT":
        step.status = "NEEDS_USER_INPUT"
        step.reason = cb.reason
        wf.ask_deadline = ctx.now + timedelta(seconds=cb.ask_timeout_s)  # SPEC 4.2
        ctx.step_event(wf, step, cb.status, cb.reason)
        fail(wf, step, cb.status, cb.reason, ctx)
    elif cb.status == "CANCELLED":
        end_step(wf, step, "CANCELLED", cb.reason or "device", ctx, cb.evidence)
    elif cb.status == "COMPLETED" and (
        unproved := check_completion(wf, step, cb.evidence, ctx, cb.contradicted)
    ):  # SPEC 4.5: evidence_missing, evidence_mismatch
        end_step(wf, step, "FAILED", unproved, ctx, cb.evidence)
    else:
        end_step(wf, step, cb.status, cb.reason, ctx, cb.evidence)


def _expired(step: Step, now: datetime) -> str | None:
    """Which of the step's instants has passed: `wait_done`, `ack_timeout`, `timeout`."""
    if (
        step.kind == "wait"
        and step.status == "RUNNING"
        and step.wait_until
        and now >= step.wait_until
    ):
        return "wait_done"
    if step.status == "DISPATCHED" and step.ack_deadline and now >= step.ack_deadline:
        return "ack_timeout"
    if step.status in ACTIVE_STEP and step.deadline and now >= step.deadline:
        return "timeout"
    return None


def _due(wf: Workflow, now: datetime) -> bool:
    asked = wf.ask_deadline is not None and now >= wf.ask_deadline
    return asked or any(_expired(step, now) for step in wf.steps)


def _on_tick(board: Board, ctx: Ctx) -> None:
    now = ctx.now
    due = [w for w, wf in board.workflows.items() if w in board.timed and _due(wf, now)]
    for workflow_id in due:
        wf = ctx.own(workflow_id)
        for step in wf.steps:
            expired = _expired(step, now)
            if expired == "wait_done":
                end_step(wf, step, "COMPLETED", None, ctx)
            elif expired is not None:
                ctx.effects.append(cancel_task(wf, step, "timeout"))
                end_step(wf, step, "TIMEOUT", expired, ctx)
        if wf.ask_deadline and now >= wf.ask_deadline:
            _user_timeout(wf, ctx)


def _user_timeout(wf: Workflow, ctx: Ctx) -> None:
    """The question went unanswered for `ask_timeout_s`: the workflow fails `user_timeout`
    (SPEC 4.2); a task still waiting for the user is told to stop."""
    wf.ask_deadline, wf.question, wf.awaiting_decision = None, None, None
    wf.end_reason = "user_timeout"
    ctx.trace(wf, "ask_expired")
    for step in wf.steps:
        if step.status == "NEEDS_USER_INPUT":
            ctx.effects.append(cancel_task(wf, step, "timeout"))
            step.status, step.reason = "TIMEOUT", "user_timeout"
            step.ack_deadline = step.deadline = step.wait_until = None
            ctx.step_event(wf, step, "TIMEOUT", "user_timeout")


def _on_cancel(board: Board, ev: Cancel, ctx: Ctx) -> None:
    ids = (
        [ev.workflow_id]
        if ev.workflow_id in board.workflows
        else (list(board.workflows) if ev.workflow_id is None else [])
    )
    if ev.workflow_id is not None and not ids:
        ctx.effects.append(Ignored("unknown_workflow", f"no active workflow {ev.workflow_id}"))
    for workflow_id in ids:
        assert workflow_id is not None
        wf = ctx.own(workflow_id)
        wf.cancel_reason = ev.reason
        wf.awaiting_decision, wf.question, wf.ask_deadline = None, None, None
        for step in wf.steps:
            if not step.terminal:
                cancel_step(wf, step, ev.reason, ctx)
        evidence = {"cancelled_by_pui": True} if ev.reason == "pui" else None
        ctx.trace(wf, "cancel", reason=ev.reason, evidence=evidence)


def _dependants(wf: Workflow, step_id: str) -> list[Step]:
    """Steps that depend on `step_id`, directly or through others."""
    found: set[str] = {step_id}
    out: list[Step] = []
    for step in wf.steps:
        if any(d in found for d in step.depends_on):
            found.add(step.step_id)
            out.append(step)
    return out


def _on_decide(board: Board, ev: Decide, ctx: Ctx) -> None:
    if ev.workflow_id not in board.workflows:
        ctx.effects.append(Ignored("unknown_workflow", f"no active workflow {ev.workflow_id}"))
        return
    wf = ctx.own(ev.workflow_id)
    failed_id, wf.awaiting_decision = wf.awaiting_decision, None
    failed = wf.step(failed_id) if failed_id else None
    kind = ev.kind
    if kind == "replan" and (wf.replans_used >= wf.max_replans or not ev.steps):
        ctx.trace(wf, "replan_refused", reason="past max_replans" if ev.steps else "no steps")
        kind = None
    ctx.trace(
        wf,
        "decision",
        decision=kind,
        question=ev.question,
        steps=[s.step_id for s in ev.steps or []],
    )
    if kind == "continue" and failed is not None:
        failed.continued = True
    elif kind == "ask":
        wf.question = ev.question or ""
        wf.awaiting_decision = failed_id
        wf.ask_deadline = ctx.now + timedelta(seconds=ev.ask_timeout_s)
        ctx.wf_event(wf, "ASK", wf.question)
    elif kind == "replan" and ev.steps:
        wf.replans_used += 1
        if failed is not None:
            failed.continued = True
            for dep in _dependants(wf, failed.step_id):
                if dep.status == "QUEUED":
                    cancel_step(wf, dep, "supervisor", ctx)
        wf.steps.extend(copy.deepcopy(ev.steps))
    elif kind == "complete":
        wf.end_reason = "supervisor_complete"
        for step in wf.steps:
            if not step.terminal:
                cancel_step(wf, step, "supervisor", ctx)
    elif kind == "abort":
        _on_cancel(board, Cancel(wf.workflow_id, "supervisor"), ctx)
    ctx.touch(wf)


def _on_redispatch(board: Board, ev: Redispatch, ctx: Ctx) -> None:
    if ev.task_ids is None:
        targets = [(w, s.step_id) for w, wf in board.workflows.items() for s in wf.steps]
    else:
        targets = [split_task_id(task_id) for task_id in ev.task_ids]
    for workflow_id, step_id in targets:
        wf = board.workflows.get(workflow_id)
        step = wf.step(step_id) if wf else None
        if wf is None or step is None or step.kind != "task" or step.status not in ev.statuses:
            continue
        wf = ctx.own(workflow_id)
        step = wf.step(step_id)
        assert step is not None
        if step.deadline is not None and ctx.now >= step.deadline:  # SPEC 4.2: never stale
            ctx.trace(wf, "not_redispatched", task_id=step.task_id(workflow_id), why="deadline")
            continue
        if ev.at_start and step.on_restart == "fail":  # SPEC 4.8: never resumed blindly
            ctx.trace(wf, "not_redispatched", task_id=step.task_id(workflow_id), why="on_restart")
            continue
        step.attempt += 1
        ctx.effects.append(Command(step.capability_id, command_payload(wf, step)))
        ctx.trace(wf, "redispatched", task_id=step.task_id(workflow_id), attempt=step.attempt)


def _on_submit(board: Board, ev: Submit, ctx: Ctx) -> None:
    if ev.workflow.workflow_id in board.workflows:
        ctx.effects.append(Ignored("duplicate", f"{ev.workflow.workflow_id} is active"))
        return
    wf = clone(ev.workflow)  # the submitted one is the caller's: never changed
    ctx.adopt(wf)
    if wf.experience_state is not None:
        ctx.trace(
            wf,
            "experience_activation",
            result=wf.experience_state,
            reason=wf.experience_refusal,
            refused_events=wf.refused_events,
        )
    if wf.experience_state == "refused":  # SPEC 4.5: reported, no decision requested
        event = {
            "status": "EXPERIENCE_REFUSED",
            "reason": wf.experience_refusal,
            "experience_id": wf.refused_experience_id,  # which contract (the workflow has none)
        }
        ctx.report(wf, event, decision=False, terminal=True)
    if wf.experience is not None and wf.experience_state in ("active", "shadow"):
        ctx.trace(
            wf,
            "goal",
            goal_summary=wf.experience.get("goal_summary"),
            desired_effects=wf.experience.get("desired_effects"),
            success_criteria=wf.experience.get("success_criteria"),
            plan_binding=wf.experience.get("plan_binding"),
            binding="verified",
            step_effects={k: [b["effect"] for b in v] for k, v in wf.effect_bindings.items()},
            subscriptions=[s["kind"] for s in wf.subscriptions],
        )
    ctx.wf_event(wf, "WORKFLOW_ACCEPTED", wf.experience_refusal)
    ctx.trace(
        wf,
        "accepted",
        steps=[s.step_id for s in wf.steps],
        experience_refusal=wf.experience_refusal,
    )


def decide(board: Board, event: Event, now: datetime) -> Outcome:
    new = board.copy()
    ctx = Ctx(now, new)
    if isinstance(event, Submit):
        _on_submit(new, event, ctx)
    elif isinstance(event, Callback):
        _on_callback(new, event, ctx)
    elif isinstance(event, Tick):
        if event.deadlines:
            _on_tick(new, ctx)
    elif isinstance(event, Cancel):
        _on_cancel(new, event, ctx)
    elif isinstance(event, Redispatch):
        _on_redispatch(new, event, ctx)
    elif isinstance(event, Observe):
        on_observe(new, event, ctx)
    elif isinstance(event, SetMode):
        on_set_mode(new, event, ctx)
    elif isinstance(event, Presence):
        on_presence(new, event, ctx)
    else:
        _on_decide(new, event, ctx)
    changed = settle(new, ctx)
    return Outcome(new, ctx.effects, changed)

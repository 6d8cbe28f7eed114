"""Agents come and go (SPEC §4.8), as the pure core sees it: what an agent's status does to the
tasks dispatched to it, and whether a step may be dispatched to its agent at all.

The board's `agents` (capability -> (state, boot_id)) is the shell's: it sets it from each
status before the event reaches `decide`. Each step carries the boot it was dispatched under
(`Step.boot_id`) and its operation's policies (`on_agent_lost`, `on_restart`, from the catalog).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta

from taskmanager.board import Board
from taskmanager.context import Ctx
from taskmanager.derive import command_payload
from taskmanager.events import Command, Presence
from taskmanager.model import Step, Workflow
from taskmanager.steps import end_step

IN_FLIGHT = frozenset({"DISPATCHED", "RUNNING"})
# the ends a status decides: no `task/cancel` went to the agent (it was taken for gone)
UNTOLD = frozenset({"agent_lost", "agent_restarted"})


def agent_offline(board: Board, capability_id: str) -> bool:
    """Its agent's last status said `offline` (no status at all: treated as online)."""
    known = board.agents.get(capability_id)
    return known is not None and known[0] == "offline"


def agent_boot(board: Board, capability_id: str) -> str | None:
    """The boot a task dispatched now goes under: the last one its agent named, `offline`
    too (the will names the boot that died; a `wait` task sent then was never heard by it, so
    a new boot must re-send or fail it). None: no status known (the first boot is adopted)."""
    known = board.agents.get(capability_id)
    return known[1] if known is not None else None


def on_presence(board: Board, ev: Presence, ctx: Ctx) -> None:
    """Every in-flight task of the agent's capability, as its operation's policy says. One
    left in flight by a restart of the runtime (dispatched before `run_started`) that its
    agent's `offline` ends ends `agent_restarted`: the robot restarted (SPEC 4.8)."""
    board.agents[ev.capability_id] = (ev.state, ev.boot_id)
    for workflow_id in list(board.workflows):
        wf = board.workflows[workflow_id]
        for index, step in enumerate(wf.steps):
            if (
                step.kind != "task"
                or step.capability_id != ev.capability_id
                or step.status not in IN_FLIGHT
            ):
                continue
            if ev.state == "offline":
                _lost(ctx.own(workflow_id), index, ev, ctx)
            elif ev.boot_id is not None and step.boot_id != ev.boot_id:
                _restarted(ctx.own(workflow_id), index, ev, ctx)


def _trace(wf: Workflow, step: Step, ev: Presence, ctx: Ctx, outcome: str) -> None:
    ctx.trace(
        wf,
        "presence",
        task_id=step.task_id(wf.workflow_id),
        capability_id=ev.capability_id,
        state=ev.state,
        boot_id=ev.boot_id,
        was_boot=step.boot_id,
        at_start=ev.startup,
        outcome=outcome,
    )


def _lost(wf: Workflow, index: int, ev: Presence, ctx: Ctx) -> None:
    step = wf.steps[index]
    if step.on_agent_lost == "wait":  # kept with its deadlines (SPEC 4.8)
        _trace(wf, step, ev, ctx, "kept")
        return
    left = ev.run_started is not None and (
        step.dispatched_at is None or step.dispatched_at < ev.run_started
    )
    _trace(wf, step, ev, ctx, "failed")
    end_step(wf, step, "FAILED", "agent_restarted" if left else "agent_lost", ctx)


def _restarted(wf: Workflow, index: int, ev: Presence, ctx: Ctx) -> None:
    """`online` under a boot other than the task's. A task dispatched while no status was known
    (boot None) adopts the boot: nothing says it was lost. One the agent lists is still its."""
    step = wf.steps[index]
    task_id = step.task_id(wf.workflow_id)
    if step.boot_id is None or task_id in ev.tasks:
        _trace(wf, step, ev, ctx, "held" if step.boot_id is not None else "adopted")
        step.boot_id = ev.boot_id
        return
    live = step.deadline is None or ctx.now < step.deadline
    if step.on_restart == "resend" and live:
        _trace(wf, step, ev, ctx, "resent")
        resend(wf, step, ev.boot_id, ctx)
        return
    _trace(wf, step, ev, ctx, "failed" if live else "failed_past_deadline")
    end_step(wf, step, "FAILED", "agent_restarted", ctx)


def resend(wf: Workflow, step: Step, boot_id: str | None, ctx: Ctx) -> None:
    """The command again to the agent's new boot: same task_id, attempt + 1, its deadline kept,
    a fresh ack window within it. The new process numbers its callbacks from 1: they are
    counted from this attempt on (`epoch_attempt`), the old boot's are stale."""
    step.attempt += 1
    step.epoch_attempt = step.attempt
    step.last_seq = 0
    step.boot_id = boot_id
    step.status = "DISPATCHED"
    ack = ctx.now + timedelta(seconds=step.ack_timeout_s)
    step.ack_deadline = min(ack, step.deadline) if step.deadline else ack
    ctx.effects.append(Command(step.capability_id, command_payload(wf, step)))
    ctx.step_event(wf, step, "DISPATCHED", "agent_restarted")


def still_held(
    capability_id: str,
    tasks: Iterable[str],
    workflow_of: Callable[[str], Workflow | None],
) -> list[tuple[Workflow, Step]]:
    """Tasks an `online` status lists that the runtime ended on a status (`agent_lost`,
    `agent_restarted`: no cancel went) — the agent lived after all (a network blip fired its
    will) and its body may still be moving: each gets a `task/cancel` (SPEC 4.2, 4.8)."""
    held = []
    for task_id in dict.fromkeys(tasks):
        workflow_id, _, step_id = task_id.rpartition(":")
        wf = workflow_of(workflow_id) if workflow_id else None
        step = wf.step(step_id) if wf is not None else None
        if (
            wf is not None
            and step is not None
            and step.kind == "task"
            and step.capability_id == capability_id
            and step.status == "FAILED"
            and step.reason in UNTOLD
        ):
            held.append((wf, step))
    return held

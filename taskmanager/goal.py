"""The Experience layer inside the core (SPEC §4.5-§4.7), pure like the core: a COMPLETED checked
against the evidence its bound effects need, the success criteria at the end, semantic
observations promoted into the workflows that subscribe to them, and the mode stepping down.

In an `active` experience a COMPLETED without the evidence of its step's effects ends the step
FAILED `evidence_missing`, and one whose evidence contradicts the command (another room than the
commanded one, taskmanager/evidence.py) ends it FAILED `evidence_mismatch` — bound to an effect
or not; both are decision events like any FAILED. When every step is done but a criterion is
unmet, one CRITERIA_UNMET decision is asked while the budget has room. In `shadow` the same
checks are traced and nothing else changes. Outside an experience the trace marks a COMPLETED
without evidence unverified, and one with contradicting evidence `contradicted` (unverified
too); the step completes."""

from __future__ import annotations

from typing import Any

from a2a_common.clock import iso
from taskmanager.board import Board
from taskmanager.context import Ctx
from taskmanager.derive import derive_status
from taskmanager.events import Observe, SetMode
from taskmanager.evidence import _same
from taskmanager.model import AWAITING_CRITERIA, AWAITING_OBSERVATION, Step, Workflow

FUTURE_S = 5.0  # an observation may be this far ahead of the device's clock (SPEC 4.6)
MAX_OBSERVATIONS_TRACED = 32  # per workflow; past it they are only counted


def _proved(need: dict[str, Any], evidence: dict[str, Any] | None) -> bool:
    if need.get("key") is None or not evidence or need["key"] not in evidence:
        return False
    values = need.get("values")
    return values is None or any(_same(evidence[need["key"]], v) for v in values)


def check_completion(
    wf: Workflow,
    step: Step,
    evidence: dict[str, Any] | None,
    ctx: Ctx,
    contradicted: tuple[str, ...] = (),
) -> str | None:
    """Trace what a COMPLETED proves; `evidence_mismatch` (its evidence names another target
    than the command's args) or `evidence_missing` when it must end FAILED instead."""
    against = list(contradicted)
    experienced = wf.experience_state in ("active", "shadow")
    bound = wf.effect_bindings.get(step.step_id, []) if experienced else []
    mismatch = "evidence_mismatch" if against and wf.experience_state == "active" else None
    if not bound:
        said: dict[str, Any] = {"contradicted": against} if against else {}
        if against and experienced:
            said["mode"] = wf.experience_state
        ctx.trace(
            wf, "evidence", step_id=step.step_id, verified=bool(evidence) and not against, **said
        )
        return mismatch
    met = [b["effect"] for b in bound if _proved(b, evidence) and b["key"] not in against]
    missing = [b["effect"] for b in bound if b["effect"] not in met]
    step.effects_met = met
    ctx.trace(
        wf,
        "evidence",
        step_id=step.step_id,
        effects=[b["effect"] for b in bound],
        verified=not missing and not against,
        missing=missing,
        mode=wf.experience_state,
        **({"contradicted": against} if against else {}),
    )
    if mismatch or wf.experience_state != "active":
        return mismatch
    return "evidence_missing" if missing else None


def criteria(wf: Workflow) -> dict[str, list[str]]:
    """Which success criteria the steps' evidence proved."""
    wanted = (wf.experience or {}).get("success_criteria") or []
    proved = {e for s in wf.steps if s.status == "COMPLETED" for e in s.effects_met}
    return {
        "met": [c for c in wanted if c in proved],
        "unmet": [c for c in wanted if c not in proved],
    }


def settle_criteria(wf: Workflow, ctx: Ctx) -> None:
    """Every step is done and the workflow would complete: an unmet criterion asks once for a
    decision while the budget has room; else the workflow completes with the unmet list."""
    if (
        wf.experience_state != "active"
        or wf.criteria_asked
        or wf.awaiting_decision is not None
        or wf.end_reason is not None
        or derive_status(wf) != "completed"
    ):
        return
    met = criteria(wf)
    if not met["unmet"]:
        return
    wf.criteria_asked = True
    ask = wf.decisions_used < wf.max_decisions
    if ask:
        wf.decisions_used += 1
        wf.awaiting_decision = AWAITING_CRITERIA
        event = {"status": "CRITERIA_UNMET", "criteria": met}
        ctx.report(wf, event, decision=True, terminal=False)
    ctx.trace(
        wf,
        "decision_requested" if ask else "criteria_unmet",
        status="CRITERIA_UNMET",
        unmet=met["unmet"],
        decisions_used=wf.decisions_used,
    )


def _why_not(wf: Workflow, ev: Observe, ctx: Ctx) -> str | None:
    """None when a subscription of the workflow takes the observation, else why not."""
    subs = [s for s in wf.subscriptions if s["kind"] == ev.kind]
    within = [s for s in subs if all(ev.scope.get(k) == v for k, v in s["scope"].items())]
    if not within:
        return "out_of_scope"
    age = (ctx.now - ev.observed_at).total_seconds()
    if age < -FUTURE_S:
        return "from_the_future"
    if not any(age <= s["max_age_s"] for s in within):
        return "stale"
    return None


def _promote(wf: Workflow, ev: Observe, ctx: Ctx) -> str:
    """A promoted observation is evented; a decision is asked only when it says it needs one
    and the budget has room (telemetry never replans on its own)."""
    if wf.experience_state != "active":
        return "shadow"
    ctx.wf_event(wf, "OBSERVATION", ev.kind)
    if not ev.requires_cloud_decision:
        return "evented"
    if wf.decisions_used >= wf.max_decisions:
        return "budget_spent"
    if wf.awaiting_decision is not None or wf.question is not None:
        return "decision_pending"
    wf.decisions_used += 1
    wf.awaiting_decision = AWAITING_OBSERVATION
    event = {
        "status": "OBSERVATION",
        "observation_id": ev.observation_id,
        "kind": ev.kind,
        "scope": ev.scope,
        "value": ev.value,
        "observed_at": iso(ev.observed_at),
    }
    ctx.report(wf, event, decision=True, terminal=False)
    return "decision_requested"


def on_observe(board: Board, ev: Observe, ctx: Ctx) -> None:
    for workflow_id in sorted(board.workflows):
        seen = board.workflows[workflow_id]
        if seen.experience_state not in ("active", "shadow"):
            continue
        if not any(s["kind"] == ev.kind for s in seen.subscriptions):
            continue
        wf = ctx.own(workflow_id)
        why = _why_not(wf, ev, ctx)
        outcome = _promote(wf, ev, ctx) if why is None else "dropped"
        wf.observations_seen += 1
        ctx.touch(wf)
        if wf.observations_seen <= MAX_OBSERVATIONS_TRACED:
            ctx.trace(
                wf,
                "observation",
                observation_id=ev.observation_id,
                observation_kind=ev.kind,
                scope=ev.scope,
                promoted=why is None,
                why=why,
                outcome=outcome,
                decisions_used=wf.decisions_used,
            )
        if outcome == "decision_requested":  # as a failure's is: the supervisor decides next
            ctx.trace(
                wf,
                "decision_requested",
                status="OBSERVATION",
                observation_kind=ev.kind,
                decisions_used=wf.decisions_used,
            )


def on_set_mode(board: Board, ev: SetMode, ctx: Ctx) -> None:
    """Down only: `off` ends every contract's hold on its workflow, `shadow` keeps it for the
    trace. A contract is activated at acceptance, so `enforce` starts nothing already running."""
    order = {"off": 0, "shadow": 1, "enforce": 2}
    state = {"off": "off", "shadow": "shadow"}.get(ev.mode)
    for workflow_id in sorted(board.workflows):
        seen = board.workflows[workflow_id]
        held = {"active": 2, "shadow": 1}.get(seen.experience_state or "", 0)
        if state is None or held <= order[ev.mode]:
            continue
        wf = ctx.own(workflow_id)
        ctx.trace(wf, "experience_mode", was=wf.experience_state, now=state)
        wf.experience_state = state
        if state == "off":
            wf.subscriptions = []
        ctx.touch(wf)

"""The Experience layer's pure core (SPEC §4.5-§4.7): activation as a table of contracts, the
effect catalog's checks, and evidence/criteria/observations/mode through `decide`."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sim.routing import rest_experience, rest_steps
from taskmanager.effects import load_effects, parse_effects
from taskmanager.errors import EffectsError
from taskmanager.events import Decide, Observe, Report, SetMode, Tick, Trace
from taskmanager.experience import activate
from taskmanager.model import Workflow
from taskmanager.validate import Rejected, validate_workflow
from tests.taskmanager.helpers import CATALOG, T0, Run

EFFECTS = load_effects(CATALOG)
STEPS = rest_steps(60)
GOOD = rest_experience("exp-1", "거실", [s["step_id"] for s in STEPS])


def rest(mode: str = "enforce", **over: Any) -> Workflow:
    raw = {
        "workflow_id": "wf-1",
        "plan_id": "wellness_reset",
        "steps": copy.deepcopy(STEPS),
        "experience": {**copy.deepcopy(GOOD), **over},
    }
    wf = validate_workflow(raw, CATALOG, now=T0, source="planner", effects=EFFECTS, mode=mode)
    assert not isinstance(wf, Rejected), wf
    return wf


def binding(**over: Any) -> dict[str, Any]:
    return {**GOOD["plan_binding"], **over}


def loud_mode(mode: str) -> list[dict[str, Any]]:
    steps = copy.deepcopy(STEPS)
    steps[0]["args"] = {"mode": mode}
    return steps


@pytest.mark.parametrize(
    ("change", "steps", "refusal"),
    [
        ({}, None, None),
        ({"contract_version": "v0"}, None, "contract_version"),
        ({"plan_binding": binding(plan_id="room_clean")}, None, "plan_id 'room_clean'"),
        ({"plan_binding": binding(step_ids=["step_quiet", "step_guide"])}, None, "step_ids"),
        ({"plan_binding": binding(step_ids=["step_quiet"] * 3)}, None, "step_ids"),
        ({"plan_binding": binding(step_count=2)}, None, "step_count"),
        ({"plan_binding": binding(step_count="3")}, None, "step_count"),
        ({"desired_effects": ["teleport_user"]}, None, "unknown effect 'teleport_user'"),
        ({"success_criteria": ["arrived_in_room"]}, None, "'arrived_in_room': no step"),
        ({}, loud_mode("auto"), "'quiet_environment': no step"),  # the argument constraint
        ({"desired_effects": "quiet_environment"}, None, "desired_effects must be a list"),
        ({"goal_summary": 7}, None, "goal_summary"),
        ({"decision_budget": {"max_decisions": 11}}, None, "max_decisions"),
        ({"decision_budget": {"max_replans": True}}, None, "max_replans"),
        ({"observation_policy": {"subscriptions": [{"kind": "noise"}]}}, None, "max_age_s"),
        (
            {
                "observation_policy": {
                    "subscriptions": [{"kind": "n", "scope": {"floor": "1"}, "max_age_s": 5}]
                }
            },
            None,
            "scope names only",
        ),
    ],
)
def test_activation_table(
    change: dict[str, Any], steps: list[dict[str, Any]] | None, refusal: str | None
) -> None:
    raw_steps = steps or STEPS
    wf = validate_workflow(
        {"workflow_id": "wf-1", "plan_id": "wellness_reset", "steps": raw_steps}, CATALOG,
        now=T0, source="planner",
    )  # fmt: skip
    assert not isinstance(wf, Rejected)
    act = activate({**GOOD, **change}, plan_id="wellness_reset", steps=wf.steps, effects=EFFECTS)
    if refusal is None:
        assert act.contract is not None and act.refusal is None
        assert act.bindings["step_quiet"][0]["values"] == ["quiet"]
        assert [s["kind"] for s in act.subscriptions] == ["noise", "air_quality"]
    else:
        assert act.contract is None and act.refusal is not None and refusal in act.refusal


def test_an_unknown_event_is_refused_by_name_and_the_rest_holds() -> None:
    policy = {"decision_events": ["FAILED", "SEMANTIC_CHANGE", "OBSERVATION"]}
    wf = rest(task_event_policy=policy, decision_budget={"max_decisions": 1, "max_replans": 0})
    assert wf.experience_state == "active" and wf.refused_events == ["SEMANTIC_CHANGE"]
    assert wf.decision_events == ["FAILED", "OBSERVATION"]
    assert (wf.max_decisions, wf.max_replans) == (1, 0)


@pytest.mark.parametrize(
    ("mode", "state", "budget"),
    [("enforce", "active", 1), ("shadow", "shadow", 3), ("off", "off", 3)],
)
def test_the_mode_decides_what_a_contract_does(mode: str, state: str, budget: int) -> None:
    wf = rest(mode, decision_budget={"max_decisions": 1})
    assert wf.experience_state == state and wf.max_decisions == budget


@pytest.mark.parametrize(
    ("effects", "why"),
    [
        ({"x": {"providers": [{"capability_id": "mobility", "operation_id": "fly",
                               "evidence": {"key": "k"}}]}}, "not in the capability catalog"),
        ({"x": {"providers": [{"capability_id": "mobility", "operation_id": "move_to_room",
                               "evidence": {"key": "systolic"}}]}}, "not on its allowlist"),
        ({"x": {"providers": [{"capability_id": "mobility", "operation_id": "move_to_room"}]}},
         "names the evidence"),
        ({"Bad-Id": {"providers": [{"skill_id": "s"}]}}, "an effect id"),
        ({"x": {"providers": []}}, "providers"),
        ([], "non-empty object"),
    ],
)  # fmt: skip
def test_a_bad_effect_catalog_is_refused_with_where(effects: Any, why: str) -> None:
    with pytest.raises(EffectsError, match=why):
        parse_effects(effects, "effects.json", CATALOG)


EVIDENCE_CASES = [
    ({"purifier_mode": "quiet"}, "COMPLETED", None),
    ({"purifier_mode": "auto"}, "FAILED", "evidence_missing"),  # not the value it needs
    ({}, "FAILED", "evidence_missing"),
    (None, "FAILED", "evidence_missing"),
]


@pytest.mark.parametrize(("evidence", "status", "reason"), EVIDENCE_CASES)
def test_a_completed_counts_only_with_its_evidence(
    evidence: Any, status: str, reason: str | None
) -> None:
    run = Run()
    run.submit(rest())
    run.cb("wf-1:step_quiet", 1, "COMPLETED", evidence=evidence)
    assert run.board.workflows["wf-1"].step("step_quiet").status == status  # type: ignore[union-attr]
    failed = [r for r in run.reports() if r.body["event"]["status"] == "FAILED"]
    assert bool(failed) == (reason is not None)
    if failed:
        assert failed[0].decision_requested and failed[0].body["event"]["reason"] == reason


def finish(run: Run, quiet: Any, decide: str | None = "continue") -> None:
    run.cb("wf-1:step_quiet", 1, "COMPLETED", evidence=quiet)
    if run.board.workflows["wf-1"].awaiting_decision and decide is not None:
        run(Decide("wf-1", decide))
    run.cb("wf-1:step_guide", 1, "COMPLETED", evidence={"guidance_played": True})
    run(Tick(), at=120)  # the rest's wait ends


@pytest.mark.parametrize(
    ("quiet", "budget", "asked", "met", "unmet"),
    [
        ({"purifier_mode": "quiet"}, 3, False, ["quiet_environment", "rest_guidance_delivered"],
         []),
        ({}, 3, True, ["rest_guidance_delivered"], ["quiet_environment"]),
        ({}, 1, False, ["rest_guidance_delivered"], ["quiet_environment"]),  # the budget is spent
    ],
)  # fmt: skip
def test_criteria_table(
    quiet: Any, budget: int, asked: bool, met: list[str], unmet: list[str]
) -> None:
    run = Run()
    run.submit(rest(decision_budget={"max_decisions": budget}))
    finish(run, quiet)
    criteria_asks = [r for r in run.reports() if r.body["event"]["status"] == "CRITERIA_UNMET"]
    assert bool(criteria_asks) == asked
    if asked:
        assert run.status() == "running"  # it waits for the supervisor
        run(Decide("wf-1", None))  # none came: it ends with the unmet list
    terminal = [r for r in run.reports() if r.body["event"]["status"] == "WORKFLOW_COMPLETED"]
    assert terminal and terminal[0].body["event"]["criteria"] == {"met": met, "unmet": unmet}


def observe(run: Run, *, age_s: float = 1, room: str = "거실", decide: bool = True) -> None:
    run(
        Observe(
            "o", "noise", run.now - timedelta(seconds=age_s), {"room": room}, {"db": 70}, decide
        )
    )


@pytest.mark.parametrize(
    ("age_s", "room", "why", "asked"),
    [
        (1, "거실", None, True),
        (61, "거실", "stale", False),
        (-6, "거실", "from_the_future", False),
        (-4, "거실", None, True),
        (1, "안방", "out_of_scope", False),
    ],
)
def test_observation_table(age_s: float, room: str, why: str | None, asked: bool) -> None:
    run = Run()
    run.submit(rest())
    observe(run, age_s=age_s, room=room)
    traced = [t.detail for t in run.of(Trace) if t.kind == "observation"]
    assert traced[0]["why"] == why and traced[0]["promoted"] == (why is None)
    asks = [r for r in run.of(Report) if r.body["event"]["status"] == "OBSERVATION"]
    assert bool(asks) == asked
    assert ((None, "OBSERVATION") in run.events()) == (why is None)


def test_a_refusal_in_shadow_is_traced_not_reported() -> None:
    run = Run()
    run.submit(rest("shadow", desired_effects=["teleport_user"]))
    activation = [t.detail for t in run.of(Trace) if t.kind == "experience_activation"]
    assert (
        activation[0]["result"] == "shadow_refused" and "teleport_user" in activation[0]["reason"]
    )
    assert not run.of(Report)


def test_observations_ask_only_within_the_budget_and_never_in_shadow() -> None:
    run = Run()
    run.submit(rest(decision_budget={"max_decisions": 1}))
    observe(run)
    run(Decide("wf-1", "continue"))
    observe(run)
    asks = [r for r in run.of(Report) if r.body["event"]["status"] == "OBSERVATION"]
    assert len(asks) == 1
    outcomes = [t.detail["outcome"] for t in run.of(Trace) if t.kind == "observation"]
    assert outcomes == ["decision_requested", "budget_spent"]
    shadow = Run()
    shadow.submit(rest("shadow"))
    observe(shadow)
    assert not shadow.of(Report) and (None, "OBSERVATION") not in shadow.events()


def test_off_steps_an_active_contract_down_at_once() -> None:
    run = Run()
    run.submit(rest())
    run(SetMode("off"))
    run.cb("wf-1:step_quiet", 1, "COMPLETED", evidence={})
    assert run.board.workflows["wf-1"].step("step_quiet").status == "COMPLETED"  # type: ignore[union-attr]
    observe(run)
    assert not [t for t in run.of(Trace) if t.kind == "observation"]


def test_an_active_experience_survives_a_restart(tmp_path: Path) -> None:
    """What activation bound is in the workflow's doc: a restarted TaskManager still checks."""
    from a2a_common.clock import ManualClock
    from taskmanager.events import Callback
    from tests.taskmanager.helpers import ReportSink
    from tests.taskmanager.test_service import manager

    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    raw = {"workflow_id": "wf-1", "plan_id": "wellness_reset", "steps": STEPS, "experience": GOOD}
    assert tm.submit(raw, source="planner").accepted == ["wf-1"]
    sink = ReportSink()
    again, _ = manager(tmp_path / "s.db", clock, sink)  # a new process over the same file
    wf = again.board.workflows["wf-1"]
    assert wf.experience_state == "active" and wf.subscriptions[0]["kind"] == "noise"
    again.callback(Callback("wf-1:step_quiet", 1, "COMPLETED", evidence={}))
    assert [r.body["event"]["reason"] for r in sink.reports] == ["evidence_missing"]

"""The Experience layer through the real process (SPEC §4.5-§4.7, seed 003): contracts activated
only when they bind, refusals reported, success checked against terminal evidence, criteria on
the terminal report, semantic observations on `P/observation`, and the device's mode switch.
Each test names the break it was written for ("before": what main did)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from sim.cloud import SimCloud
from sim.perception import PerceptionAgent
from sim.probe import MqttProbe
from sim.routing import rest_experience, rest_steps
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, refusal, workflow_event
from tests.e2e.test_cli import Cli, cli  # noqa: F401  (the fixture)
from tests.e2e.traces import trace_entries

REPORTS = "/v1/a2a/workflow/events"
REST_TEXT = "오늘 너무 피곤해. 10분 동안 편하게 쉴 수 있게 도와줘."
ROOM_CLEAN = [
    {"step_id": "step_move", "capability_id": "mobility", "operation_id": "move_to_room",
     "args": {"room": "안방"}},
    {"step_id": "step_purify", "capability_id": "air_purifier", "operation_id": "start",
     "args": {"mode": "auto"}, "depends_on": ["step_move"]},
]  # fmt: skip


SAY = [{"step_id": "step_say", "capability_id": "speaker", "operation_id": "say"}]


def contract(exp_id: str, plan_id: str, steps: list[dict[str, Any]], **over: Any) -> Any:
    exp = rest_experience(exp_id, "거실", [s["step_id"] for s in steps])
    exp["plan_binding"]["plan_id"] = plan_id
    return {**exp, **over}


def push(probe: MqttProbe, wf: str, plan_id: str, steps: list[Any], exp: Any) -> None:
    body = {"workflow_id": wf, "plan_id": plan_id, "steps": steps, "experience": exp}
    probe.publish(f"{ROOT}/workflow/request", body)
    workflow_event(probe, wf, "WORKFLOW_ACCEPTED")


def reports(cloud: SimCloud, wf: str, status: str | None = None) -> list[Any]:
    bodies = [r["body"] for r in cloud.requests(REPORTS) if r["body"]["workflow_id"] == wf]
    return [b for b in bodies if status is None or b["event"]["status"] == status]


def report(cloud: SimCloud, wf: str, status: str) -> Any:
    return eventually(lambda: reports(cloud, wf, status))[0]


def callback(probe: MqttProbe, task_id: str, seq: int, status: str, evidence: Any = None) -> None:
    body = {"task_id": task_id, "seq": seq, "status": status, "evidence": evidence}
    probe.publish(f"{ROOT}/task/callback", body)


def command(probe: MqttProbe, task_id: str) -> Any:
    capability = {"quiet": "air_purifier", "guide": "content", "move": "mobility", "say": "speaker"}
    cap = capability[task_id.rpartition(":step_")[2]]
    return probe.wait_for(f"{ROOT}/task/command/{cap}", lambda b: b.get("task_id") == task_id)


def trace(state_rows: StateRows, wf: str) -> list[tuple[str, Any]]:
    return [(kind, json.loads(detail)) for kind, detail in trace_entries(state_rows, wf)]


def kinds(state_rows: StateRows, wf: str) -> list[str]:
    return [k if k != "event" else f"event:{d.get('status')}" for k, d in trace(state_rows, wf)]


def test_a_contract_that_does_not_bind_is_refused_reported_and_the_plan_runs(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    """Before: `desired_effects: ["teleport_user"]` was accepted; the sim's rest plan claimed
    `quiet_environment` with no step providing it and still completed; a contract of another
    plan (wellness_reset on room_clean) was accepted; a refusal never reached the cloud; an
    unknown decision event (`SEMANTIC_CHANGE`) dropped the whole contract, budget included."""
    runtime_factory()
    teleport = contract("exp-t", "room_clean", ROOM_CLEAN, desired_effects=["teleport_user"])
    push(probe, "wf-tele", "room_clean", ROOM_CLEAN, teleport)
    refused = report(cloud, "wf-tele", "EXPERIENCE_REFUSED")
    assert "teleport_user" in refused["event"]["reason"] and not refused["decision_requested"]
    assert refused["event"]["experience_id"] == "exp-t" and refused["experience_id"] is None
    command(probe, "wf-tele:step_move")  # the plan runs plain
    # what the sim planned before: guidance and a wait, no quiet step
    old_rest: list[dict[str, Any]] = [
        {"step_id": "step_guide", "capability_id": "content", "operation_id": "play_guidance"},
        {"step_id": "step_rest", "kind": "wait", "wait_s": 30, "depends_on": ["step_guide"]},
    ]
    push(probe, "wf-old", "wellness_reset", old_rest, contract("exp-o", "wellness_reset", old_rest))
    reason = report(cloud, "wf-old", "EXPERIENCE_REFUSED")["event"]["reason"]
    assert "quiet_environment" in reason and "no step" in reason, reason
    no_effects: dict[str, Any] = {"desired_effects": [], "success_criteria": []}
    other_plan = contract("exp-p", "wellness_reset", ROOM_CLEAN, **no_effects)
    push(probe, "wf-plan", "room_clean", ROOM_CLEAN, other_plan)
    assert "plan_id" in report(cloud, "wf-plan", "EXPERIENCE_REFUSED")["event"]["reason"]
    policy = {"decision_events": ["FAILED", "SEMANTIC_CHANGE"], "terminal_events": ["COMPLETED"]}
    budget = {"max_decisions": 1}
    semantic = contract("exp-s", "say", SAY, **no_effects, task_event_policy=policy)
    push(probe, "wf-sem", "say", SAY, {**semantic, "decision_budget": budget})
    command(probe, "wf-sem:step_say")
    callback(probe, "wf-sem:step_say", 1, "FAILED")
    failed = report(cloud, "wf-sem", "FAILED")
    assert failed["experience_id"] == "exp-s" and failed["decision_requested"]  # the budget held
    activation = dict(trace(state_rows, "wf-sem"))["experience_activation"]
    assert activation == {"result": "active", "reason": None, "refused_events": ["SEMANTIC_CHANGE"]}
    assert not reports(cloud, "wf-sem", "EXPERIENCE_REFUSED")

    reply = probe.turn("t-rest", REST_TEXT)  # the sim planner's rest plan binds now
    (wf,) = reply["workflow_ids"]
    assert command(probe, f"{wf}:step_quiet")["args"] == {"mode": "quiet"}
    rows = dict(trace(state_rows, wf))
    assert rows["experience_activation"]["result"] == "active", rows
    assert rows["goal"]["binding"] == "verified"
    assert rows["goal"]["step_effects"] == {
        "step_quiet": ["quiet_environment"],
        "step_guide": ["rest_guidance_delivered"],
    }
    assert rows["request"]["turn_id"] == "t-rest" and rows["request"]["pair_id"]
    assert REST_TEXT not in json.dumps(rows, ensure_ascii=False)  # ids, not the words


def test_success_needs_evidence_and_the_trace_reads_in_the_seeds_order(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
    cli: Cli,  # noqa: F811
) -> None:
    """Before: a COMPLETED with empty evidence completed every step, experience or not; the
    trace showed the contract but not the binding, the effects of each step, or the criteria."""
    runtime = runtime_factory()
    steps = rest_steps(0.3)
    push(probe, "wf-r", "wellness_reset", steps, contract("exp-r", "wellness_reset", steps))
    command(probe, "wf-r:step_quiet")
    callback(probe, "wf-r:step_quiet", 1, "RUNNING")
    callback(probe, "wf-r:step_quiet", 2, "COMPLETED", {})  # the purifier claims, proves nothing
    missing = report(cloud, "wf-r", "FAILED")
    assert missing["event"]["reason"] == "evidence_missing" and missing["decision_requested"]
    eventually(lambda: "decision" in kinds(state_rows, "wf-r"))  # continue: the rest goes on
    command(probe, "wf-r:step_guide")
    callback(probe, "wf-r:step_guide", 1, "COMPLETED", {"guidance_played": True})
    done = report(cloud, "wf-r", "WORKFLOW_COMPLETED")  # continue, then CRITERIA_UNMET: complete
    assert done["event"]["criteria"] == {
        "met": ["rest_guidance_delivered"],
        "unmet": ["quiet_environment"],
    }
    unmet = report(cloud, "wf-r", "CRITERIA_UNMET")
    assert unmet["decision_requested"] and unmet["workflow"]["decisions_used"] == 2
    order = kinds(state_rows, "wf-r")
    expected = ["request", "experience_activation", "goal", "accepted", "evidence",
                "decision_requested", "decision", "evidence", "decision_requested", "decision",
                "criteria", "finished"]  # fmt: skip
    assert [k for k in order if not k.startswith("event:")] == expected, order
    shown = cli.json("workflows", "trace", "wf-r", "--config", str(runtime.config))
    evidence = [e for e in shown["timeline"] if e["kind"] == "evidence"]
    assert evidence[0]["verified"] is False and evidence[0]["missing"] == ["quiet_environment"]
    assert evidence[1]["verified"] is True
    code, text, _err = cli("workflows", "trace", "wf-r", "--config", str(runtime.config))
    assert code == 0 and "experience exp-r [active]" in text and "criteria" in text, text

    plain = [{"step_id": "s", "capability_id": "speaker", "operation_id": "say"}]
    push(probe, "wf-plain", "", plain, None)
    command_body = probe.wait_for(
        f"{ROOT}/task/command/speaker", lambda b: "wf-plain" in b["task_id"]
    )
    callback(probe, command_body["task_id"], 1, "COMPLETED")
    workflow_event(probe, "wf-plain", "WORKFLOW_COMPLETED")  # outside an experience: it completes
    assert dict(trace(state_rows, "wf-plain"))["evidence"] == {"step_id": "s", "verified": False}


@pytest.fixture
def perception(probe: MqttProbe, broker: Any) -> Any:
    agent = PerceptionAgent(broker.port, ROOT)
    yield agent
    agent.close()


def test_observations_are_validated_promoted_bounded_and_reach_the_next_turn(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
    perception: PerceptionAgent,
) -> None:
    """Before: there was no observation input at all: a message on `P/observation` went
    nowhere (no refusal, no event, nothing in the next turn)."""
    runtime_factory()
    bad = perception.body("noise", {"level_db": 60})
    probe.publish(f"{ROOT}/observation", {**bad, "observed_at": "yesterday"})
    refusal(probe, "invalid_field", observation_id=bad["observation_id"])
    steps = rest_steps(30)
    push(probe, "wf-o", "wellness_reset", steps, contract("exp-o", "wellness_reset", steps))
    stale = perception.noise(70, fault="stale", requires_cloud_decision=True)[0]
    elsewhere = perception.noise(70, fault="out_of_scope", requires_cloud_decision=True)[0]
    loud = perception.noise(70, requires_cloud_decision=True)[0]
    event = workflow_event(probe, "wf-o", "OBSERVATION")
    assert event["reason"] == "noise"
    asked = report(cloud, "wf-o", "OBSERVATION")
    assert asked["decision_requested"] and asked["event"]["observation_id"] == loud
    assert asked["event"]["scope"] == {"room": "거실"} and asked["event"]["value"]["level_db"] == 70
    said = probe.wait_for(f"{ROOT}/task/command/speaker", lambda b: "wf-o" in b["task_id"])
    assert said["step_id"].startswith("step_soothe")  # the supervisor decided: one replan
    seen = {d["observation_id"]: d for k, d in trace(state_rows, "wf-o") if k == "observation"}
    assert seen[stale]["why"] == "stale" and seen[elsewhere]["why"] == "out_of_scope"
    assert seen[loud]["outcome"] == "decision_requested"
    again = perception.noise(75, requires_cloud_decision=False)[0]  # evented, not asked
    eventually(lambda: any(d.get("observation_id") == again for _, d in trace(state_rows, "wf-o")))
    assert len(reports(cloud, "wf-o", "OBSERVATION")) == 1

    flood = perception.air_quality(12, fault="flood")
    limited = eventually(
        lambda: [e for e in probe.messages(f"{ROOT}/runtime/error") if e["error"] == "rate_limited"]
    )
    assert limited[0]["ref"]["observation_id"] in flood
    assert len(limited) < len(flood)  # a burst got through, the rest was refused
    probe.turn("t-obs", "안녕")
    context = cloud.requests("/v1/a2a/turn")[-1]["body"]["device_context"]
    observed = context["observations"]
    assert set(observed) == {"noise", "air_quality"}, observed
    assert observed["noise"]["value"]["level_db"] == 75  # the latest (a stale one is not)
    assert observed["air_quality"]["scope"] == {"room": "거실"}


def test_mode_switches_through_sighup_and_status_shows_it(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
    cli: Cli,  # noqa: F811
) -> None:
    """Before: there was no device-side switch: any contract that arrived was applied (and an
    `[experience]` section did not exist)."""
    runtime = runtime_factory(experience={"mode": "enforce"})
    config = ("--config", str(runtime.config))
    assert cli.json("status", *config)["experience_mode"] == "enforce"
    steps = rest_steps(30)
    push(probe, "wf-e", "wellness_reset", steps, contract("exp-e", "wellness_reset", steps))

    def reload(mode: str) -> None:
        text = runtime.config.read_text(encoding="utf-8")
        for old in ("enforce", "shadow", "off"):
            text = text.replace(f'mode = "{old}"', f'mode = "{mode}"')
        runtime.config.write_text(text, encoding="utf-8")
        assert runtime.proc is not None
        runtime.proc.send_signal(signal.SIGHUP)
        eventually(lambda: f"reloaded: experience mode {mode}" in runtime.log())

    reload("shadow")
    assert cli.json("status", *config)["experience_mode"] == "shadow"
    callback(probe, "wf-e:step_quiet", 1, "COMPLETED", {})  # checked and traced, not enforced
    workflow_event(probe, "wf-e", "COMPLETED")
    checked = [d for k, d in trace(state_rows, "wf-e") if k == "evidence"]
    assert checked[0]["verified"] is False and checked[0]["mode"] == "shadow"
    assert not reports(cloud, "wf-e", "FAILED")

    reload("off")
    assert cli.json("status", *config)["experience_mode"] == "off"
    bad = contract("exp-x", "wellness_reset", steps, desired_effects=["teleport_user"])
    push(probe, "wf-x", "wellness_reset", steps, bad)
    assert dict(trace(state_rows, "wf-x"))["experience_activation"]["result"] == "off"
    callback(probe, "wf-x:step_quiet", 1, "COMPLETED", {})
    workflow_event(probe, "wf-x", "COMPLETED")
    assert not reports(cloud, "wf-x", "EXPERIENCE_REFUSED")  # contracts are ignored
    modes = [d for k, d in trace(state_rows, "wf-e") if k == "experience_mode"]
    assert modes == [{"was": "active", "now": "shadow"}, {"was": "shadow", "now": "off"}]


def test_a_bad_effect_catalog_stops_the_start_with_exit_2(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cli: Cli,  # noqa: F811
) -> None:
    """The effect catalog is checked against the capability catalog before anything opens."""
    bad = tmp_path / "effects.json"
    bad.write_text(
        json.dumps(
            {
                "quiet_environment": {
                    "providers": [
                        {
                            "capability_id": "air_purifier",
                            "operation_id": "set_mode",
                            "evidence": {"key": "decibels"},
                        }
                    ]
                }
            }
        ),
        encoding="utf-8",
    )
    runtime = runtime_factory(experience={"effects_file": str(bad)}, wait_ready=False)
    assert runtime.proc is not None and runtime.proc.wait(timeout=20) == 2
    assert "experience.effects_file" in runtime.log() and "decibels" in runtime.log()
    code, _out, err = cli("config", "check", "--config", str(runtime.config))
    assert code == 2 and "not on its allowlist" in err, err

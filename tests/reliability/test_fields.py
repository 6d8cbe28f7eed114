"""Fields from agents and front-ends that once escaped their bounds (SPEC §2, §2.2, §4.3):
callback `seq` types and range, workflow ids that a refused request used up, pushes with an
id already taken, and turns too old to act on."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

from a2a_common.clock import iso
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, eventually, refusal
from tests.taskmanager.helpers import MOVE_PURIFY

ERRORS, EVENTS = f"{ROOT}/runtime/error", f"{ROOT}/workflow/event"
MOVE = "wf-s:step_move"


BAD_SEQS: list[Any] = ["6", True, 7.0, 0, -1, 2**31, 2**53]


def test_a_callback_seq_must_be_an_integer_in_range(
    runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: "6", true and 7.0 were accepted; 2**53 left the task unable to complete."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-s"})
    probe.wait_for(EVENTS, lambda b: b["task_id"] == MOVE and b["status"] == "RUNNING")
    for seq in BAD_SEQS:
        probe.publish(f"{ROOT}/task/callback", {"task_id": MOVE, "seq": seq, "status": "PROGRESS"})
    eventually(lambda: len(_seq_refusals(probe)) == len(BAD_SEQS))
    devices.complete(MOVE)  # the agent's own next seq still completes the step
    probe.wait_for(EVENTS, lambda b: b["task_id"] == MOVE and b["status"] == "COMPLETED")
    progress = [
        e for e in probe.messages(EVENTS) if e["task_id"] == MOVE and e["status"] == "PROGRESS"
    ]
    assert progress == []  # none of them was applied


def _seq_refusals(probe: MqttProbe) -> list[Any]:
    return [
        b
        for b in probe.messages(ERRORS)
        if b.get("error") == "invalid_field"
        and b.get("ref", {}).get("task_id") == MOVE
        and b["detail"].startswith("seq")
    ]


def test_only_accepted_workflows_reserve_their_id(
    runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: a refused request used its id up (a later valid one was "a duplicate"), and a
    push with an active id was ignored at INFO."""
    runtime_factory()
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-r", "steps": []})
    probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == "wf-r" and b["status"] == "WORKFLOW_REJECTED"
    )
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-r"})
    probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == "wf-r" and b["status"] == "WORKFLOW_ACCEPTED"
    )
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-r"})
    assert refusal(probe, "duplicate_workflow_id", workflow_id="wf-r")


def test_a_stale_turn_is_rejected_and_starts_nothing(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    cloud.script_turn(device_workflow_requests=[{**MOVE_PURIFY, "workflow_id": "wf-old"}])
    spoken = iso(datetime.now(UTC) - timedelta(seconds=45))
    answer = probe.turn("t-old", "안방으로 가서 청정해줘", spoken_at=spoken)
    assert answer["status"] == "rejected" and answer["error"] == "stale"
    assert cloud.requests("/v1/a2a/turn") == []  # nothing was asked, nothing started
    fresh = iso(datetime.now(UTC))
    assert probe.turn("t-new", "안녕", spoken_at=fresh)["status"] == "ok"
    bad = probe.turn("t-bad", "안녕", spoken_at="yesterday")
    assert bad["status"] == "rejected" and bad["error"] == "invalid_field"


def test_turns_held_across_a_stop_are_not_acted_on(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """Before: turns held across a 30 s SIGSTOP were answered `ok` and their workflows started."""
    runtime = runtime_factory(mqtt={"turn_max_age_s": 1.0})
    assert runtime.proc is not None
    cloud.script_turn(device_workflow_requests=[{**MOVE_PURIFY, "workflow_id": "wf-late"}])
    os.kill(runtime.proc.pid, signal.SIGSTOP)
    try:
        spoken = iso(datetime.now(UTC))
        probe.publish(
            f"{ROOT}/turn/request",
            {"turn_id": "t-held", "recognized_text": "청정해줘", "spoken_at": spoken},
        )
        eventually(
            lambda: datetime.now(UTC) > datetime.fromisoformat(spoken) + timedelta(seconds=1.5)
        )
    finally:
        os.kill(runtime.proc.pid, signal.SIGCONT)
    answer = probe.wait_for(f"{ROOT}/turn/response", lambda b: b["turn_id"] == "t-held")
    assert answer["status"] == "rejected" and answer["error"] == "stale"
    assert not [e for e in probe.messages(EVENTS) if e["workflow_id"] == "wf-late"]

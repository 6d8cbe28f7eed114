"""What an integrator can count on (SPEC §2, §2.1, §2.4, §4.2), through a real Mosquitto and the
real process: every turn answered, refusals that name their request, the ack window in every
command, outcomes that say why, and feedback for every PUI press."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, eventually, refusal, workflow_event
from tests.taskmanager.helpers import MOVE_PURIFY

TURN_REQ, TURN_RESP = f"{ROOT}/turn/request", f"{ROOT}/turn/response"
ERRORS, EVENTS = f"{ROOT}/runtime/error", f"{ROOT}/workflow/event"
PUI, PUI_RESULT = f"{ROOT}/pui/event", f"{ROOT}/pui/result"


def answers(probe: MqttProbe, turn_id: str) -> list[Any]:
    return [b for b in probe.messages(TURN_RESP) if b.get("turn_id") == turn_id]


def push(probe: MqttProbe, workflow_id: str, **changes: Any) -> None:
    probe.publish(
        f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": workflow_id, **changes}
    )


def callback(probe: MqttProbe, task_id: str, seq: int, status: str) -> None:
    probe.publish(f"{ROOT}/task/callback", {"task_id": task_id, "seq": seq, "status": status})


def test_every_turn_is_answered(runtime_factory: RuntimeFactory, probe: MqttProbe) -> None:
    """Before: an empty utterance, a retried turn_id and a reused one each got silence."""
    runtime_factory()
    probe.publish(TURN_REQ, {"turn_id": "t-empty", "recognized_text": ""})
    rejected = probe.wait_for(TURN_RESP, lambda b: b["turn_id"] == "t-empty")
    assert rejected == {
        "turn_id": "t-empty",
        "status": "rejected",
        "assistant_text": "",
        "route_family": "",
        "workflow_ids": [],
        "error": "invalid_field",
    }
    assert refusal(probe, "invalid_field", turn_id="t-empty")

    first = probe.turn("t-1", "안녕")
    probe.publish(TURN_REQ, {"turn_id": "t-1", "recognized_text": "안녕"})  # the front-end retried
    eventually(lambda: len(answers(probe, "t-1")) == 2)
    assert answers(probe, "t-1") == [first, first]  # the same payload, nothing ran twice

    probe.publish(TURN_REQ, {"turn_id": "t-1", "recognized_text": "다른 말"})
    eventually(lambda: len(answers(probe, "t-1")) == 3)
    reused = answers(probe, "t-1")[-1]
    assert reused["status"] == "rejected" and reused["error"] == "duplicate_turn_id"
    assert reused["assistant_text"] == ""


def test_refusals_carry_the_ids_of_what_they_refuse(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    runtime_factory()
    probe.publish(f"{ROOT}/pui/event", {"event_id": "e-bad", "kind": "explode"})
    assert refusal(probe, "invalid_field", event_id="e-bad")
    callback(probe, "wf-x:s", 1, "RUNNING")
    assert refusal(probe, "unknown_task", task_id="wf-x:s", seq=1)
    probe.publish(f"{ROOT}/admin/request", {"request_id": "r-2", "command": "nope"})
    assert refusal(probe, "invalid_field", request_id="r-2")
    probe.publish(f"{ROOT}/turn/request", b"{not json")
    bad = probe.wait_for(ERRORS, lambda b: b.get("error") == "invalid_json")
    assert "ref" not in bad  # nothing readable to echo

    # a new seq for a task that has ended is refused; a repeat of an applied one is silent
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-t"})
    probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == "wf-t" and b["status"] == "WORKFLOW_COMPLETED"
    )
    done = max(devices.tasks["wf-t:step_move"].seq, 1)
    probe.publish(
        f"{ROOT}/task/callback", {"task_id": "wf-t:step_move", "seq": done, "status": "COMPLETED"}
    )
    probe.publish(
        f"{ROOT}/task/callback",
        {"task_id": "wf-t:step_move", "seq": done + 5, "status": "COMPLETED"},
    )
    late = refusal(probe, "task_terminal", task_id="wf-t:step_move")
    assert late["ref"]["seq"] == done + 5
    terminal = [b for b in probe.messages(ERRORS) if b.get("error") == "task_terminal"]
    assert len(terminal) == 1  # the repeat of the applied seq was not refused


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_every_command_carries_its_ack_window_and_the_runtime_keeps_it(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """Before: only `deadline` was sent; a step with only a short timeout_s was rejected."""
    runtime_factory()
    step = {**MOVE_PURIFY["steps"][0], "timeout_s": 1.5}  # shorter than the catalog's 5 s ack
    probe.publish(
        f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-ack", "steps": [step]}
    )
    command = probe.wait_for(
        f"{ROOT}/task/command/mobility", lambda b: b["workflow_id"] == "wf-ack"
    )
    issued, ack = _instant(command["issued_at"]), _instant(command["ack_deadline"])
    assert ack - issued == timedelta(seconds=1.5)  # ack = timeout, not a rejection
    timeout = probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == "wf-ack" and b["status"] == "TIMEOUT"
    )
    assert timeout["reason"] == "ack_timeout"
    assert _instant(timeout["ts"]) >= ack


def test_outcomes_say_why(
    runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents, tmp_path: Any
) -> None:
    """Before: WORKFLOW_FAILED carried no reason; an unanswered question waited silently."""
    runtime = runtime_factory(taskmanager={"ask_timeout_s": 1.0, "events_deadline_s": 0.3})
    devices.behaviors["mobility.move_to_room"] = Behavior("needs_input", reason="door_closed")
    push(probe, "wf-ask")
    failed = workflow_event(probe, "wf-ask", "WORKFLOW_FAILED", 15)
    assert failed["reason"] == "user_timeout"
    devices.wait_for(lambda d: any(c["task_id"] == "wf-ask:step_move" for c in d.cancels))

    devices.behaviors["mobility.move_to_room"] = Behavior("fail", reason="path_blocked")
    push(probe, "wf-fail")
    failed = workflow_event(probe, "wf-fail", "WORKFLOW_FAILED", 15)
    assert failed["reason"] == "path_blocked"

    bad = {**MOVE_PURIFY, "workflow_id": "wf-rej", "plan_id": "room_clean", "steps": []}
    probe.publish(f"{ROOT}/workflow/request", bad)
    probe.wait_for(
        EVENTS, lambda b: b["workflow_id"] == "wf-rej" and b["status"] == "WORKFLOW_REJECTED"
    )
    trace = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge",
            "workflows",
            "trace",
            "wf-rej",
            "--config",
            str(runtime.config),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "plan room_clean" in trace.stdout.splitlines()[0]


def test_every_pui_press_gets_a_result(
    runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: a press with nothing active, or an unknown workflow id, produced nothing."""
    runtime_factory()

    def press(event_id: str, **extra: Any) -> Any:
        probe.publish(PUI, {"event_id": event_id, "kind": "cancel", **extra})
        return probe.wait_for(PUI_RESULT, lambda b: b["event_id"] == event_id)

    assert press("p-0") == {"event_id": "p-0", "status": "nothing_active", "workflow_ids": []}
    assert press("p-1", workflow_id="wf-never")["status"] == "unknown_workflow"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    push(probe, "wf-p")
    workflow_event(probe, "wf-p", "RUNNING")
    assert press("p-2") == {"event_id": "p-2", "status": "cancelled", "workflow_ids": ["wf-p"]}
    assert press("p-3", workflow_id="wf-p")["status"] == "nothing_active"  # it has ended
    probe.publish(PUI, {"event_id": "p-2", "kind": "cancel"})  # a repeat gets the same result
    eventually(lambda: len([b for b in probe.messages(PUI_RESULT) if b["event_id"] == "p-2"]) == 2)
    results = [b for b in probe.messages(PUI_RESULT) if b["event_id"] == "p-2"]
    assert results[0] == results[1]
    # the stored result again, byte for byte (SPEC 2.4): not one made again from the state
    sent = [m.payload for m in list(probe._messages) if m.topic == PUI_RESULT]
    repeats = [p for p in sent if json.loads(p)["event_id"] == "p-2"]
    assert repeats[0] == repeats[1], repeats


def test_a_repeat_while_the_turn_is_answered_gets_the_answer_too(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """Found by an outside attack: a retry that arrived while the cloud was still answering
    got no answer of its own."""
    runtime_factory()
    cloud.set_faults(latency_s=1.0, times=1, path="/v1/a2a/turn")
    request = {"turn_id": "t-twice", "recognized_text": "안녕"}
    probe.publish(TURN_REQ, request)
    eventually(lambda: len(cloud.requests("/v1/a2a/turn")) == 1)
    probe.publish(TURN_REQ, request)  # the front-end retried while the cloud answers
    eventually(lambda: len(answers(probe, "t-twice")) == 2)
    first, second = answers(probe, "t-twice")
    assert first == second and first["status"] == "ok"
    assert len(cloud.requests("/v1/a2a/turn")) == 1  # asked once


def test_a_turn_refused_for_a_number_elsewhere_is_still_answered(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """Found by an outside attack: a NaN or a 5,000-digit number anywhere made the payload
    unreadable to the gate, so the turn got no answer and its refusal no `ref`."""
    runtime_factory()
    huge = b"9" * 5000
    probe.publish(TURN_REQ, b'{"turn_id":"t-nan","recognized_text":"a","x":NaN}')
    probe.publish(TURN_REQ, b'{"turn_id":"t-big","recognized_text":"a","x":' + huge + b"}")
    step = b'"steps":[{"step_id":"s","capability_id":"mobility","operation_id":"move_to_room"'
    probe.publish(
        f"{ROOT}/workflow/request",
        b'{"workflow_id":"wf-str",' + step + b',"timeout_s":"10"}]}',
    )
    for turn_id in ("t-nan", "t-big"):
        answer = probe.wait_for(TURN_RESP, lambda b, t=turn_id: b["turn_id"] == t)
        assert answer["status"] == "rejected" and answer["error"] == "invalid_json"
        assert refusal(probe, "invalid_json", turn_id=turn_id)
    rejected = workflow_event(probe, "wf-str", "WORKFLOW_REJECTED")  # "10" is not a number
    assert "timeout_s" in rejected["reason"]

"""Task args the MQTT side would refuse never go out (issue 30 item 16, SPEC 2.4, 3.1, 4.3):
through the real service, a real broker and the simulated planner, a turn whose answer carries a
workflow and a task with args nested past the gate's cap of 32 has both rejected with a reason —
nothing dispatched — while the turn is answered and the answer's good workflow runs."""

from __future__ import annotations

import json
from typing import Any

from a2a_common.jsonx import MAX_DEPTH
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.traces import trace_details

EVENTS = f"{ROOT}/workflow/event"


def nested(levels: int) -> Any:
    value: Any = "안방"
    for _ in range(levels):
        value = {"k": value}
    return value


def move(workflow_id: str, room: Any) -> dict[str, Any]:
    step = {"step_id": "go", "capability_id": "mobility", "operation_id": "move_to_room"}
    return {"workflow_id": workflow_id, "steps": [{**step, "args": {"room": room}}]}


def test_a_turn_whose_planner_nests_args_900_deep_dispatches_none_of_them(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    """Before: the 900-level workflow and task were accepted and their commands published."""
    runtime_factory()
    deep_task = {
        "task_id": "task-deep",
        "capability_id": "speaker",
        "operation_id": "say",
        "args": {"text": nested(MAX_DEPTH)},  # just past the cap, in the command
    }
    cloud.script_turn(
        route_family="ODL",
        assistant_text="안방으로 갈게요.",
        device_workflow_requests=[move("wf-deep", nested(900)), move("wf-ok", "안방")],
        device_task_requests=[deep_task],
    )
    reply = probe.turn("t-deep", "안방으로 가줘")
    assert reply["status"] == "ok" and reply["workflow_ids"] == ["wf-ok"], reply
    for workflow_id in ("wf-deep", "task-deep"):
        rejected = workflow_event(probe, workflow_id, "WORKFLOW_REJECTED")
        assert "args must hold finite numbers and nest at most" in rejected["reason"], rejected
    probe.wait_for(f"{ROOT}/task/command/mobility", lambda b: b.get("task_id") == "wf-ok:go")
    rows = eventually(
        lambda: state_rows(
            "SELECT workflow_id, status FROM workflows WHERE workflow_id IN (?, ?) ORDER BY 1",
            ("task-deep", "wf-deep"),
        )
    )
    assert rows == [("task-deep", "rejected"), ("wf-deep", "rejected")], rows
    sent = probe.messages(f"{ROOT}/task/command/mobility") + probe.messages(
        f"{ROOT}/task/command/speaker"
    )
    assert [c["task_id"] for c in sent] == ["wf-ok:go"], sent
    trace = trace_details(state_rows, "wf-deep")
    assert '"[too deep]"' in trace[0]  # the trace keeps a bounded copy of the request
    assert json.loads(trace[0])["reason"].startswith("step go: args")

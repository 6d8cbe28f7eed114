"""Two inputs that race: a forget that lands while a turn waits on the cloud. Both complete: the
turn is answered (and its workflow runs), and its pair is recorded only when the forget's scope
does not cover it."""

from __future__ import annotations

import pytest

from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.taskmanager.helpers import MOVE_PURIFY

TURN = "/v1/a2a/turn"


@pytest.mark.parametrize("scope", ["all", "session", "other_pair"])
def test_a_forget_while_a_turn_waits_on_the_cloud(
    scope: str,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    """Before: the answer failed with a TypeError in pair_write, the fallback too: the turn was
    never answered and its workflow dropped."""
    runtime_factory(cloud={"turn_deadline_s": 4.0})
    assert probe.turn("t-first", "안녕")["status"] == "ok"
    [(first_pair, session)] = state_rows("SELECT pair_id, session_id FROM pairs")
    cloud.script_turn(device_workflow_requests=[{**MOVE_PURIFY, "workflow_id": "wf-race"}])
    cloud.set_faults(latency_s=1.5, times=1, path=TURN)
    probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-race", "recognized_text": "청정해줘"})
    eventually(lambda: len(cloud.requests(TURN)) == 2)  # the turn waits on the cloud now
    target = {"all": None, "session": session, "other_pair": first_pair}[scope]
    forget = {"request_id": f"f-{scope}", "scope": "pair" if scope == "other_pair" else scope}
    probe.publish(f"{ROOT}/memory/forget", {**forget, **({"id": target} if target else {})})
    probe.wait_for(f"{ROOT}/memory/forget/result", lambda b: b["request_id"] == f"f-{scope}")
    answer = probe.wait_for(f"{ROOT}/turn/response", lambda b: b["turn_id"] == "t-race")
    assert answer["status"] == "ok" and answer["workflow_ids"] == ["wf-race"]
    devices.wait_for(lambda d: "wf-race:step_move" in d.tasks)
    recorded = state_rows("SELECT turn_id FROM pairs ORDER BY created_at")
    assert recorded == ([("t-race",)] if scope == "other_pair" else [])

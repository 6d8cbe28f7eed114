"""The wall clock jumps a day forward and an hour back while workflows wait: nothing fires
while the runtime runs (durations are monotonic); after a restart the new wall time applies
and late deadlines fire at once, as documented."""

from __future__ import annotations

import time
from pathlib import Path

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory

EVENTS = f"{ROOT}/workflow/event"
REST = {
    "workflow_id": "wf-rest",
    "steps": [
        {"step_id": "say", "capability_id": "speaker", "operation_id": "say", "args": {}},
        {"step_id": "rest", "kind": "wait", "wait_s": 600, "depends_on": ["say"]},
    ],
}
MOVE = {
    "workflow_id": "wf-move",
    "steps": [
        {
            "step_id": "move",
            "capability_id": "mobility",
            "operation_id": "move_to_room",
            "args": {"room": "안방"},
            "timeout_s": 120,
        }
    ],
}


def test_wall_clock_jumps(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    first = runtime_factory()
    first.terminate()
    skew = tmp_path / "skew"
    skew.write_text("0")
    runtime = RuntimeProcess(first.config, tmp_path, env={"A2A_WALL_SKEW_FILE": str(skew)})
    try:
        runtime.start()
        probe.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online")
        probe.publish(f"{ROOT}/workflow/request", REST)
        probe.publish(f"{ROOT}/workflow/request", MOVE)
        probe.wait_for(EVENTS, lambda b: b.get("step_id") == "rest" and b["status"] == "RUNNING")
        probe.wait_for(
            EVENTS, lambda b: b.get("task_id") == "wf-move:move" and b["status"] == "RUNNING"
        )
        skew.write_text(str(86400))  # a day forward ...
        time.sleep(1.5)
        skew.write_text(str(-3600))  # ... then an hour back
        time.sleep(1.5)
        fired = [
            e
            for e in probe.messages(EVENTS)
            if e["status"] in ("TIMEOUT", "COMPLETED", "WORKFLOW_COMPLETED", "WORKFLOW_FAILED")
            and e.get("step_id") != "say"
        ]
        assert fired == []  # no storm: the waits and deadlines kept their durations
        assert runtime.terminate() == 0
        skew.write_text(str(86400))  # restart a day later: late instants fire at once
        runtime.start()
        probe.wait_for(
            EVENTS,
            lambda b: b.get("workflow_id") == "wf-rest" and b["status"] == "WORKFLOW_COMPLETED",
            timeout_s=15,
        )
        timeout = probe.wait_for(
            EVENTS,
            lambda b: b.get("task_id") == "wf-move:move" and b["status"] == "TIMEOUT",
            timeout_s=15,
        )
        assert timeout["reason"] == "timeout"
    finally:
        runtime.close()

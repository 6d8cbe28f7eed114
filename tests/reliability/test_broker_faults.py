"""The broker SIGKILLed and restarted mid-workflow, with and without its persistence: no command
lost (durable outbound), no callback lost (the agent's QoS 1 resend, or — when the broker lost
the runtime's session — the runtime asking again), the runtime back online each time."""

from __future__ import annotations

import os
from pathlib import Path

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, eventually

RESTARTS = int(os.environ.get("A2A_BROKER_RESTARTS", "8"))  # run_full.sh: 20


def test_broker_killed_mid_workflow(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    broker: Mosquitto,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory()
    status = MqttProbe(broker.port, [f"{ROOT}/runtime/status"], client_id="status-watch")
    try:
        for n in range(RESTARTS):
            wf = f"wf-b{n:02d}"
            move = f"{wf}:move"
            probe.publish(
                f"{ROOT}/workflow/request",
                {
                    "workflow_id": wf,
                    "steps": [
                        {
                            "step_id": "move",
                            "capability_id": "mobility",
                            "operation_id": "move_to_room",
                            "args": {"room": "안방"},
                        },
                        {
                            "step_id": "purify",
                            "capability_id": "air_purifier",
                            "operation_id": "start",
                            "depends_on": ["move"],
                        },
                    ],
                },
            )
            devices.wait_for(lambda d, t=move: t in d.tasks and d.tasks[t].last is not None)
            connects = status.connects
            broker.kill()
            if n % 2:  # every other time the broker comes back without its persistence
                for leftover in broker.workdir.glob("*.db"):
                    leftover.unlink()
            devices.complete(move)  # published while the broker is down: paho keeps it
            broker.start()
            status.wait_connected(connects + 1, timeout_s=15)
            eventually(
                lambda w=wf: any(
                    e.get("workflow_id") == w and e.get("status") == "WORKFLOW_COMPLETED"
                    for e in probe.messages(f"{ROOT}/workflow/event")
                ),
                20,
            )
            states = status.messages(f"{ROOT}/runtime/status")
            assert states and states[-1]["state"] == "online"
        executed = [t for t in devices.order if t.endswith(":purify")]
        assert len(executed) == RESTARTS == len(set(executed))
    finally:
        status.close()

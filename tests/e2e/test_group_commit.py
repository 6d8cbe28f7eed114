"""Group commit through the real process: a burst of inbound messages is taken in batches (one
transaction each, a savepoint per message); refused messages in a batch change nothing and
every good one is applied once."""

from __future__ import annotations

import json
import urllib.request

from sim.broker import Mosquitto, free_port
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually

EVENTS = f"{ROOT}/workflow/event"


def one_step(n: int) -> bytes:
    body = {
        "workflow_id": f"wf-burst-{n:03d}",
        "plan_id": "burst",
        "steps": [
            {"step_id": "say", "capability_id": "speaker", "operation_id": "say", "args": {}}
        ],
    }
    return json.dumps(body).encode()


def test_a_burst_goes_in_group_commits_and_refusals_stay_alone(
    state_rows: StateRows, broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    port = free_port()
    runtime_factory(metrics={"enabled": True, "port": port})
    agents = DeviceAgents(broker.port, ROOT, behaviors={"speaker.say": Behavior("instant")})
    try:
        sent = []
        for n in range(60):  # no wait for each PUBACK: they reach the runtime back to back
            sent.append(probe.client.publish(f"{ROOT}/workflow/request", one_step(n), qos=1))
            if n % 10 == 5:
                stray = {"task_id": f"wf-none-{n}:say", "seq": 1, "status": "RUNNING"}
                sent.append(probe.client.publish(f"{ROOT}/task/callback", json.dumps(stray), qos=1))
                sent.append(probe.client.publish(f"{ROOT}/pui/event", b"{not json", qos=1))
        for info in sent:
            info.wait_for_publish(5)

        def completed() -> set[str]:
            return {
                b["workflow_id"]
                for b in probe.messages(EVENTS)
                if b.get("status") == "WORKFLOW_COMPLETED"
            }

        eventually(lambda: len(completed()) == 60, timeout_s=60)
        errors = eventually(lambda: len(e := probe.messages(f"{ROOT}/runtime/error")) >= 12 and e)
        assert sorted({e["error"] for e in errors}) == ["invalid_json", "unknown_task"]
        assert len(errors) == 12

        def scrape() -> dict[str, float]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                lines = resp.read().decode().splitlines()
            return {
                name: float(value)
                for name, _, value in (ln.rpartition(" ") for ln in lines if ln[:1] != "#")
            }

        metrics = scrape()
        batches = metrics["a2a_inbound_batch_messages_count"]
        taken = metrics["a2a_inbound_batch_messages_sum"]
        assert taken >= 72  # 60 requests + 12 refused, plus the agent's callbacks
        assert batches < taken  # some commits carried more than one message
    finally:
        agents.close()
    done = state_rows(
        "SELECT count(*) FROM workflows WHERE status = 'completed'"
        " AND workflow_id LIKE 'wf-burst-%'"
    )[0][0]
    stray_marks = state_rows("SELECT count(*) FROM inbox_seen WHERE key LIKE '%wf-none-%'")[0][0]
    assert done == 60 and stray_marks == 0

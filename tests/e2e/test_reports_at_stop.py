"""Terminal workflow reports still waiting for the cloud when the service stops are kept (SPEC
§3.3 through the outbox as `task_terminal`, §6 a clean stop loses no write): after the restart
the cloud has every workflow's terminal report, by one channel or the other."""

from __future__ import annotations

from typing import Any

import pytest

from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually

COUNT = 20


def one_step(n: int) -> dict[str, Any]:
    step = {"step_id": "say", "capability_id": "speaker", "operation_id": "say"}
    return {
        "workflow_id": f"wf-stop-{n:02d}",
        "plan_id": "bench",
        "steps": [{**step, "args": {"text": "안녕하세요"}}],
    }


def reported(cloud: SimCloud) -> set[str]:
    """Workflows whose WORKFLOW_COMPLETED the cloud has, as an event or a task_terminal write."""
    # a request the stop cut off mid-body was recorded without one
    events = [r["body"] or {} for r in cloud.requests("/v1/a2a/workflow/events")]
    kept = [w["payload"] for w in cloud.synced() if w["kind"] == "task_terminal"]
    return {
        str(b.get("workflow_id"))
        for b in (*events, *kept)
        if (b.get("event") or {}).get("status") == "WORKFLOW_COMPLETED"
    }


def ended_with_reports_waiting(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> RuntimeProcess:
    runtime = runtime_factory()
    cloud.set_faults(latency_s=0.5, path="/v1/a2a/workflow/events")  # reports queue up
    for n in range(COUNT):
        probe.publish(f"{ROOT}/workflow/request", one_step(n))
    eventually(
        lambda: (
            state_rows("SELECT count(*) FROM workflows WHERE status = 'completed'")[0][0] == COUNT
        ),
        timeout_s=30,
    )
    assert len(reported(cloud)) < COUNT  # some reports still wait in the queue
    return runtime


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_reports_waiting_at_a_stop_reach_the_cloud_after_the_restart(
    stop: str,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    """A clean stop or a power cut (SIGKILL) with reports still queued: none is lost."""
    runtime = ended_with_reports_waiting(runtime_factory, cloud, probe, state_rows)
    if stop == "SIGTERM":
        assert runtime.terminate() == 0
    else:
        runtime.kill()
    cloud.set_faults()
    runtime_factory()
    eventually(lambda: len(reported(cloud)) == COUNT, timeout_s=30)

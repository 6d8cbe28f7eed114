"""A planner that answers a turn with a `workflow_id` the robot already accepted: the turn's
`rejected` answer names the listed refusal word `duplicate_workflow_id` (docs/contract.md
§2.15), as a duplicate pushed on `P/workflow/request` is refused. On main it said
`"every workflow request was a duplicate"`, a sentence no planner could match on."""

from __future__ import annotations

from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory
from tests.e2e.test_workflows import SEED_WORKFLOW, plan, workflow_status


def test_a_planners_duplicate_workflow_id_is_refused_with_the_listed_word(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    assert probe.turn("t-1", "안방으로 가서 청정해줘")["workflow_ids"] == ["wf-seed"]
    workflow_status(probe, "wf-seed", "WORKFLOW_COMPLETED")
    plan(cloud, SEED_WORKFLOW)  # the same id again
    again = probe.turn("t-2", "안방으로 가서 청정해줘")
    assert again["status"] == "rejected" and again["workflow_ids"] == []
    assert again["error"] == "duplicate_workflow_id"
    assert again["assistant_text"] == ""

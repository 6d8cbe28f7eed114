"""Cloud faults through the real process: long outages with thousands of writes, slow and
broken answers, conflict storms, and hostile plans — refused with a reason, nothing dispatched,
nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_common.clock import SystemClock
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from edge.store.schema import MIGRATIONS
from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from sync.outbox import SyncOutbox
from tests.conftest import RuntimeFactory, StateRows, eventually

TURN = "/v1/a2a/turn"
FAST = {"deadline_s": 1.0, "max_backoff_s": 0.3}


def test_thousands_of_writes_after_a_long_outage(
    tmp_path: Path, state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud
) -> None:
    db = open_state_db(tmp_path / "state" / "state.db", MIGRATIONS)
    with db.atomic():  # what days offline leave behind
        SyncOutbox(db=db, clock=SystemClock()).enqueue(
            SyncWrite("short_term_pair", {"pair_id": f"pair-{n:05d}", "turn_id": f"t{n}"})
            for n in range(3000)
        )
    db.close()
    cloud.set_faults(drop=True)
    runtime_factory(sync=FAST)
    eventually(lambda: len(cloud.requests("/v1/a2a/memory/sync")) >= 2)
    cloud.set_faults()
    eventually(lambda: len(cloud.synced()) == 3000, 60)
    assert [w["payload"]["turn_id"] for w in cloud.synced()] == [f"t{n}" for n in range(3000)]
    assert cloud.state.duplicates == 0
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)])


def test_slow_answers_beyond_the_deadline_then_normal(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(cloud={"turn_deadline_s": 1.0})
    cloud.set_faults(latency_s=3.0, times=2, path=TURN)
    reply = probe.turn("t-slow", "안녕")
    assert reply["status"] == "offline" and "within 1s" in reply["error"]
    eventually(lambda: probe.turn(f"t-{len(cloud.requests(TURN))}", "안녕")["status"] == "ok", 15)


def test_a_storm_of_conflicts_loses_nothing(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(sync=FAST)
    cloud.set_faults(drop=True)
    for n in range(5):
        assert probe.turn(f"c{n}", "안녕")["status"] == "offline"
    cloud.script_sync(*[{"status": 409, "updates": {}} for _ in range(8)])
    cloud.set_faults()
    eventually(
        lambda: (
            [w["payload"]["turn_id"] for w in cloud.synced() if w["kind"] == "short_term_pair"][:5]
            == [f"c{n}" for n in range(5)]
        ),
        30,
    )
    assert cloud.state.duplicates == 0


def test_broken_sync_answers_are_retried(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(sync=FAST)
    cloud.set_faults(malformed=True, times=3, path="/v1/a2a/memory/sync")
    probe.turn("t-1", "안녕")
    eventually(lambda: [w["payload"]["turn_id"] for w in cloud.synced()] == ["t-1"], 15)


BAD_PLANS = {
    "unknown capability": [
        {
            "workflow_id": "wf-a",
            "steps": [{"step_id": "s", "capability_id": "teleport", "operation_id": "go"}],
        }
    ],
    "cyclic depends_on": [
        {
            "workflow_id": "wf-b",
            "steps": [
                {
                    "step_id": "a",
                    "capability_id": "speaker",
                    "operation_id": "say",
                    "depends_on": ["b"],
                },
                {
                    "step_id": "b",
                    "capability_id": "speaker",
                    "operation_id": "say",
                    "depends_on": ["a"],
                },
            ],
        }
    ],
    "10,000 steps": [
        {
            "workflow_id": "wf-c",
            "steps": [
                {"step_id": f"s{n}", "capability_id": "speaker", "operation_id": "say"}
                for n in range(10_000)
            ],
        }
    ],
}


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_hostile_plans_are_refused_and_nothing_runs(
    case: str,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    runtime_factory()
    cloud.script_turn(
        route_family="ODL", assistant_text="네", device_workflow_requests=BAD_PLANS[case]
    )
    reply = probe.turn("t-bad", "안녕")
    assert reply["status"] == "rejected" and reply["workflow_ids"] == []
    assert reply["error"]
    assert devices.order == []
    assert probe.turn("t-next", "안녕")["status"] == "ok"


def test_a_5mb_answer_is_refused(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    runtime_factory(cloud={"turn_deadline_s": 5.0})
    cloud.script_turn(assistant_text="가" * (5 * 1024 * 1024 // 3))
    reply = probe.turn("t-huge", "안녕", timeout_s=15)
    assert reply["status"] == "error" and "too large" in reply["error"]
    assert devices.order == []

"""Offline-first sync through the real process, Mosquitto and the sim cloud over HTTP."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.taskmanager.helpers import MOVE_PURIFY

SYNC_PATH = "/v1/a2a/memory/sync"
FAST = {"deadline_s": 1.0, "max_backoff_s": 0.3}


def offline_turns(
    probe: MqttProbe,
    count: int,
    *,
    marker_at: int | None = None,
    marker: str = "",
    prefix: str = "off",
) -> list[float]:
    took = []
    for n in range(count):
        text = f"{n}번째 말 {marker}" if n == marker_at else f"{n}번째 말"
        t0 = time.monotonic()
        reply = probe.turn(f"{prefix}-{n:03d}", text)
        seconds = time.monotonic() - t0
        assert reply["status"] == "offline", reply
        took.append(seconds)
    return took


def synced_turns(cloud: SimCloud) -> list[str]:
    return [w["payload"]["turn_id"] for w in cloud.synced() if w["kind"] == "short_term_pair"]


def test_cloud_down_for_50_turns_then_up(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(cloud={"turn_deadline_s": 4.0}, sync={"max_backoff_s": 60.0})
    cloud.set_faults(drop=True)  # every connection dropped: the cloud is gone
    took = offline_turns(probe, 50)
    assert max(took) < 2.0, took  # the user is not kept waiting for the 4 s deadline
    assert sorted(took)[len(took) // 2] < 0.5
    assert synced_turns(cloud) == []
    cloud.set_faults()  # back; the replayer is deep in a 60 s backoff ...
    reply = probe.turn("back", "안녕")  # ... and a turn proves the cloud is back
    assert reply["status"] == "ok"
    expected = [f"off-{n:03d}" for n in range(50)] + ["back"]
    eventually(lambda: synced_turns(cloud) == expected, 10)
    assert cloud.state.duplicates == 0 or len(set(cloud.state.applied)) == len(cloud.synced())


def test_conflict_mid_replay_applies_updates_and_loses_nothing(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(sync={**FAST, "batch_size": 5})
    cloud.set_faults(drop=True)
    offline_turns(probe, 12)
    cloud.script_sync(
        {"status": 200},
        {
            "status": 409,
            "updates": {
                "daily_summaries": [{"day": "2026-06-24", "summary": "저녁에 청정을 자주 요청"}],
                "profile_items": [
                    {
                        "key": "preferred_room",
                        "value": "거실",
                        "category": "device_pattern",
                        "confidence": 0.83,
                        "status": "confirmed",
                    }
                ],
            },
        },
    )
    cloud.set_faults()
    eventually(lambda: len(synced_turns(cloud)) == 12, 15)
    assert synced_turns(cloud) == [f"off-{n:03d}" for n in range(12)]
    assert cloud.state.duplicates == 0
    items = state_rows("SELECT key, value, status FROM profile_items")
    assert items == [("preferred_room", '"거실"', "confirmed")]
    assert state_rows("SELECT day FROM daily_summaries") == [("2026-06-24",)]
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)])


def _poison(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    mode: str,
) -> None:
    runtime_factory(sync=FAST)
    cloud.set_faults(drop=True)
    offline_turns(probe, 300, marker_at=150, marker="POISON")
    cloud.reject_writes("POISON", mode)
    cloud.set_faults()
    expected = [f"off-{n:03d}" for n in range(300) if n != 150]
    eventually(lambda: synced_turns(cloud) == expected, 30)
    dead = eventually(lambda: state_rows("SELECT payload, reason FROM sync_dead"))
    assert len(dead) == 1 and json.loads(dead[0][0])["turn_id"] == "off-150"
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)])


def test_one_rejected_write_among_300(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    _poison(state_rows, runtime_factory, cloud, probe, "rejected")


def test_one_write_that_fails_its_whole_batch_among_300(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    _poison(state_rows, runtime_factory, cloud, probe, "http422")


def test_sigkill_while_a_batch_is_in_flight(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory(sync=FAST)
    cloud.set_faults(drop=True)
    offline_turns(probe, 30)
    before = len(cloud.requests(SYNC_PATH))
    cloud.set_faults(latency_s=2.0, times=1, path=SYNC_PATH)  # the next batch is slow
    eventually(lambda: len(cloud.requests(SYNC_PATH)) > before, 10)
    runtime.kill()  # the batch is at the cloud, its answer will find no one
    runtime.start()
    expected = [f"off-{n:03d}" for n in range(30)]
    eventually(lambda: synced_turns(cloud) == expected, 15)
    eventually(lambda: cloud.state.duplicates >= 1, 10)  # the slow copy lands: not re-applied
    assert sorted(cloud.state.applied.values()) == [1] * len(cloud.state.applied)
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)])


def test_stop_and_dock_intents_work_with_the_cloud_down(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory(sync=FAST)
    cloud.script_turn(
        route_family="ODL",
        assistant_text="안방으로 갈게요.",
        device_workflow_requests=[MOVE_PURIFY],
    )
    assert probe.turn("go", "안방으로 가서 청정해줘")["workflow_ids"] == ["wf-1"]
    devices.wait_for(lambda d: "wf-1:step_move" in d.tasks)
    cloud.set_faults(drop=True)
    stop = probe.turn("stop", "멈춰!")
    assert stop["status"] == "offline" and stop["route_family"] == "LOCAL"
    assert stop["assistant_text"] == "알겠어요, 멈출게요."
    devices.wait_for(
        lambda d: (
            {"task_id": "wf-1:step_move", "workflow_id": "wf-1", "reason": "user"} in d.cancels
        )
    )
    dock = probe.turn("dock", "이제 충전하러 가")
    assert dock["status"] == "offline" and len(dock["workflow_ids"]) == 1
    devices.wait_for(
        lambda d: any(
            t.endswith(":task") and d.tasks[t].command["operation_id"] == "return_to_dock"
            for t in d.tasks
        )
    )
    other = probe.turn("chat", "오늘 날씨 어때?")
    assert (
        other["status"] == "offline" and other["route_family"] == "" and other["workflow_ids"] == []
    )


def test_sync_cli_status_and_replay_with_requeue(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    import subprocess
    import sys

    def cli(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "edge", *args, "--json", "--config", str(runtime.config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    runtime = runtime_factory(sync=FAST)
    cloud.set_faults(drop=True)
    offline_turns(probe, 3, marker_at=1, marker="POISON")
    cloud.reject_writes("POISON")
    cloud.set_faults()
    eventually(lambda: cli("sync", "status")["dead_letters"] == 1, 15)
    status = cli("sync", "status")
    assert status["pending"] == 0 and status["last_success"]
    assert status["warnings"] == ["1 dead-lettered sync writes"]
    cloud.reject_writes(None)
    answer = cli("sync", "replay", "--requeue-dead")  # through the running service
    assert answer["ok"] and answer["result"]["requeued"] == 1
    took = answer["result"]
    assert (took["cloud_url"], took["sent_by"]) == (cloud.url, "the service")
    eventually(lambda: synced_turns(cloud) == ["off-000", "off-002", "off-001"], 15)
    assert runtime.terminate() == 0

    cloud.set_faults(drop=True)  # no service: the CLI replays by itself
    runtime.start()
    offline_turns(probe, 2, prefix="later")
    assert runtime.terminate() == 0
    assert cli("sync", "status")["pending"] == 2
    cloud.set_faults()
    answer = cli("sync", "replay")
    assert answer["ok"] and answer["result"] == {
        "sent": 2,
        "pending": 0,
        "requeued": 0,
        "dead": 0,
        "cloud_url": cloud.url,  # which cloud, and who sent (c1ee6fe: the answer names both)
        "sent_by": "here",
    }
    assert synced_turns(cloud)[-2:] == ["later-000", "later-001"]

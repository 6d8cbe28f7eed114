"""Workflows through the real process: Mosquitto, the sim cloud, scripted device agents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.taskmanager.helpers import MOVE_PURIFY

EVENTS = f"{ROOT}/workflow/event"
MOVE, PURIFY = "wf-seed:step_move", "wf-seed:step_purify"

SEED_WORKFLOW = {**MOVE_PURIFY, "workflow_id": "wf-seed"}


def plan(cloud: SimCloud, workflow: dict[str, Any]) -> None:
    """The cloud answers the next turn with `workflow`."""
    cloud.script_turn(
        route_family="ODL",
        assistant_text="안방으로 이동해서 청정을 시작할게요.",
        device_workflow_requests=[workflow],
    )


def workflow_status(probe: MqttProbe, workflow_id: str, status: str, timeout_s: float = 10) -> Any:
    return probe.wait_for(
        EVENTS,
        lambda b: b.get("workflow_id") == workflow_id and b.get("status") == status,
        timeout_s=timeout_s,
    )


def test_seed_scene_move_then_purify(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    reply = probe.turn("t-seed", "안방으로 가서 청정해줘")
    assert reply["status"] == "ok" and reply["workflow_ids"] == ["wf-seed"]
    assert reply["route_family"] == "ODL"
    done = workflow_status(probe, "wf-seed", "WORKFLOW_COMPLETED")
    assert done["workflow_status"] == "completed"
    assert devices.order == [MOVE, PURIFY]

    events = probe.messages(EVENTS)
    move_done = next(
        i for i, e in enumerate(events) if e["task_id"] == MOVE and e["status"] == "COMPLETED"
    )
    purify_sent = next(
        i for i, e in enumerate(events) if e["task_id"] == PURIFY and e["status"] == "DISPATCHED"
    )
    assert move_done < purify_sent  # the purifier command only after the move COMPLETED
    etags = [e["etag"] for e in events if e["workflow_id"] == "wf-seed"]
    assert etags == sorted(etags) and etags[-1] == len(set(etags))

    command = devices.tasks[MOVE].command
    assert command["args"] == {"room": "안방"} and command["attempt"] == 1
    eventually(
        lambda: (
            {e["body"]["event"]["status"] for e in cloud.requests("/v1/a2a/workflow/events")}
            >= {"COMPLETED", "WORKFLOW_COMPLETED"}
        )
    )

    state = dict(state_rows("SELECT key, value FROM device_state"))
    assert json.loads(state["active_workflow_id"]) == ""  # cleared when it finished
    # the device's own observation: a move to 안방 then purification is a mention
    items = state_rows("SELECT key, value, status FROM profile_items")
    assert items == [("preferred_room", '"안방"', "candidate")]


def test_pui_cancel_mid_move(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-pui", "안방으로 가서 청정해줘")
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == MOVE and b.get("status") == "RUNNING")
    probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-1", "kind": "cancel"})
    ended = workflow_status(probe, "wf-seed", "WORKFLOW_CANCELLED")
    assert ended["reason"] == "pui"
    devices.wait_for(lambda d: any(c["task_id"] == MOVE for c in d.cancels))
    assert devices.cancels[0] == {"task_id": MOVE, "workflow_id": "wf-seed", "reason": "pui"}
    final = eventually(
        lambda: [
            r["body"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"]["status"] == "WORKFLOW_CANCELLED"
        ]
    )
    reports = [r["body"] for r in cloud.requests("/v1/a2a/workflow/events")]
    assert final and final[0]["event"]["evidence"] == {"cancelled_by_pui": True}
    assert not any(r["decision_requested"] for r in reports)
    assert PURIFY not in devices.order  # no replacement, no dependant


def test_ack_timeout(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("silent")
    runtime_factory()
    workflow = json.loads(json.dumps(SEED_WORKFLOW))
    workflow["steps"][0]["ack_timeout_s"] = 0.5
    plan(cloud, workflow)
    probe.turn("t-ack", "안방으로 가서 청정해줘")
    timeout = probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == MOVE and b.get("status") == "TIMEOUT"
    )
    assert timeout["reason"] == "ack_timeout"
    devices.wait_for(
        lambda d: {"task_id": MOVE, "workflow_id": "wf-seed", "reason": "timeout"} in d.cancels
    )
    workflow_status(probe, "wf-seed", "WORKFLOW_FAILED")
    asked = [
        r["body"]
        for r in cloud.requests("/v1/a2a/workflow/events")
        if r["body"]["decision_requested"]
    ]
    assert asked and asked[0]["event"]["status"] == "TIMEOUT"
    assert PURIFY not in devices.order


def test_failed_step_replanned(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("fail", reason="path_blocked")
    runtime_factory()
    cloud.script_decision(
        {
            "kind": "replan",
            "steps": [
                {
                    "step_id": "step_dock",
                    "capability_id": "mobility",
                    "operation_id": "return_to_dock",
                },
                {
                    "step_id": "step_purify_here",
                    "capability_id": "air_purifier",
                    "operation_id": "start",
                    "args": {"mode": "auto"},
                    "depends_on": ["step_dock"],
                },
            ],
        }
    )
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-replan", "안방으로 가서 청정해줘")
    workflow_status(probe, "wf-seed", "WORKFLOW_COMPLETED")
    assert devices.order == [MOVE, "wf-seed:step_dock", "wf-seed:step_purify_here"]
    replaced = probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == PURIFY and b.get("status") == "CANCELLED"
    )
    assert replaced["reason"] == "supervisor"


def test_unknown_task_callback_is_refused(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime_factory()
    probe.publish(
        f"{ROOT}/task/callback", {"task_id": "wf-none:step", "seq": 1, "status": "RUNNING"}
    )
    refusal = probe.wait_for(f"{ROOT}/runtime/error", lambda b: b.get("error") == "unknown_task")
    assert refusal["topic"] == f"{ROOT}/task/callback"
    probe.publish(f"{ROOT}/task/callback", {"task_id": "wf-x:s", "seq": 1, "status": "DONE"})
    probe.wait_for(f"{ROOT}/runtime/error", lambda b: b.get("error") == "invalid_field")


def test_pushed_workflow_and_rejection(
    runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    runtime_factory()
    bad = {
        "workflow_id": "wf-bad",
        "steps": [{"step_id": "a", "capability_id": "mobility", "operation_id": "fly"}],
    }
    probe.publish(f"{ROOT}/workflow/request", bad)
    rejected = workflow_status(probe, "wf-bad", "WORKFLOW_REJECTED")
    assert "unknown capability/operation mobility.fly" in rejected["reason"]
    consent = {
        "workflow_id": "wf-vital",
        "steps": [{"step_id": "v", "capability_id": "vital_app", "operation_id": "start_session"}],
    }
    probe.publish(f"{ROOT}/workflow/request", consent)
    assert workflow_status(probe, "wf-vital", "WORKFLOW_REJECTED")["reason"] == "consent_required"
    pushed = {
        "workflow_id": "wf-push",
        "steps": [
            {
                "step_id": "say",
                "capability_id": "speaker",
                "operation_id": "say",
                "args": {"text": "물 마실 시간이에요"},
            }
        ],
    }
    probe.publish(f"{ROOT}/workflow/request", pushed)
    workflow_status(probe, "wf-push", "WORKFLOW_COMPLETED")
    assert devices.order == ["wf-push:say"]


def test_sigkill_mid_workflow_then_restart(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-kill", "안방으로 가서 청정해줘")
    devices.wait_for(lambda d: MOVE in d.tasks and d.tasks[MOVE].last is not None)
    runtime.kill()
    devices.complete(MOVE)  # the move finishes while the runtime is down
    runtime.start()
    workflow_status(probe, "wf-seed", "WORKFLOW_COMPLETED", timeout_s=15)
    assert devices.order == [MOVE, PURIFY]
    assert devices.deliveries()[PURIFY] == 1
    status = state_rows("SELECT status FROM workflows WHERE workflow_id = 'wf-seed'")
    assert status == [("completed",)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge", *args], capture_output=True, text=True, timeout=30
    )


def test_workflows_cli_list_trace_and_cancel(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory()
    config = str(runtime.config)
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-cli", "안방으로 가서 청정해줘")
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == MOVE and b.get("status") == "RUNNING")

    listed = json.loads(cli("workflows", "list", "--json", "--config", config).stdout)
    assert [(w["workflow_id"], w["status"]) for w in listed] == [("wf-seed", "running")]

    cancelled = cli("workflows", "cancel", "wf-seed", "--config", config)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled wf-seed" in cancelled.stdout
    assert workflow_status(probe, "wf-seed", "WORKFLOW_CANCELLED")["reason"] == "user"
    devices.wait_for(
        lambda d: {"task_id": MOVE, "workflow_id": "wf-seed", "reason": "user"} in d.cancels
    )
    again = cli("workflows", "cancel", "wf-seed", "--config", config)
    assert again.returncode == 1 and "no active workflow wf-seed" in again.stderr

    text = cli("workflows", "trace", "wf-seed", "--config", config).stdout
    lines = text.splitlines()
    assert lines[0].startswith("workflow wf-seed  status cancelled")
    assert any("request" in line and "안방" in line for line in lines)
    assert any("step_move DISPATCHED" in line for line in lines)
    assert any("step_move CANCELLED" in line and "user" in line for line in lines)
    assert "WORKFLOW_CANCELLED" in lines[-1] or any("finished" in line for line in lines)

    # with the service stopped, the CLI takes the DB itself; the cancel goes out on next start
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    plan(cloud, {**SEED_WORKFLOW, "workflow_id": "wf-2"})
    probe.turn("t-cli-2", "안방으로 가서 청정해줘")
    probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == "wf-2:step_move" and b.get("status") == "RUNNING"
    )
    assert runtime.terminate() == 0
    offline = cli("workflows", "cancel", "wf-2", "--json", "--config", config)
    assert json.loads(offline.stdout) == {"ok": True, "result": {"cancelled": ["wf-2"]}}
    runtime.start()
    devices.wait_for(
        lambda d: (
            {"task_id": "wf-2:step_move", "workflow_id": "wf-2", "reason": "user"} in d.cancels
        )
    )


def test_a_cancel_while_no_service_runs_settles_and_is_reported_once_it_starts(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    """The CLI without a service runs the service's own cancel: the workflow is settled (the
    active workflow cleared) and its terminal report reaches the cloud when the service is back."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-off", "안방으로 가서 청정해줘")
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == MOVE and b.get("status") == "RUNNING")
    assert runtime.terminate() == 0
    offline = cli("workflows", "cancel", "wf-seed", "--json", "--config", str(runtime.config))
    assert json.loads(offline.stdout) == {"ok": True, "result": {"cancelled": ["wf-seed"]}}
    active = "SELECT value FROM device_state WHERE key = 'active_workflow_id'"
    assert state_rows(active) == [('""',)]

    runtime.start()

    def reported() -> list[dict[str, Any]]:
        return [
            w["payload"]
            for w in cloud.synced()
            if w["kind"] == "task_terminal" and w["payload"].get("workflow_id") == "wf-seed"
        ]

    [report] = eventually(reported)
    assert report["event"]["status"] == "WORKFLOW_CANCELLED"
    assert report["event"]["reason"] == "user"
    assert report["workflow"]["status"] == "cancelled"
    devices.wait_for(
        lambda d: {"task_id": MOVE, "workflow_id": "wf-seed", "reason": "user"} in d.cancels
    )
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)])
    assert len(reported()) == 1  # sent once


def test_terminal_reports_go_to_the_sync_outbox_when_the_cloud_is_away(
    state_rows: StateRows, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    from sim.broker import free_port

    runtime_factory(
        cloud_url=f"http://127.0.0.1:{free_port()}", taskmanager={"events_deadline_s": 0.3}
    )
    pushed = {
        "workflow_id": "wf-away",
        "steps": [
            {
                "step_id": "say",
                "capability_id": "speaker",
                "operation_id": "say",
                "args": {"text": "안녕하세요"},
            }
        ],
    }
    probe.publish(f"{ROOT}/workflow/request", pushed)
    workflow_status(probe, "wf-away", "WORKFLOW_COMPLETED")  # the robot does not wait
    sql = "SELECT payload FROM sync_outbox WHERE kind = 'task_terminal'"
    rows = eventually(lambda: len(state_rows(sql)) == 2 and state_rows(sql))
    statuses = sorted(json.loads(p)["event"]["status"] for (p,) in rows)
    assert statuses == ["COMPLETED", "WORKFLOW_COMPLETED"]


def test_duplicate_and_out_of_order_callbacks_and_device_context(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("duplicate")
    devices.behaviors["air_purifier.start"] = Behavior("out_of_order")
    runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-dup", "안방으로 가서 청정해줘")
    workflow_status(probe, "wf-seed", "WORKFLOW_COMPLETED")
    move_events = [e["status"] for e in probe.messages(EVENTS) if e["task_id"] == MOVE]
    assert move_events.count("COMPLETED") == 1  # every callback came twice, applied once
    assert move_events.count("PROGRESS") == 3
    purify = [e["status"] for e in probe.messages(EVENTS) if e["task_id"] == PURIFY]
    assert purify[-1] == "COMPLETED" and purify.count("PROGRESS") == 2  # the late one dropped
    context = probe.wait_for(f"{ROOT}/device/context", lambda b: b.get("purifier_mode") == "auto")
    assert context["current_room"] == "안방" and 0 < context["battery"] < 82


def test_pui_button_press_from_the_simulator(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory()
    plan(cloud, SEED_WORKFLOW)
    probe.turn("t-btn", "안방으로 가서 청정해줘")
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == MOVE and b.get("status") == "RUNNING")
    devices.press_pui("wf-seed")
    assert workflow_status(probe, "wf-seed", "WORKFLOW_CANCELLED")["reason"] == "pui"

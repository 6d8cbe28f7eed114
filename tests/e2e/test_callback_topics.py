"""Who speaks for a task, through the real process (issue 30 items 2 and 13; SPEC §2, §2.4,
§4.2, §4.5): Mosquitto, the sim cloud and the sim's device agents (the `a2a_agent` helper),
which publish on their own capability's callback topic `P/task/callback/<capability_id>`."""

from __future__ import annotations

import json
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from sim.broker import Mosquitto
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import (
    DEVICE,
    ROOT,
    RuntimeFactory,
    StateRows,
    eventually,
    refusal,
    workflow_event,
)
from tests.e2e.traces import trace_details

MOVE = "wf-c:step_move"
STOP = MOVE + "~safe_stop"
PURIFY = "wf-q:purify"
WINDOW_S = 0.5  # taskmanager.cancel_confirm_s
ENDS = ("WORKFLOW_COMPLETED", "WORKFLOW_FAILED", "WORKFLOW_CANCELLED")


def move_then_purify() -> dict[str, Any]:
    return {
        "workflow_id": "wf-q",
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
                "args": {"mode": "auto"},
                "depends_on": ["move"],
            },
        ],
    }


def test_callbacks_before_dispatch_are_refused_and_burn_no_seq_of_the_real_agent(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    state_rows: StateRows,
) -> None:
    """On main the 20 were taken silently, each leaving a dedupe mark; the agent's RUNNING,
    PROGRESS and COMPLETED (seq 1-3) were then dropped as duplicates and the step ended
    TIMEOUT (ack_timeout)."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    devices.behaviors["air_purifier.start"] = Behavior("complete", after_s=0.1)
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", move_then_purify())
    workflow_event(probe, "wf-q", "RUNNING")  # the move runs; the purify waits for it (QUEUED)
    for seq, topic in [(s, "task/callback") for s in range(1, 11)] + [
        (s, "task/callback/air_purifier") for s in range(11, 21)
    ]:
        status = ("RUNNING", "PROGRESS", "COMPLETED")[seq % 3]
        probe.publish(f"{ROOT}/{topic}", {"task_id": PURIFY, "seq": seq, "status": status})
    probe.publish(f"{ROOT}/task/callback", {"task_id": "wf-none:x", "seq": 1, "status": "RUNNING"})
    refusal(probe, "unknown_task", task_id="wf-none:x")  # taken in order: the 20 went before
    # a callback naming an attempt the runtime never sent is no callback of the task either
    probe.publish(
        f"{ROOT}/task/callback/mobility",
        {"task_id": "wf-q:move", "seq": 7, "status": "PROGRESS", "attempt": 2},
    )

    devices.complete("wf-q:move")  # the purify is dispatched; its agent reports seq 1, 2, 3
    ended = probe.wait_for(
        f"{ROOT}/workflow/event",
        lambda b: b["workflow_id"] == "wf-q" and b["status"] in ENDS,
    )
    assert ended["status"] == "WORKFLOW_COMPLETED", ended  # main: FAILED, purify TIMEOUT
    applied = [
        e["status"] for e in probe.messages(f"{ROOT}/workflow/event") if e["task_id"] == PURIFY
    ]
    assert "RUNNING" in applied and "COMPLETED" in applied
    for seq in range(1, 21):  # each was refused with why, and left no dedupe mark
        refused = refusal(probe, "not_dispatched", task_id=PURIFY, seq=seq)
        assert refused["topic"].startswith(f"{ROOT}/task/callback")
    assert refusal(probe, "not_dispatched", task_id="wf-q:move", seq=7)["ref"]["seq"] == 7
    # the agent's seq 1-3 applied, and no more: the step's last seq is the callbacks' mark
    [(doc,)] = state_rows("SELECT doc FROM workflows WHERE workflow_id = 'wf-q'")
    [purify] = [s for s in json.loads(doc)["steps"] if s["step_id"] == PURIFY.split(":")[1]]
    assert purify["last_seq"] == 3
    sent = devices.tasks[PURIFY].task.last
    assert sent is not None and sent["seq"] >= 2 and sent["status"] == "COMPLETED"


def test_a_cancelled_on_another_capabilitys_topic_never_confirms_the_cancel(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    state_rows: StateRows,
) -> None:
    """Item 2's attack at the runtime (the broker's ACL stops it first: test_mosquitto_acl):
    the display's topic carries a CANCELLED for the mobility task. It is refused
    `wrong_capability` with its ref, writes nothing, and the escalation to `mobility.stop`
    happens on time; the mobility agent's own CANCELLED with the same seq still confirms."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hung")
    devices.behaviors["mobility.stop"] = Behavior("silent")
    runtime_factory(taskmanager={"cancel_confirm_s": WINDOW_S})
    probe.publish(
        f"{ROOT}/workflow/request",
        {
            "workflow_id": "wf-c",
            "steps": [
                {
                    "step_id": "step_move",
                    "capability_id": "mobility",
                    "operation_id": "move_to_room",
                    "args": {"room": "안방"},
                }
            ],
        },
    )
    workflow_event(probe, "wf-c", "RUNNING")
    probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-wc", "kind": "cancel"})
    assert probe.wait_for(f"{ROOT}/pui/result", lambda b: b["event_id"] == "pui-wc")["status"] == (
        "cancelled"
    )
    forged = {"task_id": MOVE, "seq": 2, "status": "CANCELLED", "reason": "pui"}
    probe.publish(f"{ROOT}/task/callback/display", forged)
    refused = refusal(probe, "wrong_capability", task_id=MOVE, seq=2)
    assert refused["topic"] == f"{ROOT}/task/callback/display"
    devices.wait_for(lambda d: STOP in d.tasks, timeout_s=10)  # escalated all the same
    assert workflow_event(probe, "wf-c", "CANCEL_UNCONFIRMED")["task_id"] == MOVE
    assert trace_details(state_rows, kind="cancel_confirmed") == []
    # the forged stop's COMPLETED on the purifier's topic does not clear the alarm either
    probe.publish(
        f"{ROOT}/task/callback/air_purifier", {"task_id": STOP, "seq": 1, "status": "COMPLETED"}
    )
    refusal(probe, "wrong_capability", task_id=STOP, seq=1)
    assert state_rows("SELECT count(*) FROM cancel_watch") == [(1,)]

    devices.release(MOVE)  # the mobility agent's own CANCELLED (seq 2, as the forged one)
    eventually(lambda: devices.tasks[MOVE].seq == 2)
    confirmed = workflow_event(probe, "wf-c", "CANCEL_CONFIRMED")
    assert confirmed["reason"] == "cancelled"
    assert eventually(lambda: state_rows("SELECT count(*) FROM cancel_watch") == [(0,)])


def test_a_session_an_older_version_left_is_subscribed_to_the_new_topics(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """An upgrade: the broker keeps the runtime's session of an older version, which knew only
    the shared callback topic. The runtime subscribed only when the broker had no session, so
    every agent's callback on its own topic was lost; now the first connect of a process
    subscribes again."""
    old = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=f"a2a-edge-{DEVICE}",
        protocol=MQTTProtocolVersion.MQTTv5,
    )
    acked: set[int] = set()
    old.on_subscribe = lambda _c, _u, mid, _codes, _p: acked.add(mid)
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 3600
    old.connect("127.0.0.1", broker.port, clean_start=False, properties=props)
    old.loop_start()
    try:
        subscribed = old.subscribe([(f"{ROOT}/task/callback", 1), (f"{ROOT}/turn/request", 1)])[1]
        eventually(lambda: subscribed in acked)
    finally:
        old.disconnect()
        old.loop_stop()
    runtime_factory()
    probe.publish(
        f"{ROOT}/task/callback/mobility", {"task_id": "wf-old:move", "seq": 1, "status": "RUNNING"}
    )
    assert refusal(probe, "unknown_task", task_id="wf-old:move")["topic"] == (
        f"{ROOT}/task/callback/mobility"
    )

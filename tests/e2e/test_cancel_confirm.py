"""A cancel is confirmed, not assumed; commands expire (SPEC §4.2). Through the real process:
Mosquitto, the sim cloud, device agents that confirm, hang, or are away."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.traces import trace_details

MOVE = "wf-c:step_move"
STOP = MOVE + "~safe_stop"
WINDOW_S = 0.5  # taskmanager.cancel_confirm_s in these tests
CONFIRM = {"taskmanager": {"cancel_confirm_s": WINDOW_S}}


def move(workflow_id: str = "wf-c", **step: Any) -> dict[str, Any]:
    return {
        "workflow_id": workflow_id,
        "steps": [
            {
                "step_id": "step_move",
                "capability_id": "mobility",
                "operation_id": "move_to_room",
                "args": {"room": "안방"},
                **step,
            }
        ],
    }


def status(probe: MqttProbe, alarmed: bool) -> Any:
    return probe.wait_for(
        f"{ROOT}/runtime/status", lambda b: b.get("state") == "online" and ("alarm" in b) == alarmed
    )


def start_moving(probe: MqttProbe, agents: DeviceAgents, workflow_id: str = "wf-c") -> None:
    probe.publish(f"{ROOT}/workflow/request", move(workflow_id))
    workflow_event(probe, workflow_id, "RUNNING")


def press(probe: MqttProbe, event_id: str = "pui-1") -> float:
    pressed = time.monotonic()
    probe.publish(f"{ROOT}/pui/event", {"event_id": event_id, "kind": "cancel"})
    result = probe.wait_for(f"{ROOT}/pui/result", lambda b: b["event_id"] == event_id)
    assert result["status"] == "cancelled"  # for the user it is cancelled at the press
    return pressed


def test_an_agents_own_cancelled_is_the_confirmation_not_a_refusal(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    state_rows: StateRows,
) -> None:
    """On main the helper's CANCELLED after the runtime's cancel was refused `task_terminal`."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime_factory(**CONFIRM)
    start_moving(probe, devices)
    press(probe)
    eventually(lambda: devices.tasks[MOVE].task.terminal)  # the helper CANCELLED it
    confirmed = eventually(lambda: trace_details(state_rows, "wf-c", "cancel_confirmed"))
    assert '"body_status":"CANCELLED"' in confirmed[0]
    assert not [e for e in probe.messages(f"{ROOT}/runtime/error") if e["error"] == "task_terminal"]
    assert state_rows("SELECT count(*) FROM cancel_watch") == [(0,)]
    assert len([c for c in devices.cancels if c["task_id"] == MOVE]) == 1  # no re-send needed


def test_a_hung_agent_gets_the_cancel_again_then_the_safe_stop_and_the_alarm_clears_late(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    cloud: SimCloud,
    state_rows: StateRows,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hung")
    devices.behaviors["mobility.stop"] = Behavior("silent")  # the stop is not confirmed either
    runtime = runtime_factory(**CONFIRM)
    start_moving(probe, devices)
    pressed = press(probe)
    # the next move on `base`, 0.2 s later, waits until the first body is confirmed stopped
    # (on main it was dispatched at once and the first task's safe stop halted its walk)
    probe.publish(f"{ROOT}/workflow/request", move("wf-d", args={"room": "거실"}))
    devices.wait_for(lambda d: STOP in d.tasks, timeout_s=5)
    stopped_after = time.monotonic() - pressed
    cancels = [c for c in devices.cancels if c["task_id"] == MOVE]
    assert len(cancels) == 2 and cancels[0] == cancels[1]  # one re-send, then the stop
    assert 2 * WINDOW_S <= stopped_after < 2 * WINDOW_S + 1.0, stopped_after
    command = devices.tasks[STOP].command
    assert command["operation_id"] == "stop" and command["safe_stop"] is True
    shown = workflow_event(probe, "wf-c", "CANCEL_UNCONFIRMED")
    assert shown["task_id"] == MOVE and shown["workflow_status"] == "cancelled"
    alarm = status(probe, alarmed=True)["alarm"]
    assert alarm == {"kind": "cancel_unconfirmed", "task_ids": [MOVE]}
    assert runtime.notify is not None
    line = f"STATUS=ALARM cancel unconfirmed: {MOVE}; "
    eventually(lambda: any(seen.startswith(line) for seen in runtime.notify.lines), 5)
    told = eventually(
        lambda: [
            r["body"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"]["status"] == "CANCEL_UNCONFIRMED"
        ]
    )
    assert told[0]["event"]["safe_stop"] == "mobility.stop"
    beat = eventually(lambda: heartbeat(state_rows).get("alarm"))  # what `status` shows
    assert beat == alarm and heartbeat(state_rows)["health"] == "degraded"
    assert "wf-d:step_move" not in devices.tasks  # still waiting for `base`

    devices.release(MOVE)  # the agent comes back: its CANCELLED confirms, the alarm clears
    assert workflow_event(probe, "wf-c", "CANCEL_CONFIRMED")["reason"] == "cancelled"
    assert "alarm" not in status(probe, alarmed=False)
    eventually(lambda: not runtime.notify.lines[-1].startswith("STATUS=ALARM"), 5)
    devices.wait_for(lambda d: "wf-d:step_move" in d.tasks)  # `base` is free: the next goes
    assert eventually(lambda: heartbeat(state_rows).get("alarm", 0) is None)


def heartbeat(state_rows: StateRows) -> Any:
    rows = state_rows("SELECT value FROM device_state WHERE key = 'runtime_heartbeat'")
    return json.loads(rows[0][0]) if rows else {}


def test_a_late_completed_after_the_cancel_is_recorded_as_what_the_body_did(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    state_rows: StateRows,
    cloud: SimCloud,
) -> None:
    """On main the COMPLETED was refused `task_terminal` and nobody learned the robot arrived."""
    devices.behaviors["mobility.move_to_room"] = Behavior("hung")
    runtime_factory(taskmanager={"cancel_confirm_s": 5})
    start_moving(probe, devices)
    press(probe)
    devices.wait_for(lambda d: any(c["task_id"] == MOVE for c in d.cancels))
    devices.complete(MOVE)  # the body finished the move before the cancel took
    done = workflow_event(probe, "wf-c", "CANCEL_CONFIRMED")
    assert (done["reason"], done["workflow_status"]) == ("completed", "cancelled")
    trace = trace_details(state_rows, kind="cancel_confirmed")
    assert '"body_status":"COMPLETED"' in trace[0] and '"arrived_room":"안방"' in trace[0]
    told = eventually(
        lambda: [
            r["body"]["event"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"]["status"] == "CANCEL_CONFIRMED"
        ]
    )
    assert told[0]["evidence"] == {"arrived_room": "안방"}
    assert not [e for e in probe.messages(f"{ROOT}/runtime/error") if e["error"] == "task_terminal"]
    (step,) = [
        s
        for s in __import__("json").loads(
            state_rows("SELECT doc FROM workflows WHERE workflow_id = 'wf-c'")[0][0]
        )["steps"]
    ]
    assert step["status"] == "CANCELLED"  # for the user it stays cancelled


def test_a_restart_between_cancel_and_confirmation_still_escalates_on_time(
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
    broker: Mosquitto,
) -> None:
    devices.behaviors["mobility.move_to_room"] = Behavior("hung")
    devices.behaviors["mobility.stop"] = Behavior("silent")
    runtime = runtime_factory(taskmanager={"cancel_confirm_s": 1.0})
    start_moving(probe, devices)
    pressed = press(probe)
    runtime.kill()  # before the first window ends, and before the cancel's PUBACK is reaped (2 s)
    gone = time.monotonic() - pressed
    assert gone < 1.0, gone
    time.sleep(max(0.0, 2.2 - gone))  # the runtime stays down past both windows
    stamped = StampedProbe(broker.port, [f"{ROOT}/task/cancel/mobility"])
    try:
        runtime.start()
        devices.wait_for(lambda d: STOP in d.tasks, timeout_s=10)
        # the cancel's row was still owed (never PUBACKed as far as the runtime knew): it goes
        # again at the start and its two windows run from then (TaskManager.reload's rearm), the
        # re-send after the first, the stop after the second: on time, and no third waited
        again = [at for at, body in stamped.stamps if body["task_id"] == MOVE]
        assert len(again) == 2, again  # the owed cancel at the start, the re-send a window on
        after = devices.received_at[STOP] - again[0]  # read from arrivals, not when seen
        assert 2 * 1.0 - 0.1 <= after < 2 * 1.0 + 0.5, after
    finally:
        stamped.close()
    assert "alarm" in status(probe, alarmed=True)


class StampedProbe(MqttProbe):
    """A probe that also notes when each message arrived (monotonic, on arrival)."""

    def __init__(self, port: int, topics: list[str]) -> None:
        self.stamps: list[tuple[float, Any]] = []
        super().__init__(port, topics)

    def _on_message(self, c: paho.Client, u: Any, msg: paho.MQTTMessage) -> None:
        self.stamps.append((time.monotonic(), json.loads(msg.payload)))
        super()._on_message(c, u, msg)


class RawAgent:
    """A bare MQTT 5 agent with a persistent session that keeps everything it is sent (no
    helper: nothing dropped on its side), to see what the broker delivers."""

    def __init__(self, port: int) -> None:
        self.got: list[tuple[str, Any]] = []
        self._cond = threading.Condition()
        self._client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id="raw-agent", protocol=MQTTProtocolVersion.MQTTv5
        )
        self._client.on_message = self._on_message
        self._client.on_connect = lambda c, _u, _f, _r, _p: c.subscribe(
            [(f"{ROOT}/task/command/mobility", 1), (f"{ROOT}/task/cancel/mobility", 1)]
        )
        self._client.on_subscribe = lambda *_a: self._mark("subscribed", None)
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 300
        self._client.connect("127.0.0.1", port, clean_start=False, properties=props)
        self._client.loop_start()

    def _mark(self, topic: str, body: Any) -> None:
        with self._cond:
            self.got.append((topic, body))
            self._cond.notify_all()

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        self._mark(msg.topic, json.loads(msg.payload))

    def wait(self, want: Any, timeout_s: float = 10.0) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: want(self.got), timeout_s), self.got

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


def test_a_command_held_past_its_deadline_is_never_delivered(
    runtime_factory: RuntimeFactory, probe: MqttProbe, broker: Mosquitto
) -> None:
    """MQTT 5: the broker drops a command whose expiry passed while its agent was away (on
    main it carried no expiry and the broker delivered it, stale, on reconnect)."""
    away = RawAgent(broker.port)
    away.wait(lambda got: ("subscribed", None) in got)
    away.close()  # away: the broker keeps its session and queues for it
    runtime_factory(**CONFIRM)
    probe.publish(f"{ROOT}/workflow/request", move(timeout_s=1))
    workflow_event(probe, "wf-c", "TIMEOUT")
    time.sleep(1.2)  # the broker counts the 1 s expiry in whole seconds of its own clock
    back = RawAgent(broker.port)
    try:  # the cancel, queued after the command, comes; the command does not
        back.wait(lambda got: any(t.endswith("/task/cancel/mobility") for t, _ in got))
        commands = [b["task_id"] for t, b in back.got if t.endswith("/task/command/mobility")]
        assert MOVE not in commands
    finally:
        back.close()


def test_on_mqtt_311_the_helper_drops_a_stale_command(
    runtime_factory: RuntimeFactory, probe: MqttProbe, broker: Mosquitto
) -> None:
    agents = DeviceAgents(broker.port, ROOT, protocol="3.1.1")
    agents.close()
    # an agent the runtime does not know to be offline (its status cleared): with the status
    # `offline` the step fails `agent_offline` at once and no command goes (SPEC 4.8)
    probe.publish(f"{ROOT}/agent/mobility/status", b"", retain=True)
    runtime_factory(mqtt={"protocol": "3.1.1"}, **CONFIRM)
    probe.publish(f"{ROOT}/workflow/request", move(timeout_s=1))
    workflow_event(probe, "wf-c", "TIMEOUT")
    back = DeviceAgents(broker.port, ROOT, protocol="3.1.1")
    try:
        back.wait_for(lambda d: any(c["task_id"] == MOVE for c in d.cancels))
        assert MOVE not in back.order  # delivered by the broker, dropped by the helper
        back.wait_for(lambda d: STOP in d.tasks, timeout_s=5)  # a safe stop never expires
    finally:
        back.close()

"""An agent's retained status after the broker lost the runtime's session (SPEC §4.8, seed 5091
of the device simulator), through the real process: Mosquitto and `a2a-edge run`."""

from __future__ import annotations

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import DEVICE, ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_agent_presence import agents_row, one_step

STATUS = f"{ROOT}/runtime/status"


def take_the_session(port: int) -> paho.Client:
    """Connect under the runtime's client id with a clean start: the broker drops the runtime's
    connection and discards its session (what a broker restarted without its store does)."""
    client = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=f"a2a-edge-{DEVICE}",
        protocol=MQTTProtocolVersion.MQTTv5,
    )
    client.connect("127.0.0.1", port, keepalive=10, clean_start=True)
    client.loop_start()
    eventually(client.is_connected)
    return client


def test_an_offline_retained_at_a_resubscribe_is_taken_though_it_names_a_boot_not_heard(
    broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    """The runtime heard mobility online under b1; then the broker lost its session, and
    meanwhile the agent came back as b2 and went offline (b2's `online` was sent to no one).
    At the SUBSCRIBE the broker sends the retained `offline` of b2: the agent's state now, not
    an old boot's late will, so a step for mobility fails at once `agent_offline` and no
    command goes. Before, the status was ignored as stale (its boot is not b1) and the move
    was sent to an agent that was gone."""
    runtime_factory(mqtt={"reconnect_min_s": 3, "reconnect_max_s": 3})
    probe.publish(f"{ROOT}/agent/mobility/status", {"state": "online", "boot_id": "mob-b1"})
    eventually(lambda: agents_row(state_rows, "mobility") == ("online", "mob-b1", 1))
    impostor = take_the_session(broker.port)
    status = f"{ROOT}/agent/mobility/status"
    for state in ("online", "offline"):  # while no session of the runtime's holds them
        probe.publish(status, {"state": state, "boot_id": "mob-b2"}, retain=True)
    seen = len(probe.messages(STATUS))
    impostor.disconnect()
    impostor.loop_stop()
    # the runtime connects again (reconnect_min_s later), SUBSCRIBEs and is sent the retained
    eventually(lambda: [b for b in probe.messages(STATUS)[seen:] if b.get("state") == "online"])
    eventually(lambda: agents_row(state_rows, "mobility") == ("offline", "mob-b2", 1))
    move = one_step("wf-sl", "mobility", "move_to_room", args={"room": "거실"})
    probe.publish(f"{ROOT}/workflow/request", move)
    assert workflow_event(probe, "wf-sl", "FAILED")["reason"] == "agent_offline"
    assert probe.messages(f"{ROOT}/task/command/mobility") == []

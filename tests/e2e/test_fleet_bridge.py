"""The fleet bridge of systemd/mosquitto-bridge.conf, for real: the robot's Mosquitto bridged
over mutual TLS (a test CA, a per-robot certificate) to a second Mosquitto standing in for the
managed broker. Status and workflow events go out, a forget from the fleet is answered, and
what the robot said while the link was down arrives, in order, once it is back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from sim.broker import Mosquitto
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import DEVICE, ROOT, RuntimeFactory, workflow_event
from tests.e2e.test_tls import make_ca, make_cert
from tests.taskmanager.helpers import MOVE_PURIFY

BRIDGE = Path(__file__).parents[2] / "systemd" / "mosquitto-bridge.conf"
pytestmark = pytest.mark.e2e


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    d = tmp_path / "pki"
    d.mkdir()
    make_ca(d, "fleet-ca")
    make_cert(d, "fleet-ca", "fleet", "localhost")  # the managed broker's server certificate
    make_cert(d, "fleet-ca", DEVICE, DEVICE)  # this robot's, for its bridge
    make_cert(d, "fleet-ca", "dashboard", "fleet-dashboard")  # a fleet-side client
    return d


@pytest.fixture
def fleet(tmp_path: Path, pki: Path) -> Iterator[Mosquitto]:
    server = Mosquitto(
        tmp_path / "fleet",
        tls={
            "cafile": str(pki / "fleet-ca.crt"),
            "certfile": str(pki / "fleet.crt"),
            "keyfile": str(pki / "fleet.key"),
            "require_certificate": "true",
            "use_identity_as_username": "true",
        },
    )
    server.start()
    yield server
    server.kill()


def bridge_conf(fleet: Mosquitto, pki: Path) -> str:
    """The shipped file with this robot's values (and a short constant reconnect delay: the
    shipped jittered 5-60 s would make the outage below take half a minute)."""
    text = BRIDGE.read_text()
    for shipped, here in (
        ("fleet-broker.example.com:8883", f"127.0.0.1:{fleet.port}"),
        ("/etc/mosquitto/certs/fleet-ca.pem", str(pki / "fleet-ca.crt")),
        ("/etc/mosquitto/certs/robot-001.crt", str(pki / f"{DEVICE}.crt")),
        ("/etc/mosquitto/certs/robot-001.key", str(pki / f"{DEVICE}.key")),
        ("restart_timeout 5 60", "restart_timeout 1"),
        ("robot-001", DEVICE),
    ):
        assert shipped in text, shipped
        text = text.replace(shipped, here)
    return text


@pytest.fixture
def broker(tmp_path: Path, fleet: Mosquitto, pki: Path) -> Iterator[Mosquitto]:
    """The robot's own Mosquitto (what runtime_factory, probe and devices use), bridged."""
    server = Mosquitto(tmp_path / "broker", extra_conf=bridge_conf(fleet, pki))
    server.start()
    yield server
    server.kill()


class FleetClient:
    """A dashboard on the fleet broker with a persistent session (it outlives the broker's
    restart: what is delivered while it reconnects waits for it)."""

    def __init__(self, port: int, pki: Path) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self._cond = threading.Condition()
        self.client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id="fleet-dashboard",
            protocol=MQTTProtocolVersion.MQTTv5,
        )
        self.client.tls_set(
            ca_certs=str(pki / "fleet-ca.crt"),
            certfile=str(pki / "dashboard.crt"),
            keyfile=str(pki / "dashboard.key"),
        )
        self.client.reconnect_delay_set(1, 1)
        self.client.on_connect = lambda c, *_: c.subscribe(f"{ROOT}/#", qos=1)
        self.client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 600
        self.client.connect_async("localhost", port, clean_start=False, properties=props)
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        with self._cond:
            self.messages.append((msg.topic, bytes(msg.payload)))
            self._cond.notify_all()

    def wait_for(self, topic: str, needle: bytes, timeout_s: float = 15) -> bytes:
        def found() -> bytes | None:
            return next((p for t, p in self.messages if t == topic and needle in p), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout_s):
                raise TimeoutError(f"no {needle!r} on {topic}: {[t for t, _ in self.messages]}")
            result = found()
            assert result is not None
            return result

    def events(self, workflow_id: str) -> list[str]:
        with self._cond:
            bodies = [p for t, p in self.messages if t == f"{ROOT}/workflow/event"]
        return [b["status"] for b in map(json.loads, bodies) if b["workflow_id"] == workflow_id]

    def wait_events(self, workflow_id: str, count: int, timeout_s: float = 10) -> list[str]:
        with self._cond:
            self._cond.wait_for(lambda: len(self.events(workflow_id)) >= count, timeout_s)
        return self.events(workflow_id)

    def topics(self) -> set[str]:
        with self._cond:
            return {t for t, _ in self.messages}

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def test_status_events_and_forget_cross_the_bridge_and_an_outage_is_queued(
    fleet: Mosquitto,
    pki: Path,
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
) -> None:
    dashboard = FleetClient(fleet.port, pki)
    agents = DeviceAgents(broker.port, ROOT)
    try:
        dashboard.wait_for(f"{ROOT}/bridge/state", b"1")  # the link is up
        runtime_factory()
        dashboard.wait_for(f"{ROOT}/runtime/status", b'"online"')
        probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-a"})
        dashboard.wait_for(f"{ROOT}/workflow/event", b'"WORKFLOW_COMPLETED"')

        forget = {"request_id": "fleet-f1", "scope": "session", "id": "s-none"}
        dashboard.client.publish(f"{ROOT}/memory/forget", json.dumps(forget).encode(), qos=1)
        result = json.loads(dashboard.wait_for(f"{ROOT}/memory/forget/result", b'"fleet-f1"'))
        assert result["request_id"] == "fleet-f1"

        fleet.stop()  # the link goes down; the robot goes on
        probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": "wf-b"})
        workflow_event(probe, "wf-b", "WORKFLOW_COMPLETED", 15)  # said while nobody heard
        local = [
            b["status"]
            for b in probe.messages(f"{ROOT}/workflow/event")
            if b["workflow_id"] == "wf-b"
        ]
        assert dashboard.events("wf-b") == [] and len(local) >= 3
        fleet.start()  # the same port, its persistence (the dashboard's session) kept
        dashboard.wait_for(f"{ROOT}/workflow/event", b'"wf-b"', 20)
        assert dashboard.wait_events("wf-b", len(local)) == local  # all of them, in order
        assert dashboard.topics() <= {
            f"{ROOT}/bridge/state",
            f"{ROOT}/runtime/status",
            f"{ROOT}/workflow/event",
            f"{ROOT}/memory/forget",
            f"{ROOT}/memory/forget/result",
        }  # no turn, command or callback left the robot
    finally:
        agents.close()
        dashboard.close()

"""bench.fleet's device agents live in host processes of their own: paho's select() cannot
watch a descriptor at or above 1024, and the fleet driver of 100 robots held more than that
(robot 44's agents never connected; run_all's fleet step failed)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from bench import fleet_agents
from bench.fleet_agents import AgentHosts
from sim.broker import Mosquitto
from sim.mqttc import start_client


def fill_descriptors_past(limit: int) -> list[int]:
    """Descriptors held until the next one this process opens is above `limit`."""
    held: list[int] = []
    with open(os.devnull, "rb") as null:
        while not held or held[-1] < limit:
            held.append(os.dup(null.fileno()))
    return held


def test_every_robots_agents_come_online_from_a_driver_past_1024_descriptors(
    broker: Mosquitto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_agents, "PER_PROCESS", 2)  # 3 robots: two hosts
    online: set[str] = set()
    seen = threading.Condition()

    def on_message(_c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        if json.loads(msg.payload).get("state") == "online":
            with seen:
                online.add(msg.topic.split("/")[1])
                seen.notify_all()

    def on_connect(client: paho.Client, _u: Any, _f: Any, _reason: Any, _p: Any) -> None:
        client.subscribe("a2a/+/agent/mobility/status", qos=1)

    watcher = start_client("127.0.0.1", broker.port, "watcher", on_connect, on_message)
    held = fill_descriptors_past(1030)  # the watcher's socket stays below; the hosts' pipes not
    hosts = AgentHosts(broker.port, 3, tmp_path)
    try:
        hosts.wait_ready(60)
        with seen:
            assert seen.wait_for(lambda: len(online) == 3, 30), online
        assert online == {"robot-00", "robot-01", "robot-02"}
        assert len(hosts.procs) == 2
    finally:
        hosts.close()
        for fd in held:
            os.close(fd)
        watcher.disconnect()
        watcher.loop_stop()
    assert [proc.returncode for proc in hosts.procs] == [0, 0]

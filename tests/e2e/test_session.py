"""The MQTT session: persistent across runtime restarts, rebuilt when the broker lost it,
both protocol versions, and the systemd watchdog."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory

TURN_REQ = f"{ROOT}/turn/request"
TURN_RESP = f"{ROOT}/turn/response"


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_turn_sent_while_the_runtime_is_down_is_answered_after_restart(
    runtime_factory: RuntimeFactory, probe: MqttProbe, protocol: str
) -> None:
    runtime = runtime_factory(mqtt={"protocol": protocol})
    assert probe.turn("t-before", "안녕")["status"] == "ok"
    assert runtime.terminate() == 0
    probe.publish(TURN_REQ, {"turn_id": "t-while-down", "recognized_text": "안녕"})
    runtime.start()
    reply = probe.wait_for(TURN_RESP, lambda b: b.get("turn_id") == "t-while-down", 15)
    assert reply["status"] == "ok"


def test_runtime_resubscribes_when_the_broker_forgot_its_session(
    tmp_path: Path, runtime_factory: RuntimeFactory, broker: Mosquitto, probe: MqttProbe
) -> None:
    runtime_factory()
    assert probe.turn("t-1", "안녕")["status"] == "ok"
    connects = probe.connects
    broker.kill()
    broker.persistence = False
    for leftover in broker.workdir.glob("*.db"):
        leftover.unlink()
    broker.start()
    probe.wait_connected(connects + 1)
    watcher = MqttProbe(broker.port, [f"{ROOT}/runtime/status"])
    try:  # the runtime is back once it says online again on the new broker
        watcher.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online", 15)
    finally:
        watcher.close()
    assert probe.turn("t-2", "안녕")["status"] == "ok"


def test_watchdog_pings_while_the_loop_turns(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud
) -> None:
    first = runtime_factory()
    first.terminate()
    runtime = RuntimeProcess(first.config, tmp_path, env={"WATCHDOG_USEC": "400000"})
    try:
        runtime.start()
        assert runtime.wait_line("WATCHDOG=1", 5)
        assert runtime.notify is not None
        assert any(line.startswith("STATUS=broker") for line in runtime.notify.lines)
    finally:
        runtime.close()

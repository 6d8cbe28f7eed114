"""Process life cycle: sd_notify, SIGTERM, bad config, a state DB from the future."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from edge.store.schema import MIGRATIONS
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, runtime_config

STATUS = f"{ROOT}/runtime/status"


def a2a_edge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def test_ready_then_sigterm_stops_cleanly(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    assert runtime.notify is not None
    assert "READY=1" in runtime.notify.lines
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    t0 = time.monotonic()
    assert runtime.terminate(timeout_s=10) == 0
    assert time.monotonic() - t0 < 10
    assert runtime.wait_line("STOPPING=1", 1.0)
    offline = probe.wait_for(STATUS, lambda b: b.get("state") == "offline")
    assert offline["version"] and offline["started_at"]
    started = [line for line in runtime.log().splitlines() if "started: device" in line]
    assert len(started) == 1 and "re-sent" in started[0]
    assert f"schema v{len(MIGRATIONS)}," in started[0]


def test_runtime_starts_while_the_broker_is_down_and_connects_later(
    runtime_factory: RuntimeFactory, broker: Mosquitto
) -> None:
    broker.stop()
    runtime = runtime_factory(wait_ready=False)
    assert runtime.wait_line("READY=1", 15)  # READY means the DB is open, not the broker
    broker.start()
    probe = MqttProbe(broker.port, [STATUS])
    try:
        probe.wait_for(STATUS, lambda b: b.get("state") == "online", timeout_s=15)
    finally:
        probe.close()


def test_bad_config_exits_2_naming_the_key(
    tmp_path: Path, broker: Mosquitto, cloud: SimCloud
) -> None:
    config = runtime_config(tmp_path, broker, cloud.url, mqtt={"port": "not-a-port"})
    result = a2a_edge("run", "--config", str(config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mqtt.port" in lines[0]

    good = runtime_config(tmp_path, broker, cloud.url)
    env = {"A2A_EDGE_MEMORY__RECENT_PAIRZ": "3", "PATH": "/usr/bin:/bin"}
    result = a2a_edge("run", "--config", str(good), env=env)
    assert result.returncode == 2
    assert "memory.recent_pairz: unknown key" in result.stderr

    missing = a2a_edge("run", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "file not found" in missing.stderr


def test_state_db_from_a_newer_schema_is_refused(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    assert runtime.terminate() == 0
    db_path = tmp_path / "state" / "state.db"
    assert db_path.stat().st_mode & 0o777 == 0o600
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version=999")
    conn.commit()
    conn.close()
    result = a2a_edge("run", "--config", str(runtime.config))
    assert result.returncode == 3
    assert "schema version 999" in result.stderr and "newer" in result.stderr


def test_status_reads_the_db_while_the_service_runs(runtime_factory: RuntimeFactory) -> None:
    runtime = runtime_factory()
    result = a2a_edge("status", "--json", "--config", str(runtime.config))
    assert result.returncode == 0, result.stderr
    assert '"device_id": "robot-test"' in result.stdout
    assert '"mqtt_outbox"' in result.stdout

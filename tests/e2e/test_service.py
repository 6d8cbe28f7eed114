"""The service as operators see it: watchdog, reload, permissions, status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import RuntimeFactory, eventually


def watchdog_times(runtime: RuntimeProcess) -> list[float]:
    assert runtime.notify is not None
    return [t for t, line in runtime.notify.timed if line == "WATCHDOG=1"]


def test_a_wedged_loop_stops_the_watchdog(tmp_path: Path, runtime_factory: RuntimeFactory) -> None:
    first = runtime_factory()
    first.terminate()
    runtime = RuntimeProcess(
        first.config, tmp_path, env={"WATCHDOG_USEC": "400000", "A2A_DEBUG_HOOKS": "1"}
    )
    try:
        runtime.start()
        eventually(lambda: len(watchdog_times(runtime)) >= 3)
        assert runtime.proc is not None
        runtime.proc.send_signal(signal.SIGUSR2)  # the loop sleeps 3 s in a handler
        blocked_at = time.monotonic()
        eventually(lambda: any(t > blocked_at + 3.0 for t in watchdog_times(runtime)), 10)
        during = [t for t in watchdog_times(runtime) if blocked_at + 0.5 < t < blocked_at + 2.8]
        assert during == []  # no ping while the loop was wedged (window 0.4 s)
        status = (
            [line for line in runtime.notify.lines if line.startswith("STATUS=")]
            if runtime.notify
            else []
        )
        assert any("broker connected; cloud reachable; mqtt outbox" in s for s in status)
    finally:
        runtime.close()


def test_sighup_reloads_log_level_and_privacy(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory(log={"level": "INFO"})
    cloud.script_sync(
        {
            "status": 200,
            "updates": {
                "profile_items": [
                    {
                        "key": "blood_pressure",
                        "value": "high",
                        "category": "health",
                        "status": "confirmed",
                    }
                ]
            },
        }
    )

    def snapshot_sent(turn_id: str, text: str) -> dict:  # type: ignore[type-arg]
        """The memory snapshot the runtime sent the cloud for this turn."""
        probe.turn(turn_id, text)
        body = cloud.requests("/v1/a2a/turn")[-1]["body"]
        return body["voice_context"]["memory_snapshot"]  # type: ignore[no-any-return]

    # the item is named ("high"), so it goes with the turn whenever consent allows: an item
    # that matches nothing is standing context, sent with at most half the turns (fb25117)
    names_it = "혈압 high 래"
    snapshot_sent("t-1", "안녕")
    eventually(lambda: cloud.synced())  # the pair went up, the update came down
    assert snapshot_sent("t-2", names_it)["long_term"]["profile_items"] == []  # not consented
    config = runtime.config.read_text().replace('level = "INFO"', 'level = "DEBUG"')
    runtime.config.write_text(config + '\n[privacy]\nconsented_categories = ["health"]\n')
    assert runtime.proc is not None
    runtime.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "reloaded: log level DEBUG" in runtime.log())
    items = snapshot_sent("t-3", names_it)["long_term"]["profile_items"]
    assert items == [{"key": "blood_pressure", "value": "high", "category": "health"}]


def test_start_up_permission_checks(tmp_path: Path, runtime_factory: RuntimeFactory) -> None:
    token = tmp_path / "token"
    token.write_text("tok-123")
    os.chmod(token, 0o644)
    runtime = runtime_factory(cloud={"token_file": str(token)})
    assert runtime.terminate() == 0
    os.chmod(tmp_path / "state" / "state.db", 0o644)
    runtime.start()
    log = runtime.log()
    assert "cloud.token_file" in log and "readable by everybody" in log
    assert "state.db was mode 644; set to 600" in log
    assert (tmp_path / "state" / "state.db").stat().st_mode & 0o777 == 0o600
    assert "tok-123" not in log


def test_status_shows_service_health(runtime_factory: RuntimeFactory) -> None:
    runtime = runtime_factory()

    def status() -> dict:  # type: ignore[type-arg]
        done = subprocess.run(
            [sys.executable, "-m", "edge", "status", "--json", "--config", str(runtime.config)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    shown = eventually(lambda: (s := status())["health"] == "ok" and s, 15)
    assert shown["broker"] == "connected" and shown["cloud"] == "reachable"
    assert shown["active_workflows"] == 0 and shown["db_bytes"] > 0
    assert shown["heartbeat_age_s"] < 15
    runtime.terminate()
    text = subprocess.run(
        [sys.executable, "-m", "edge", "status", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
    ).stdout
    assert "heartbeat_age_s" in text and "mqtt_outbox" in text


def test_metrics_endpoint_when_enabled(runtime_factory: RuntimeFactory, probe: MqttProbe) -> None:
    import urllib.request

    from sim.broker import free_port

    port = free_port()
    runtime_factory(metrics={"enabled": True, "port": port})
    probe.turn("t-m", "안녕")

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return resp.read().decode()

    text = eventually(lambda: (t := scrape()) and 'a2a_turns_total{status="ok"} 1' in t and t)
    for name in (
        "a2a_mqtt_outbox_depth",
        "a2a_sync_outbox_depth",
        "a2a_loop_lag_seconds",
        "a2a_broker_connected 1",
        "# TYPE a2a_turns_total counter",
        "# TYPE a2a_turn_device_seconds histogram",
        "a2a_turn_device_seconds_count 1",
        'a2a_turn_phase_seconds_count{phase="cloud"} 1',
        'a2a_turn_phase_seconds_count{phase="snapshot"} 1',
        "a2a_inbound_batch_messages_sum",
    ):
        assert name in text


def test_metrics_are_off_by_default(runtime_factory: RuntimeFactory) -> None:
    runtime = runtime_factory()
    assert "metrics on" not in runtime.log()


def test_json_logs_are_one_object_a_line_without_user_words(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(log={"format": "json", "level": "DEBUG"})
    probe.turn("t-j", "비밀 일기장 내용")
    runtime.terminate()
    entries = [json.loads(line) for line in runtime.log().splitlines() if line.strip()]
    assert entries and all({"ts", "level", "logger", "msg"} <= e.keys() for e in entries)
    assert any("turn t-j" in e["msg"] for e in entries)
    assert "비밀 일기장" not in runtime.log()


def test_status_says_broker_connected_as_soon_as_it_is(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    """Seen under a real systemd: READY's STATUS= is written before the broker connects, and
    `systemctl status` said "broker disconnected" until the watchdog's next tick (5 s)."""
    first = runtime_factory()
    first.terminate()
    runtime = RuntimeProcess(first.config, tmp_path, env={"WATCHDOG_USEC": "4000000"})
    try:
        runtime.start()
        assert runtime.notify is not None
        eventually(lambda: "WATCHDOG=1" in runtime.notify.lines, 10)  # type: ignore[union-attr]
        lines = runtime.notify.lines
        connected = next(i for i, s in enumerate(lines) if "broker connected;" in s)
        assert connected < lines.index("WATCHDOG=1"), lines  # not left for the first tick
    finally:
        runtime.close()

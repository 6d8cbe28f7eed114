"""What the CLI answers, through the real process (issue 35 item 6): `reload --json`, a reload
that leaves keys for a restart (exit 4, named), the JSON's `ok` agreeing with the exit code,
defaults in `sim cloud|devices --help`, the cloud URL a `sync replay` used, and a clean stop
logged as a clean disconnect."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, eventually

EXIT_RESTART = 4  # README "Exit codes", docs/cli.md


def a2a_edge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def answer_of(done: subprocess.CompletedProcess[str]) -> Any:
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    return json.loads(lines[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_reload_that_leaves_keys_for_a_restart_names_them_and_exits_4(
    runtime_factory: RuntimeFactory,
) -> None:
    runtime = runtime_factory(log={"level": "INFO"})
    config = runtime.config
    text = config.read_text()
    assert "reconnect_max_s = 1\n" in text
    config.write_text(text.replace("reconnect_max_s = 1\n", "reconnect_max_s = 7\n"))
    done = a2a_edge("reload", "--config", str(config))
    assert done.returncode == EXIT_RESTART, (done.stdout, done.stderr)
    assert "mqtt.reconnect_max_s" in done.stderr and "restart" in done.stderr
    assert "reloaded" not in done.stdout
    assert runtime.proc is not None and runtime.proc.poll() is None


def test_reload_takes_json_and_its_ok_agrees_with_the_exit_code(
    runtime_factory: RuntimeFactory,
) -> None:
    runtime = runtime_factory(log={"level": "INFO"})
    config = runtime.config
    text = config.read_text()
    config.write_text(text.replace('level = "INFO"', 'level = "DEBUG"'))
    done = a2a_edge("reload", "--config", str(config), "--json")
    assert done.returncode == 0, done.stderr
    answer = answer_of(done)
    assert answer["ok"] is True and answer["result"]["applied"] is True
    assert answer["result"]["needs_restart"] == []

    config.write_text(text.replace("reconnect_max_s = 1\n", "reconnect_max_s = 7\n"))
    done = a2a_edge("reload", "--config", str(config), "--json")
    assert done.returncode == EXIT_RESTART
    answer = answer_of(done)
    assert answer["ok"] is False and "mqtt.reconnect_max_s" in answer["error"]
    assert answer["result"] == {"applied": True, "needs_restart": ["mqtt.reconnect_max_s"]}


def test_reload_without_a_service_answers_json_with_ok_false(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    done = a2a_edge("reload", "--config", str(config), "--json")
    assert done.returncode == 1
    answer = answer_of(done)
    assert answer["ok"] is False and "no running service" in answer["error"]


def test_json_ok_agrees_with_the_exit_code_when_nothing_matched(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    probe.turn("t-1", "안녕")
    for service in ("running", "stopped"):
        for args in (
            ("memory", "revoke", "--key", "nope"),
            ("memory", "forget", "--pair", "pair-nope"),
        ):
            done = a2a_edge(*args, "--config", config, "--json")
            answer = answer_of(done)
            assert done.returncode == 1, (service, args, done.stderr)
            assert answer["ok"] is False, (service, args, answer)
            assert answer["error"].startswith("nothing matched: "), answer
        if service == "running":
            assert runtime.terminate() == 0
    pairs = answer_of(a2a_edge("memory", "pairs", "--config", config, "--json"))
    done = a2a_edge("memory", "forget", "--pair", pairs[0]["pair_id"], "--config", config, "--json")
    assert done.returncode == 0 and answer_of(done)["ok"] is True


def test_sim_help_shows_every_default() -> None:
    for command in (("sim", "cloud"), ("sim", "devices")):
        done = a2a_edge(*command, "--help")
        assert done.returncode == 0
        flat = " ".join(done.stdout.split())
        options = [
            word.rstrip(",")
            for line in done.stdout.splitlines()
            if line.startswith("  --")
            for word in line.split()[:1]
        ]
        assert len(options) >= 5, done.stdout
        assert flat.count("(default:") >= len(options), (command, done.stdout)
    assert "--latency-s S delay every answer (default: 0.0)" in " ".join(
        a2a_edge("sim", "cloud", "--help").stdout.split()
    )


def test_sync_replay_without_the_service_names_the_cloud_url(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    runtime = runtime_factory(cloud_url=down)
    probe.turn("t-1", "안녕")  # answered offline; its pair waits in the sync outbox
    assert runtime.terminate() == 0
    done = a2a_edge("sync", "replay", "--config", str(runtime.config), "--json")
    answer = answer_of(done)
    assert done.returncode == 1 and answer["ok"] is False
    assert answer["result"]["cloud_url"] == down and answer["result"]["sent_by"] == "here"
    assert down in answer["error"]
    done = a2a_edge("sync", "replay", "--config", str(runtime.config))
    assert done.returncode == 1 and down in done.stderr, done.stderr


def test_a_clean_stop_logs_a_clean_disconnect(runtime_factory: RuntimeFactory) -> None:
    runtime = runtime_factory(log={"level": "DEBUG"})
    assert runtime.terminate() == 0
    lines = [line for line in runtime.log().splitlines() if "broker disconnected" in line]
    assert lines, runtime.log()[-2000:]
    assert not any("error" in line.lower() for line in lines), lines


def test_a_stop_with_the_broker_stopping_too_is_no_error(
    runtime_factory: RuntimeFactory, broker: Mosquitto
) -> None:
    """Ctrl-C of a stack run by hand (SIGINT to the broker and the service at once) logged
    `broker disconnected: Unspecified error` (paho's words for a socket closed without a
    DISCONNECT)."""
    runtime = runtime_factory(log={"level": "INFO"})
    assert runtime.proc is not None
    runtime.proc.send_signal(signal.SIGINT)
    broker.stop()
    assert runtime.proc.wait(timeout=20) == 0
    lines = [line for line in runtime.log().splitlines() if "broker disconnected" in line]
    assert not any("error" in line.lower() for line in lines), lines
    assert all(" INFO " in line for line in lines), lines


DAYS_10 = 864_000.0


def test_status_of_a_stopped_offset_clock_service_says_its_age_and_its_clock_offset(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    """The demo's kept state: its service ran 10 days ahead (A2A_CLOCK_OFFSET_FILE). `status`
    said `863999 s ahead of this clock`; it now ages the beat on this host's clock and says
    the service's clock offset as what it is."""
    offset = tmp_path / "clock-offset"
    offset.write_text(str(DAYS_10))
    runtime = runtime_factory(env={"A2A_CLOCK_OFFSET_FILE": str(offset)})
    config = str(runtime.config)
    status = ("status", "--config", config, "--json")
    assert eventually(lambda: answer_of(a2a_edge(*status))["last_seen"])  # a beat was written
    assert runtime.terminate() == 0
    done = a2a_edge("status", "--config", str(runtime.config), "--json")
    assert done.returncode == 3
    shown = answer_of(done)
    assert 0 <= shown["heartbeat_age_s"] < 120, shown["heartbeat_age_s"]
    assert abs(shown["service_clock_offset_s"] - DAYS_10) < 60, shown["service_clock_offset_s"]
    done = a2a_edge("status", "--config", str(runtime.config))
    title = done.stdout.splitlines()[0]
    assert "ahead of this clock" not in title, title
    assert "s ago (its clock runs 864000 s ahead of this host's)" in title, title

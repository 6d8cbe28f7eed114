"""`a2a-edge memory show|snapshot` read the live service's DB without disturbing it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, eventually


def cli(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "edge", *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_snapshot_cli_is_what_the_next_turn_sends(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    probe.turn("t-1", "안녕")

    printed = json.loads(cli("memory", "snapshot", "--json", "--config", str(runtime.config)))
    assert printed["bytes"] == len(
        json.dumps(printed["snapshot"], ensure_ascii=False, separators=(",", ":")).encode()
    )

    probe.turn("t-2", "고마워")
    sent = cloud.requests("/v1/a2a/turn")[-1]["body"]["voice_context"]["memory_snapshot"]
    assert sent == printed["snapshot"]

    def shown() -> Any:
        return json.loads(cli("memory", "show", "--json", "--config", str(runtime.config)))

    # both pairs reach the cloud and are marked synced
    final = eventually(lambda: (s := shown())["tiers"]["pairs_unsynced"] == 0 and s)
    assert final["tiers"]["pairs"] == 2
    assert final["device_state"]["last_route"] == "DEF"
    assert final["sync"]["cursor"].startswith("cur-")
    assert [w["payload"]["turn_id"] for w in cloud.synced()] == ["t-1", "t-2"]
    text = cli("memory", "show", "--config", str(runtime.config))
    assert "profile items:" in text and final["sync"]["cursor"] in text

"""A CLI change asked of the running service carries a deadline (`expires_at`) that the service
judges on its own clock: the CLI stamps it on that clock too (edge/host/clock.py: the same
environment, a demo's or a test's offset clock). Before: stamped on the real clock, every
request to a demo days ahead was refused `expired` (issue 30, 16b)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows

DAY_S = 86400


def test_a_forget_asked_of_a_service_days_ahead_is_applied_not_expired(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    offset = tmp_path / "clock-offset"
    offset.write_text(str(3 * DAY_S))  # what the demo does to let days pass
    env = {"A2A_CLOCK_OFFSET_FILE": str(offset)}
    runtime = runtime_factory(env=env)
    assert probe.turn("t-clock", "안녕")["status"] == "ok"
    pair = state_rows("SELECT pair_id FROM pairs WHERE turn_id = ?", ["t-clock"])[0][0]
    forget = ["memory", "forget", "--pair", pair, "--json", "--config", str(runtime.config)]
    done = subprocess.run(
        [sys.executable, "-m", "edge", *forget],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},  # the CLI is given the service's environment
    )
    answer = json.loads(done.stdout)
    assert answer.get("error") != "expired", answer  # before: refused on the service's clock
    assert done.returncode == 0 and answer["ok"] is True, (answer, done.stderr)
    assert answer["result"]["removed"]["pairs"] == 1, answer
    assert state_rows("SELECT count(*) FROM pairs WHERE turn_id = ?", ["t-clock"]) == [(0,)]
    # the service answered it over P/admin/response (no offline run behind it)
    answered = probe.wait_for(f"{ROOT}/admin/response", lambda b: b.get("ok") is True)
    assert answered["result"]["removed"]["pairs"] == 1

"""`a2a-edge status` of a running service on a full disk (a real 8 MiB tmpfs filled with zeros):
`degraded` with its reasons, never `unknown`. Before: the heartbeat is a row of the state DB,
which cannot be written then, and after 15 s status said `unknown` (issue 30, item 11). The
heartbeat is also written in place into `<state_dir>/heartbeat` (edge/host/beatfile.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from edge.config.settings import StorageSettings
from sim.processes import RuntimeProcess
from tests.conftest import RuntimeFactory, eventually, fill

# mounts a tmpfs on the host: never beside the booted systemd container (see test_deaf.py)
pytestmark = pytest.mark.xdist_group("system")

WATCH_S = 25.0  # past the 15 s after which a stale heartbeat reads `unknown`
# the worst case, nothing to give back (`storage.reserve_mb` came with item 1: with a reserve
# the DB's heartbeat is written a while longer; the same test shows main failing without it)
NO_RESERVE = {"reserve_mb": 0} if "reserve_mb" in StorageSettings.model_fields else {}


def status_of(runtime: RuntimeProcess) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "edge", "status", "--json", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_status_on_a_full_disk_is_degraded_with_the_reason_never_unknown(
    small_disk: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory(storage=NO_RESERVE)
    eventually(lambda: status_of(runtime)["heartbeat_age_s"] is not None, 15)
    filler = fill(small_disk)
    filled = time.monotonic()
    seen: list[tuple[float, str, list[str]]] = []
    while time.monotonic() - filled < WATCH_S:  # sampled for the whole window: never unknown
        shown = status_of(runtime)
        seen.append((round(time.monotonic() - filled, 1), shown["health"], shown["problems"]))
        assert shown["health"] != "unknown", seen
    assert runtime.proc is not None and runtime.proc.poll() is None  # still running
    print(f"\nstatus on a full disk, {len(seen)} reads over {WATCH_S:g}s: {seen[-1]}")
    _, health, problems = seen[-1]
    assert health == "degraded" and problems, seen[-1]
    assert shown["heartbeat_age_s"] is not None and shown["heartbeat_age_s"] < 15, shown
    assert any("heartbeat not written" in p or "full" in p for p in problems), problems
    filler.unlink()  # space is back: healthy again, from the DB's heartbeat too
    eventually(lambda: status_of(runtime)["health"] == "ok", 30)

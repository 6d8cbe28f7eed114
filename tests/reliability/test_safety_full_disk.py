"""Safety does not wait for storage (SPEC §2.4, §4.2; issue 30 item 1), on a real full disk (an
8 MiB tmpfs filled with zeros) with the real service: a PUI press acts at once and is recorded
once space returns; a reserve file is given back when the disk fills and the runtime's own writes
do not take its last space again; a start on a full disk comes up and says so."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory, eventually, fill, read_rows
from tests.taskmanager.helpers import MOVE_PURIFY

# mounts a tmpfs on the host: never beside the booted systemd container (see test_deaf.py)
pytestmark = pytest.mark.xdist_group("system")

EVENTS = f"{ROOT}/workflow/event"
PUI_RESULT = f"{ROOT}/pui/result"
PUI_EVENT = f"{ROOT}/pui/event"
TURNS = f"{ROOT}/turn/response"
PURIFIER = f"{ROOT}/task/command/air_purifier"
ACTS_WITHIN_S = 3.0  # a press on a full disk: its cancel and its answer (the usual time)
NO_RESERVE = {"reserve_mb": 0}  # the worst case: nothing to give back


def status_lines(runtime: RuntimeProcess) -> list[str]:
    assert runtime.notify is not None
    return [line for line in runtime.notify.lines if line.startswith("STATUS=")]


def workflow_status(db: Path, workflow_id: str) -> str | None:
    try:
        rows = read_rows(db, "SELECT status FROM workflows WHERE workflow_id = ?", [workflow_id])
    except sqlite3.Error:
        return None
    return str(rows[0][0]) if rows else None


def answers(probe: MqttProbe, event_id: str) -> list[Any]:
    return [b for b in probe.messages(PUI_RESULT) if b.get("event_id") == event_id]


def running(probe: MqttProbe, task_id: str) -> None:
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == task_id and b.get("status") == "RUNNING")


def test_a_pui_press_on_a_full_disk_acts_at_once_and_is_recorded_when_space_returns(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: no `task/cancel` and no `P/pui/result` while the disk stayed full; once space
    came back the held callback (COMPLETED, before the press) was applied first and started
    the next step before the cancel."""
    wf, move = "wf-stop", "wf-stop:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")  # RUNNING until told
    runtime = runtime_factory(storage=NO_RESERVE, env={"WATCHDOG_USEC": "1000000"})
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    running(probe, move)
    filler = fill(small_disk)
    devices.complete(move)  # its COMPLETED is held: the DB cannot take it
    eventually(lambda: "holding inbound" in runtime.log(), 10)
    pressed = time.monotonic()
    probe.publish(PUI_EVENT, {"event_id": "press-full", "kind": "cancel", "workflow_id": wf})
    result = probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-full", 10)
    answered_in = time.monotonic() - pressed
    assert answered_in < ACTS_WITHIN_S, answered_in
    assert (result["status"], result["workflow_ids"]) == ("cancelled", [wf])
    devices.wait_for(lambda d: any(c["task_id"] == move for c in d.cancels), ACTS_WITHIN_S)
    assert next(c["reason"] for c in devices.cancels if c["task_id"] == move) == "pui"
    # a repeat of the press gets the same answer; another press finds nothing active
    probe.publish(PUI_EVENT, {"event_id": "press-full", "kind": "cancel", "workflow_id": wf})
    eventually(lambda: len(answers(probe, "press-full")) == 2, ACTS_WITHIN_S)
    probe.publish(PUI_EVENT, {"event_id": "press-again", "kind": "cancel"})
    again = probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-again", 5)
    assert again["status"] == "nothing_active"
    db = small_disk / "state.db"
    assert workflow_status(db, wf) == "running"  # nothing of it is on disk yet
    assert runtime.proc is not None and runtime.proc.poll() is None

    filler.unlink()  # space returns: recorded, no restart
    assert eventually(lambda: workflow_status(db, wf) == "cancelled", 20)
    eventually(lambda: "every held input applied" in runtime.log(), 20)
    assert probe.messages(PURIFIER) == []  # nothing started meanwhile, nor after
    purify = [b for b in probe.messages(EVENTS) if b.get("task_id") == f"{wf}:step_purify"]
    assert [b["status"] for b in purify if b["status"] != "QUEUED"] == ["CANCELLED"]
    for event_id in ("press-full", "press-again"):  # never two different answers
        bodies = answers(probe, event_id)
        assert bodies and all(b == bodies[0] for b in bodies), bodies
    assert runtime.terminate() == 0


def test_the_reserve_is_given_back_when_the_disk_fills_and_not_eaten_by_turns(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: no reserve; after 1.3 MB were freed the runtime's own writes (turns) filled the
    disk again within about 19 turns, and a PUI press then waited for storage again."""
    wf = "wf-reserve"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory(storage={"reserve_mb": 2}, env={"WATCHDOG_USEC": "1000000"})
    reserve = small_disk / "reserve"
    assert reserve.exists() and reserve.stat().st_size == 2 * 2**20
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    running(probe, f"{wf}:step_move")
    filler = fill(small_disk)
    assert probe.turn("first", "안녕")["status"] == "ok"  # taken on the space given back
    assert not reserve.exists()
    eventually(lambda: "released the storage reserve" in runtime.log(), 5)
    eventually(lambda: any("reserve released" in x for x in status_lines(runtime)), 10)
    statuses = []
    for n in range(60):  # far more than filled 1.3 MB before
        reply = probe.turn(f"big-{n}", "가" * 4000, timeout_s=15)
        statuses.append((reply["status"], reply.get("error")))
    assert statuses[0] == ("ok", None)  # the reserve's space serves
    assert ("error", "storage_full") in statuses  # the last space is kept for safety
    db = small_disk / "state.db"
    probe.publish(PUI_EVENT, {"event_id": "press-reserve", "kind": "cancel", "workflow_id": wf})
    result = probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-reserve", 5)
    assert result["status"] == "cancelled"
    assert eventually(lambda: workflow_status(db, wf) == "cancelled", 10)  # committed, disk full
    assert filler.exists()

    filler.unlink()  # space returns: the reserve is made again
    eventually(lambda: reserve.exists() and reserve.stat().st_size == 2 * 2**20, 20)
    eventually(lambda: "storage reserve made again" in runtime.log(), 5)
    assert probe.turn("after", "안녕")["status"] == "ok"
    assert oct(os.stat(reserve).st_mode & 0o777) == "0o600"
    assert runtime.terminate() == 0


def test_a_start_on_a_full_disk_comes_up_answers_error_and_a_press_acts(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: the restart on the full disk failed ("database or disk is full"): the robot
    could neither hear nor stop."""
    wf, move = "wf-restart", "wf-restart:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory(storage=NO_RESERVE, env={"WATCHDOG_USEC": "1000000"})
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    running(probe, move)
    assert runtime.terminate() == 0
    filler = fill(small_disk)
    runtime.start()  # READY awaited (raises otherwise)
    reply = probe.turn("on-full", "안녕", timeout_s=10)
    assert (reply["status"], reply["error"]) == ("error", "storage_full")
    eventually(lambda: any("storage full" in x for x in status_lines(runtime)), 10)
    probe.publish(PUI_EVENT, {"event_id": "press-start", "kind": "cancel"})
    result = probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-start", 10)
    assert (result["status"], result["workflow_ids"]) == ("cancelled", [wf])
    devices.wait_for(lambda d: any(c["task_id"] == move for c in d.cancels), ACTS_WITHIN_S)
    filler.unlink()  # space is back: it stops to open the DB for writing (systemd restarts it)
    proc = runtime.proc
    assert proc is not None
    assert eventually(lambda: proc.poll() is not None, 20)
    assert proc.returncode == 1
    assert "space is back: stopping so the state DB opens for writing" in runtime.log()
    runtime.start()  # as systemd's Restart=on-failure does
    db = small_disk / "state.db"  # the press, never acknowledged, came again and is recorded
    assert eventually(lambda: workflow_status(db, wf) == "cancelled", 20)
    bodies = answers(probe, "press-start")
    assert bodies and all(b == bodies[0] for b in bodies), bodies
    assert probe.turn("after", "안녕")["status"] == "ok"
    assert runtime.terminate() == 0


def test_an_unconfirmed_cancel_on_a_full_disk_escalates_to_the_safe_stop(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """SPEC 4.2 while the DB refuses writes: the agent never confirms the press's cancel, so it
    goes again after one window and the capability's safe stop after the second, straight to
    the agent. Before: nothing at all went out while the disk stayed full."""
    window = 0.5
    wf, move = "wf-hung", "wf-hung:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("hung")  # sits on its cancel
    runtime = runtime_factory(
        storage=NO_RESERVE,
        taskmanager={"cancel_confirm_s": window},
        env={"WATCHDOG_USEC": "1000000"},
    )
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    running(probe, move)
    filler = fill(small_disk)
    pressed = time.monotonic()
    probe.publish(PUI_EVENT, {"event_id": "press-hung", "kind": "cancel", "workflow_id": wf})
    probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-hung", ACTS_WITHIN_S)
    stop = probe.wait_for(
        f"{ROOT}/task/command/mobility", lambda b: b.get("safe_stop") is True, 2 * window + 5
    )
    stopped_in = time.monotonic() - pressed
    assert 2 * window <= stopped_in < 2 * window + ACTS_WITHIN_S, stopped_in
    assert (stop["stops_task_id"], stop["operation_id"]) == (move, "stop")
    assert len([c for c in devices.cancels if c["task_id"] == move]) >= 2  # sent, then again
    assert f"cancel of {move} unconfirmed: safe stop mobility.stop commanded" in runtime.log()
    assert filler.exists()
    devices.release(move)
    filler.unlink()
    assert eventually(lambda: workflow_status(small_disk / "state.db", wf) == "cancelled", 20)
    assert runtime.terminate() == 0


def test_a_cli_cancel_on_a_full_disk_acts_at_once_and_is_recorded_when_space_returns(
    small_disk: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """`a2a-edge workflows cancel` while the DB refuses writes: the agent gets its cancel and
    the CLI its answer at once; recorded (`cancelled`, reason user) once space is back, even
    past the request's `expires_at`. Before: the CLI gave up (exit 1) and nothing went out."""
    wf, move = "wf-cli", "wf-cli:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    runtime = runtime_factory(storage=NO_RESERVE)
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    running(probe, move)
    filler = fill(small_disk)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "edge", "workflows", "cancel", wf, "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"cancelled {wf}" in done.stdout
    devices.wait_for(lambda d: any(c["task_id"] == move for c in d.cancels), ACTS_WITHIN_S)
    assert [c["reason"] for c in devices.cancels if c["task_id"] == move][:1] == ["user"]
    assert time.monotonic() - started < 15  # the CLI's own start-up counts here
    assert filler.exists()
    assert eventually(lambda: "acted on while the DB refuses writes" in runtime.log(), 5)
    # the request's expires_at (5 s, the CLI's wait) and its 2 s grace pass on the full disk
    eventually(lambda: time.monotonic() > started + 5 + 2 + 1, 15)
    filler.unlink()
    assert eventually(lambda: workflow_status(small_disk / "state.db", wf) == "cancelled", 20)
    assert runtime.terminate() == 0

"""Inputs other than inbound messages meet a full disk too (a real one: an 8 MiB tmpfs) and must
be held and applied once space returns, as inbound messages are (SPEC §2.4), with no restart:
a deadline that falls due while the DB refuses writes, and a reconnect to a broker that lost
the runtime's session."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sim.broker import Mosquitto
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory, eventually, fill, workflow_event
from tests.taskmanager.helpers import MOVE_PURIFY

# mounts a tmpfs on the host: never beside the booted systemd container (see test_deaf.py)
pytestmark = pytest.mark.xdist_group("system")

EVENTS = f"{ROOT}/workflow/event"
STATUS = f"{ROOT}/runtime/status"
COMMANDS = f"{ROOT}/task/command/mobility"
ACK_S = 3.0  # the step's ack window: the disk is full well before it closes
PAST_S = 1.5  # how long past the deadline the disk stays full
SPACE_BACK_S = 15.0  # what may pass between space returning and the work held being done
NO_RESERVE = {"reserve_mb": 0}  # a disk full to the last byte: no reserve to give back


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def alive(runtime: RuntimeProcess, pid: int) -> bool:
    return runtime.proc is not None and runtime.proc.pid == pid and runtime.proc.poll() is None


def test_a_deadline_due_while_the_disk_is_full_fires_once_space_returns(
    small_disk: Path,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    """Before: the tick at the deadline raised StorageUnavailable, which ended the deadline
    timer's task; after space returned the step never timed out, no cancel and no event went
    out, until a restart."""
    wf, move = "wf-full", "wf-full:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("silent")  # never acknowledges
    runtime = runtime_factory(storage=NO_RESERVE)
    assert runtime.proc is not None
    pid = runtime.proc.pid
    steps: list[dict[str, Any]] = MOVE_PURIFY["steps"]  # type: ignore[assignment]
    step = {**steps[0], "ack_timeout_s": ACK_S}
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf, "steps": [step]})
    devices.wait_for(lambda d: move in d.tasks)
    filler = fill(small_disk)
    due = instant(devices.tasks[move].command["ack_deadline"])
    assert datetime.now(UTC) < due, "the disk must be full before the deadline falls due"
    eventually(lambda: datetime.now(UTC) > due + timedelta(seconds=PAST_S), ACK_S + PAST_S + 5)

    def timed_out(body: Any) -> bool:
        return bool(body.get("task_id") == move and body.get("status") == "TIMEOUT")

    # the deadline's writes were refused: nothing of it went out while the disk was full
    assert not [b for b in probe.messages(EVENTS) if timed_out(b)]
    assert devices.cancels == []

    filler.unlink()  # space returns: no restart, no reconnect
    timeout = probe.wait_for(EVENTS, timed_out, SPACE_BACK_S)
    assert timeout["reason"] == "ack_timeout"
    devices.wait_for(
        lambda d: {"task_id": move, "workflow_id": wf, "reason": "timeout"} in d.cancels, 5
    )
    # the sim supervisor, asked about the TIMEOUT, has no decision: the workflow fails
    assert workflow_event(probe, wf, "WORKFLOW_FAILED", 10)["workflow_status"] == "failed"
    assert alive(runtime, pid)  # the same process did it
    assert runtime.terminate() == 0


def last_status_line(runtime: RuntimeProcess) -> str:
    assert runtime.notify is not None
    lines = [line for line in runtime.notify.lines if line.startswith("STATUS=")]
    return lines[-1] if lines else ""


def test_a_session_lost_while_the_disk_is_full_is_handled_once_space_returns(
    small_disk: Path,
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    """The broker comes back without its persistence (the runtime's session is gone) while the
    DB refuses writes. Before: the session-lost handling raised StorageUnavailable inside the
    connect handler, and the rest of it was skipped for good: the active task's command was
    never sent again (its callbacks sent meanwhile may be lost) and systemd's STATUS= still said
    `broker disconnected`."""
    wf, move = "wf-lost", "wf-lost:step_move"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")  # RUNNING until cancelled
    runtime = runtime_factory(storage=NO_RESERVE)  # no WATCHDOG_USEC: STATUS= only on connects
    assert runtime.proc is not None
    pid = runtime.proc.pid
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": wf})
    probe.wait_for(EVENTS, lambda b: b.get("task_id") == move and b.get("status") == "RUNNING")
    first = probe.wait_for(COMMANDS, lambda b: b["task_id"] == move)
    assert devices.deliveries()[move] == 1

    filler = fill(small_disk)
    statuses, connects = len(probe.messages(STATUS)), probe.connects
    broker.kill()
    for leftover in broker.workdir.glob("*.db"):  # back without persistence: sessions lost
        leftover.unlink()
    eventually(lambda: not devices.agent.connected)
    eventually(lambda: "broker disconnected" in last_status_line(runtime))
    broker.start()
    probe.wait_connected(connects + 1, timeout_s=15)
    assert devices.agent.wait_ready(15)  # subscribed again: a command sent now reaches it

    def online_again() -> bool:  # retained messages died with the broker: this one is new
        return any(b.get("state") == "online" for b in probe.messages(STATUS)[statuses:])

    eventually(online_again, 15)
    eventually(lambda: "broker connected (session new)" in runtime.log())  # the premise

    filler.unlink()  # space returns: no restart
    again = probe.wait_for(
        COMMANDS, lambda b: b["task_id"] == move and b["attempt"] > first["attempt"], SPACE_BACK_S
    )
    assert again["attempt"] == first["attempt"] + 1
    devices.wait_for(lambda d: d.tasks[move].deliveries == 2, 5)  # the agent saw it again
    # systemd hears of the reconnect too (`systemctl status`)
    eventually(lambda: "broker connected" in last_status_line(runtime), 5)
    assert devices.tasks[move].task.attempt == again["attempt"]
    assert alive(runtime, pid)
    assert runtime.terminate() == 0


def test_a_db_damaged_under_the_service_stops_it_with_exit_1(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """Before (found by an outside attack): the commit's StorageCorrupt was hidden behind the
    raw sqlite3 error of the board's reload that followed it; the door took it for a bug, the
    turns were refused `internal_error` and dead-lettered, the service ran on (30+ s) saying
    nothing of it, and its channel callbacks raised at the stop."""
    runtime = runtime_factory()
    assert probe.turn("before", "안녕")["status"] == "ok"
    db = tmp_path / "state" / "state.db"
    with sqlite3.connect(db) as outside:  # the log into the file, then its pages overwritten
        outside.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with db.open("r+b") as out:
        out.seek(3 * 4096)
        out.write(random.Random(29).randbytes(60 * 4096))
    for n in range(5):
        probe.publish(f"{ROOT}/turn/request", {"turn_id": f"dmg-{n}", "recognized_text": "안녕"})
    assert runtime.proc is not None
    assert eventually(lambda: runtime.proc is not None and runtime.proc.poll() is not None, 20)
    assert runtime.proc.returncode == 1
    log = runtime.log()
    assert "state DB is damaged" in log
    assert "Exception in callback" not in log and "dead letter" not in log


def test_a_reload_on_a_full_disk_returns_once_it_is_applied(
    small_disk: Path, runtime_factory: RuntimeFactory
) -> None:
    """Before (found by an outside attack): the reload's steps were held and applied once space
    returned, but its mark could not be written on the full disk and nothing wrote it later:
    `a2a-edge reload` (the unit's ExecReload) waited in vain and exited 1 for a reload that
    was applied, and a 0-byte `.reloaded.tmp` stayed behind."""
    runtime = runtime_factory(storage=NO_RESERVE)
    config = runtime.config
    filler = fill(small_disk)
    config.write_text(config.read_text() + '\n[privacy]\nconsented_categories = ["health"]\n')
    command = subprocess.Popen(
        [sys.executable, "-m", "edge", "reload", "--config", str(config), "--timeout-s", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: "holding reload" in runtime.log(), 10)
    except AssertionError:
        raise AssertionError(runtime.log()[-3000:]) from None
    assert command.poll() is None  # not applied yet: the command waits
    filler.unlink()
    _out, err = command.communicate(timeout=40)
    assert command.returncode == 0, err
    assert not list(small_disk.glob(".*.tmp"))
    grants = subprocess.run(
        [sys.executable, "-m", "edge", "consent", "list", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "category:health" in grants.stdout
    assert runtime.terminate() == 0

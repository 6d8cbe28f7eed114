"""Never deaf (SPEC §2.4): messages a handler fails on are refused, kept as dead letters and
acknowledged; a DB that refuses writes holds what it could not take and applies it once
storage is back, with no restart and no reconnect — under Mosquitto's default in-flight window
and under `max_inflight_messages 20` set explicitly."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, fill
from tests.taskmanager.helpers import MOVE_PURIFY

# mounts a tmpfs on the host: never beside the booted systemd container (on two workers its
# unit stops failed with "Failed to kill control group ...: Input/output error")
pytestmark = pytest.mark.xdist_group("system")

FLOOD = 25  # more than Mosquitto's 20 unacknowledged messages
DEBUG = {"A2A_DEBUG_HOOKS": "1"}


@pytest.fixture(params=["default", "max_inflight_messages 20"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Mosquitto]:
    extra = "" if request.param == "default" else f"{request.param}\n"
    server = Mosquitto(tmp_path / "broker", extra_conf=extra)
    server.start()
    yield server
    server.kill()


def errors(probe: MqttProbe, word: str) -> list[Any]:
    return [b for b in probe.messages(f"{ROOT}/runtime/error") if b.get("error") == word]


def still_answers(probe: MqttProbe, cloud: SimCloud, devices: DeviceAgents, tag: str) -> None:
    """A turn is answered, a workflow runs and a PUI press cancels it."""
    assert probe.turn(f"{tag}-turn", "안녕", timeout_s=10)["status"] == "ok"
    devices.behaviors["mobility.move_to_room"] = Behavior("hold")
    probe.publish(f"{ROOT}/workflow/request", {**MOVE_PURIFY, "workflow_id": f"wf-{tag}"})
    events = f"{ROOT}/workflow/event"
    probe.wait_for(events, lambda b: b["workflow_id"] == f"wf-{tag}" and b["status"] == "RUNNING")
    probe.publish(f"{ROOT}/pui/event", {"event_id": f"{tag}-pui", "kind": "cancel"})
    probe.wait_for(
        events, lambda b: b["workflow_id"] == f"wf-{tag}" and b["status"] == "WORKFLOW_CANCELLED"
    )


def test_admin_requests_that_failed_in_their_handler_no_longer_deafen_it(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before: a non-string forget id raised in the handler, the message was never acked, and
    after twenty of them the broker sent nothing more (a restart redelivered the same)."""
    runtime_factory()
    for n in range(FLOOD):
        request = {"request_id": f"bad-{n}", "command": "memory.forget"}
        probe.publish(
            f"{ROOT}/admin/request", {**request, "args": {"scope": "pair", "id": {"x": 1}}}
        )
    answers = f"{ROOT}/admin/response"
    eventually(lambda: len(probe.messages(answers)) == FLOOD, 15)
    assert {a["error"] for a in probe.messages(answers)} == {
        "args.id must be a string of 1 to 128 characters"
    }
    still_answers(probe, cloud, devices, "after-bad-admin")


def test_a_failing_handler_is_refused_dead_lettered_and_acknowledged(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    runtime = runtime_factory(env=DEBUG)
    for n in range(FLOOD):  # every one fails inside its unit of work (a debug hook)
        turn = {"turn_id": f"boom-{n}", "recognized_text": "비밀", "a2a_debug_raise": True}
        probe.publish(f"{ROOT}/turn/request", turn)
    eventually(lambda: len(errors(probe, "internal_error")) == FLOOD, 15)
    refs = {e["ref"]["turn_id"] for e in errors(probe, "internal_error")}
    assert refs == {f"boom-{n}" for n in range(FLOOD)}  # each refusal names its turn (2.4)

    def answered() -> list[Any]:
        return [b for b in probe.messages(f"{ROOT}/turn/response") if b["turn_id"] in refs]

    eventually(lambda: len(answered()) == FLOOD)  # every one answered, `error`
    assert {b["status"] for b in answered()} == {"error"}
    still_answers(probe, cloud, devices, "after-failures")
    listed = subprocess.run(
        [sys.executable, "-m", "edge", "inbox", "dead", "--json", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    dead = json.loads(listed.stdout)
    assert len(dead) == FLOOD and {d["topic"] for d in dead} == {f"{ROOT}/turn/request"}
    assert json.loads(dead[0]["payload"])["turn_id"] == f"boom-{FLOOD - 1}"
    assert "RuntimeError" in dead[0]["error"]
    # nothing of the failed turns was applied: no pair, no dedupe mark (a retry could apply)
    assert runtime.terminate() == 0


def test_a_real_full_disk_holds_turns_and_answers_them_when_space_returns(
    small_disk: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    """Before: after space was freed, 0 of 30 turns were answered until a restart."""
    # a small WAL bound: the log's file is trimmed to it, so 30 long turns must grow it
    runtime = runtime_factory(env={"WATCHDOG_USEC": "1000000"}, storage={"max_wal_mb": 1})
    assert probe.turn("before", "안녕")["status"] == "ok"
    filler = fill(small_disk)
    for n in range(30):
        turn = {"turn_id": f"full-{n}", "recognized_text": "가" * 4000}
        probe.publish(f"{ROOT}/turn/request", turn)
    assert eventually(lambda: _said_degraded(runtime), 15)
    filler.unlink()  # space returns: no restart, no reconnect
    answered = f"{ROOT}/turn/response"
    eventually(
        lambda: (
            {b["turn_id"] for b in probe.messages(answered)} >= {f"full-{n}" for n in range(30)}
        ),
        30,
    )
    assert errors(probe, "storage_unavailable") == []  # held, not refused: one outcome each
    assert runtime.proc is not None and runtime.proc.poll() is None
    assert runtime.terminate() == 0
    assert state_rows("SELECT count(*), count(DISTINCT turn_id) FROM pairs") == [(31, 31)]
    assert state_rows("PRAGMA integrity_check") == [("ok",)]


def _said_degraded(runtime: RuntimeProcess) -> bool:
    assert runtime.notify is not None
    return any(line.startswith("STATUS=degraded") for line in runtime.notify.lines)


def test_a_lone_surrogate_in_any_id_is_refused_and_does_not_silence_it(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, devices: DeviceAgents
) -> None:
    """Before (found by an outside attack): `{"event_id":"x\\ud800",…}` made the refusal itself
    fail to encode, the intake task died, and the runtime answered nothing more — while the
    watchdog kept pinging, and a restart met the same unacknowledged message again."""
    runtime_factory()
    surrogate = "x\\ud800"
    for topic, body in (
        ("pui/event", f'{{"event_id":"{surrogate}","kind":"cancel"}}'),
        ("turn/request", f'{{"turn_id":"{surrogate}","recognized_text":"안녕"}}'),
        ("task/callback", f'{{"task_id":"w:{surrogate}","seq":1,"status":"RUNNING"}}'),
        ("admin/request", f'{{"request_id":"{surrogate}","command":"sync.replay"}}'),
    ):
        probe.publish(f"{ROOT}/{topic}", body.encode())
    eventually(lambda: len(errors(probe, "invalid_json")) == 4)
    still_answers(probe, cloud, devices, "after-surrogates")

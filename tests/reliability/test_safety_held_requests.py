"""A PUI press covers the workflow requests that came before it, also those the DB could not take
yet (SPEC §2.4 "nothing started meanwhile"; issue 30 item 1), on a real full disk (an 8 MiB tmpfs)
with the real service and a real Mosquitto: a request held while the disk is full and followed by
a cancel-all press (or a press naming it) is recorded rejected (`cancelled_by_pui`) once space
returns, and its command never goes. Before: the press cancelled only the running workflow; the
held request was applied when space came back and the robot drove off after the press."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, eventually, fill
from tests.reliability.test_safety_full_disk import (
    EVENTS,
    NO_RESERVE,
    PUI_EVENT,
    PUI_RESULT,
    running,
    workflow_status,
)

pytestmark = pytest.mark.xdist_group("system")  # mounts a tmpfs on the host

REQUEST = f"{ROOT}/workflow/request"
MOBILITY = f"{ROOT}/task/command/mobility"


@pytest.mark.parametrize("named", [False, True], ids=["cancel_all", "named"])
def test_a_press_covers_a_workflow_request_held_before_it_on_a_full_disk(
    named: bool,
    small_disk: Path,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    running_wf, held_wf = "wf-air-7", "wf-go-7"
    devices.behaviors["air_purifier.start"] = Behavior("hold")  # RUNNING until told
    runtime = runtime_factory(storage=NO_RESERVE, env={"WATCHDOG_USEC": "1000000"})
    purify = {"step_id": "p", "capability_id": "air_purifier", "operation_id": "start"}
    probe.publish(REQUEST, {"workflow_id": running_wf, "steps": [{**purify, "args": {}}]})
    running(probe, f"{running_wf}:p")
    filler = fill(small_disk)
    move = {"step_id": "m", "capability_id": "mobility", "operation_id": "move_to_room"}
    probe.publish(REQUEST, {"workflow_id": held_wf, "steps": [{**move, "args": {"room": "거실"}}]})
    press = {"event_id": "press-cover", "kind": "cancel"}
    probe.publish(PUI_EVENT, {**press, "workflow_id": held_wf} if named else press)
    answer = probe.wait_for(PUI_RESULT, lambda b: b.get("event_id") == "press-cover", 10)
    if not named:
        assert (answer["status"], answer["workflow_ids"]) == ("cancelled", [running_wf])
    assert eventually(lambda: "holding inbound" in runtime.log(), 10)
    db = small_disk / "state.db"
    assert workflow_status(db, held_wf) is None  # nothing of it is on disk yet

    filler.unlink()  # space returns: the press and the request are applied, the press first
    eventually(lambda: "every held input applied" in runtime.log(), 30)
    assert eventually(lambda: workflow_status(db, held_wf) is not None, 10)
    assert workflow_status(db, held_wf) == "rejected"  # main: 'running', its move dispatched
    event = probe.wait_for(EVENTS, lambda b: b.get("workflow_id") == held_wf, 10)
    assert (event["status"], event["reason"]) == ("WORKFLOW_REJECTED", "cancelled_by_pui")
    # commands go before the events that follow them (one outbox, in order): none came
    assert [c for c in probe.messages(MOBILITY) if c.get("workflow_id") == held_wf] == []
    assert not any(t.startswith(held_wf) for t in devices.order)
    if not named:
        assert eventually(lambda: workflow_status(db, running_wf) == "cancelled", 10)
    # its id stays free: sent again after the press, it is a new request and runs
    probe.publish(REQUEST, {"workflow_id": held_wf, "steps": [{**move, "args": {"room": "거실"}}]})
    probe.wait_for(MOBILITY, lambda b: b.get("task_id") == f"{held_wf}:m", 10)
    assert runtime.terminate() == 0

"""Held inputs are applied in the order they came, deadlines included: a held cancel
confirmation that frees a resource must not fire every deadline that passed while the DB
refused writes ahead of the held callbacks that came before those deadlines. Before: the
confirmation's release ran a full tick at the current time, so another task's RUNNING, taken in
before its ack deadline and held behind the confirmation, was refused `task_terminal` and its
step ended TIMEOUT ack_timeout (found by the device simulator, tests/devicesim seeds 136, 215,
236)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edge.channel.mqtt import Inbound
from edge.channel.topics import PuiEventMsg
from tests.edge.test_app import ROOT
from tests.edge.test_door import Stage

MOVE = "wf-1:step_move"
SAY = "wf-2:step_say"
SAY_ONLY = {
    "workflow_id": "wf-2",
    "plan_id": "say",
    "steps": [
        {
            "step_id": "step_say",
            "capability_id": "speaker",
            "operation_id": "say",
            "args": {"text": "안녕"},
            "depends_on": [],
        }
    ],
    "experience": None,
}


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    stage = Stage(tmp_path)
    yield stage
    stage.refuse_writes(False)
    asyncio.run(stage.app.close())


def callback(capability: str, body: dict[str, Any], mid: int) -> Inbound:
    return Inbound(
        f"{ROOT}/task/callback/{capability}", json.dumps(body).encode(), 1, mid, 1, False
    )


def test_a_held_confirmation_does_not_time_out_a_task_that_answered_in_time(
    stage: Stage,
) -> None:
    robot = stage.robot
    robot.push()  # wf-1: the move dispatched, holding the base
    robot.callback(MOVE, 1, "RUNNING")
    robot.app.take_pui(
        PuiEventMsg(event_id="p-1", kind="cancel", workflow_id="wf-1"), robot.arrival("pui/event")
    )
    robot.push(SAY_ONLY)  # wf-2: the say dispatched; its ack deadline 5 s from now
    stage.refuse_writes(True)

    async def go() -> None:
        robot.clock.advance(1)
        confirm = {"task_id": MOVE, "seq": 2, "status": "CANCELLED"}
        running = {"task_id": SAY, "seq": 1, "status": "RUNNING", "attempt": 1}
        stage.runtime._intake.take([callback("mobility", confirm, 21)])
        stage.runtime._intake.take([callback("speaker", running, 22)])  # in time, held
        robot.clock.advance(9)  # past the say's ack deadline while the DB refuses writes
        deadline = asyncio.ensure_future(stage.runtime.take_deadline())
        await asyncio.sleep(0)
        stage.refuse_writes(False)
        stage.door.retry_now()
        await asyncio.wait_for(deadline, 5)

    asyncio.run(go())
    assert "TIMEOUT" not in robot.events(SAY)
    assert robot.events(SAY)[-1] == "RUNNING"

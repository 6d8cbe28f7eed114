"""At start, a deadline that passed while the robot was off fires only after the broker's
redelivery was taken in: an agent's answer given in time, acknowledged by nobody because the
last run held it (the DB refused writes) and then lost its power, counts. Before: the recovery
ticked at once and the step ended TIMEOUT ack_timeout, the redelivered RUNNING refused
`task_terminal` (found by the device simulator, tests/devicesim seeds 988 and 1094)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edge.channel.mqtt import Inbound
from edge.host.notify import Notifier
from edge.runtime.executor import Runtime
from tests.edge.test_app import ROOT
from tests.edge.test_door import Channel, Stage
from tests.edge.test_held_order import SAY, SAY_ONLY


class Broker(Channel):
    """The executor's channel with the broker's SUBACK as the runtime's start waits on it."""

    def __init__(self) -> None:
        super().__init__()
        self.receiving = asyncio.Event()


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    stage = Stage(tmp_path)
    yield stage
    asyncio.run(stage.app.close())


def inbound(kind: str, body: dict[str, Any], mid: int) -> Inbound:
    return Inbound(f"{ROOT}/{kind}", json.dumps(body).encode(), 1, mid, 1, False)


def test_a_redelivered_answer_given_in_time_counts_before_the_deadline_fires(
    stage: Stage,
) -> None:
    robot = stage.robot
    robot.push(SAY_ONLY)  # the say dispatched; its ack deadline 5 s from now
    asyncio.run(robot.app.close())  # the power cut: the agent's RUNNING was never taken in
    robot.clock.advance(30)  # the robot is off past the deadline
    app = robot.open(attach=False)
    broker = Broker()
    runtime = Runtime(
        app=app,
        door=app.door,
        channel=broker,  # type: ignore[arg-type]
        notifier=Notifier({}),
        settings=robot.settings,
        config_path=stage.config,
    )
    stage.app = app

    async def start() -> None:
        runtime._recover(presence_first=True)  # as the service starts
        app.attach(broker)
        rearm = asyncio.ensure_future(runtime._rearm())
        deadline = asyncio.ensure_future(runtime.take_deadline())
        await asyncio.sleep(0)  # the deadline is held until the agents' statuses were read
        broker.receiving.set()  # the broker's SUBACK; what it redelivers came first
        running = {"task_id": SAY, "seq": 1, "status": "RUNNING", "attempt": 1}
        runtime._intake.take([inbound("task/callback/speaker", running, 31)])
        status = {"state": "online", "boot_id": "speaker-1", "tasks": [SAY]}
        runtime._intake.take([inbound("agent/speaker/status", status, 32)])
        await asyncio.wait_for(rearm, 5)
        await asyncio.wait_for(deadline, 5)

    asyncio.run(start())
    events = [e["status"] for e in broker.on("workflow/event") if e["task_id"] == SAY]
    assert "TIMEOUT" not in robot.events(SAY) + events
    assert events[-1] == "RUNNING"
    assert broker.acked == [31, 32]

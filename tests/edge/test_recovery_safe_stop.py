"""A safe stop commanded while the broker is away waits in the outbox; a restart before it was
sent must still send it. Before: the start-up's recovery dropped every command row never
PUBACKed to dispatch its step again, and a safe stop is no step: it was never sent, while the
alarm said it had been commanded (found by the device simulator, tests/devicesim seed 10 at 120
steps)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from edge.channel.topics import PuiEventMsg
from tests.edge.test_app import MOVE, Robot


class Away:
    """A wire whose broker connection is down: the outbox keeps every row."""

    connection = None

    def publish(self, topic: str, payload: bytes, **_kw: Any) -> int:
        raise AssertionError(f"nothing goes out while the broker is away: {topic}")


def test_a_safe_stop_owed_at_a_power_cut_is_sent_after_the_restart(tmp_path: Path) -> None:
    robot = Robot(tmp_path)
    robot.push()
    robot.callback(MOVE, 1, "RUNNING")
    press = PuiEventMsg(event_id="p-1", kind="cancel")
    robot.app.take_pui(press, robot.arrival("pui/event"))  # the cancel goes out; no answer
    robot.app.attach(Away())
    window = robot.settings.taskmanager.cancel_confirm_s
    for _ in range(2):  # sent again, then escalated: the safe stop waits in the outbox
        robot.clock.advance(window + 1)
        robot.app.tick()
    assert robot.app.tm.alarms() == [MOVE]
    robot.app.memory.db.close()  # a power cut

    app = robot.open(attach=False)
    app.recover()
    app.attach(robot.wire)
    app.flush()
    stops = [
        body
        for topic, body in robot.wire.sent
        if topic.endswith("/task/command/mobility") and body.get("safe_stop") is True
    ]
    assert [s["task_id"] for s in stops] == [f"{MOVE}~safe_stop"]
    asyncio.run(app.close())

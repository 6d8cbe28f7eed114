"""A deadline the start-up's recovery fires makes a report that asks the supervisor; the same
recovery moves every owed report to the replay, its own too. Before: the report worker then
skipped it (no longer owed) without answering the workflow, which waited on a decision forever
(`running`, its resources held, every later workflow on them `accepted` for good). Found by the
device simulator (tests/devicesim, seed 3 at 180 steps)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.edge.test_app import Robot


def test_a_decision_asked_by_the_recovery_is_not_waited_on_forever(tmp_path: Path) -> None:
    robot = Robot(tmp_path)
    robot.push()  # wf-1: the move dispatched; its agent never answers
    robot.clock.advance(60)  # past its ack timeout while the process is gone
    robot.app.memory.db.close()  # a power cut: nothing more of that run

    async def go() -> str:
        app = robot.open()
        reporter = asyncio.create_task(app.run_reporter(app.door))
        app.recover()  # the late ack timeout fires here; its report asks for a decision
        for _ in range(200):
            await asyncio.sleep(0)
            if "wf-1" not in app.tm.active_ids():
                break
        reporter.cancel()
        status = app.memory.db.execute(
            "SELECT status FROM workflows WHERE workflow_id = 'wf-1'"
        ).fetchone()[0]
        await app.close()
        return str(status)

    assert asyncio.run(go()) == "failed"


def test_a_decision_asked_before_a_power_cut_is_not_waited_on_forever(tmp_path: Path) -> None:
    """The report asking it was queued (the cloud slow with an earlier one) when the power
    went: after the start its workflow is told no answer came (tests/devicesim seed 17)."""
    robot = Robot(tmp_path)
    robot.push()
    robot.clock.advance(60)
    robot.app.tick()  # the ack timeout: its report (asking a decision) owed, never sent
    robot.app.memory.db.close()  # a power cut before the worker sent it

    async def go() -> str:
        app = robot.open()
        reporter = asyncio.create_task(app.run_reporter(app.door))
        app.recover()
        for _ in range(200):
            await asyncio.sleep(0)
            if "wf-1" not in app.tm.active_ids():
                break
        reporter.cancel()
        status = app.memory.db.execute(
            "SELECT status FROM workflows WHERE workflow_id = 'wf-1'"
        ).fetchone()[0]
        await app.close()
        return str(status)

    assert asyncio.run(go()) == "failed"

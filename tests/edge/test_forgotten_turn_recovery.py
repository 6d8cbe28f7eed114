"""A turn whose pair a forget removed while its answer waited on the cloud is still answered,
once, whatever happens next (SPEC §2.4: every turn whose id could be read is answered; nothing
acknowledged is lost). Before: the start answered interrupted turns from their pending pairs
only, so after a forget and a crash the turn was never answered (found by the device simulator,
tests/devicesim seeds 337, 348, 483 at 3ea60b6). The forget removes the words, not the
obligation: the turn is kept by id (cache/owed.py) until something answers it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_common.clock import iso
from edge.app.device import DeviceApp
from edge.channel.topics import ForgetMsg, TurnRequestMsg
from tests.edge.test_app import Cloud, Robot

WORDS = "내일 아침 일곱시에 엄마 약 챙겨줘"


class HeldCloud(Cloud):
    """The planner holds every turn until `release` (a slow cloud the forget overtakes)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:  # type: ignore[override]
        if request.url.path == "/v1/a2a/turn":
            self.asked.set()
            await self.release.wait()
        return super().__call__(request)


def _held(tmp_path: Path) -> Robot:
    robot = Robot(tmp_path)
    asyncio.run(robot.app.close())
    robot.cloud = HeldCloud()
    robot.app = robot.open()
    return robot


def _forget(robot: Robot, scope: str) -> None:
    """The forget of the turn's pair, its session or everything, while its answer waits; or
    the retention sweep deleting the pair (past an `expire_at` its category gave it)."""
    [(pair_id, session_id)] = robot.rows("SELECT pair_id, session_id FROM pairs")
    if scope == "retention":
        past = iso(robot.clock.now() - timedelta(hours=1))
        with robot.app.unit():
            robot.app.memory.db.execute("UPDATE pairs SET expire_at = ?", [past])
            assert robot.app.memory_ops.sweep()["pairs"] == 1
        assert robot.rows("SELECT count(*) FROM pairs") == [(0,)]
        return
    target = {"pair": pair_id, "session": session_id, "all": None}[scope]
    msg = ForgetMsg(request_id=f"f-{scope}", scope=scope, id=target)
    robot.app.take_forget(msg, robot.arrival("memory/forget"))
    [result] = robot.wire.on("memory/forget/result")
    assert result["removed"]["pairs"] == 1, result
    assert robot.rows("SELECT count(*) FROM pairs") == [(0,)]


def _restart(robot: Robot) -> tuple[DeviceApp, int]:
    """The next start, as the runtime does it: recover, then the broker. The app, and how
    many turns its recovery answered."""
    app = robot.open(attach=False)
    recovered = app.recover()
    app.attach(robot.wire)
    app.flush()
    return app, recovered["interrupted_turns"]


def _answers(robot: Robot, turn_id: str) -> list[dict[str, Any]]:
    return [r for r in robot.wire.on("turn/response") if r["turn_id"] == turn_id]


def _file_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())


@pytest.mark.parametrize("scope", ["pair", "session", "all", "retention"])
def test_a_turn_forgotten_while_it_waits_on_the_cloud_is_answered_after_a_crash(
    tmp_path: Path, scope: str
) -> None:
    robot = _held(tmp_path)
    cloud: HeldCloud = robot.cloud  # type: ignore[assignment]

    async def until_the_crash() -> None:
        msg = TurnRequestMsg(turn_id="t-owed", recognized_text=WORDS)
        robot.app.take_turn(msg, robot.arrival("turn/request"))  # taken in: acknowledged
        await asyncio.wait_for(cloud.asked.wait(), 10)  # its answer waits on the cloud
        _forget(robot, scope)
        robot.app.memory.db.close()  # the process dies with the turn in flight

    asyncio.run(until_the_crash())  # the loop ends: the turn's task is cut off, unanswered
    assert _answers(robot, "t-owed") == []

    app, answered = _restart(robot)
    [answer] = _answers(robot, "t-owed")
    assert answer["status"] == "error" and answer["error"].startswith("interrupted"), answer
    assert answered == 1
    assert WORDS.encode() not in _file_bytes(tmp_path)  # the forget still holds
    asyncio.run(app.close())

    again, answered = _restart(robot)  # answered once: a later start owes it nothing more
    assert answered == 0
    assert {str(a) for a in _answers(robot, "t-owed")} == {str(answer)}  # at most its resend
    asyncio.run(again.close())


def test_a_turn_forgotten_while_it_waits_gets_the_clouds_answer_once(tmp_path: Path) -> None:
    robot = _held(tmp_path)
    cloud: HeldCloud = robot.cloud  # type: ignore[assignment]

    async def go() -> None:
        msg = TurnRequestMsg(turn_id="t-owed", recognized_text=WORDS)
        robot.app.take_turn(msg, robot.arrival("turn/request"))
        await asyncio.wait_for(cloud.asked.wait(), 10)
        _forget(robot, "pair")
        cloud.release.set()
        await asyncio.wait_for(asyncio.gather(*robot.app.turns_in_flight), 10)

    asyncio.run(go())
    [answer] = _answers(robot, "t-owed")
    assert answer["status"] == "ok" and answer["assistant_text"] == "네", answer
    robot.app.memory.db.close()  # a power cut after the answer: nothing is owed any more

    app, answered = _restart(robot)
    assert answered == 0
    assert {str(a) for a in _answers(robot, "t-owed")} == {str(answer)}  # at most its resend
    asyncio.run(app.close())

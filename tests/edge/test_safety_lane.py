"""Safety does not wait for storage (SPEC §2.4; edge/runtime/safety.py), in process: the DB refuses
writes (`PRAGMA query_only`, as a file gone read-only does), a PUI press acts at once through the
MQTT client's plain publish, and is recorded first once the DB takes writes again; the door's
front; the reserve file (edge/host/reserve.py). The real full disk is
tests/reliability/test_safety_full_disk.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from edge.channel.mqtt import Inbound
from edge.host.reserve import FLOOR_BYTES, Reserve
from edge.store.door import Door
from tests.edge.test_app import ROOT
from tests.edge.test_door import Channel, Stage

MOVE, PURIFY = "wf-1:step_move", "wf-1:step_purify"


class Direct(Channel):
    """The recording channel with the plain publish the lane uses."""

    def publish_now(self, topic: str, payload: bytes, **kw: Any) -> int | None:
        return self.publish(topic, payload, **kw)


@pytest.fixture
def stage(tmp_path: Path) -> Any:
    stage = Stage(tmp_path)
    direct = Direct()
    stage.channel = direct
    stage.runtime._channel = direct  # type: ignore[assignment]
    stage.runtime._intake._channel = direct  # type: ignore[assignment]
    yield stage
    stage.refuse_writes(False)
    asyncio.run(stage.app.close())


def inbound(kind: str, body: dict[str, Any], mid: int) -> Inbound:
    return Inbound(f"{ROOT}/{kind}", json.dumps(body).encode(), 1, mid, 1, False)


def status_of(stage: Stage, workflow_id: str) -> str:
    rows = stage.rows(f"SELECT status FROM workflows WHERE workflow_id = '{workflow_id}'")
    return str(rows[0][0])


def test_a_press_acts_at_once_and_is_recorded_first_once_the_db_takes_writes(
    stage: Stage,
) -> None:
    """Before: no cancel and no answer while the DB refused writes; then the callback held
    before the press was applied first and dispatched the next step before the cancel."""
    stage.robot.push()  # wf-1: the move dispatched, the purifier waits for it
    stage.robot.callback(MOVE, 1, "RUNNING")
    stage.refuse_writes(True)
    completed = {"task_id": MOVE, "seq": 2, "status": "COMPLETED", "evidence": None}
    press = {"event_id": "p-1", "kind": "cancel", "workflow_id": "wf-1"}

    async def go() -> None:
        stage.runtime._intake.take([inbound("task/callback", completed, 11)])
        stage.runtime._intake.take([inbound("pui/event", press, 12)])
        stage.runtime._intake.take([inbound("pui/event", {**press, "event_id": "p-2"}, 13)])
        # at once, straight to the broker, the DB untouched
        cancels = stage.channel.on("task/cancel/mobility")
        assert [(c["task_id"], c["reason"]) for c in cancels] == [(MOVE, "pui")]
        answers = stage.channel.on("pui/result")
        assert answers == [
            {"event_id": "p-1", "status": "cancelled", "workflow_ids": ["wf-1"]},
            {"event_id": "p-2", "status": "nothing_active", "workflow_ids": []},
        ]
        assert stage.channel.acked == [] and status_of(stage, "wf-1") == "running"
        stage.refuse_writes(False)
        stage.door.retry_now()
        assert status_of(stage, "wf-1") == "cancelled"
        assert sorted(stage.channel.acked) == [11, 12, 13]
        assert stage.commands(PURIFY) == []  # nothing started before the cancel
        recorded = stage.robot.wire.on("pui/result")
        assert recorded == answers  # the same answers again, from the outbox
        assert stage.app.early_answers == {}

    asyncio.run(go())


def test_a_held_cancel_retry_goes_before_every_other_held_input() -> None:
    order: list[str] = []
    door = Door(unit=lambda: _NoUnit())

    async def go() -> None:
        door.wait("deadline", lambda: order.append("deadline") is None)
        door.wait("inbound message", lambda: order.append("message") is None)
        door.wait("safety input", lambda: order.append("cancel") is None, first=True)
        door.retry_now()

    asyncio.run(go())
    assert order == ["cancel", "deadline", "message"]


class _NoUnit:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> None:
        return None


def test_the_reserve_is_given_back_on_a_full_disk_and_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free = [64 * 2**20]
    reserve = Reserve(tmp_path, 1)
    monkeypatch.setattr(reserve, "free", lambda: free[0])
    reserve.at_start()
    assert reserve.present() and reserve.line() == ""
    assert oct(reserve.path.stat().st_mode & 0o777) == "0o600"
    free[0] = FLOOR_BYTES - 1  # the disk fills
    assert reserve.release("test") and not reserve.path.exists()
    assert "reserve released" in reserve.line() or "storage full" in reserve.line()
    free[0] = 2**20 + FLOOR_BYTES  # not yet room for it and the floor twice
    assert not reserve.make() and not reserve.path.exists()
    free[0] = 2**20 + 2 * FLOOR_BYTES
    assert reserve.make() and reserve.present() and not reserve.released
    assert not Reserve(tmp_path / "none", 0).make()  # 0: no reserve


def test_on_a_full_disk_a_turn_is_answered_error_and_a_repeat_gets_its_stored_answer(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the floor a turn is answered `error` / `storage_full` at once and acknowledged (its
    writes would take the last space); a repeat of an answered turn still gets its stored
    answer (SPEC 2.4)."""
    [first] = stage.robot.say("t-before", "안녕")
    assert first["status"] == "ok"
    monkeypatch.setattr(stage.runtime._reserve, "full", lambda: True)
    again = inbound("turn/request", {"turn_id": "t-before", "recognized_text": "안녕"}, 21)
    new = inbound("turn/request", {"turn_id": "t-full", "recognized_text": "안녕"}, 22)

    async def go() -> None:
        stage.runtime._intake.take([again, new])

    asyncio.run(go())
    answers = {b["turn_id"]: b for b in stage.channel.on("turn/response")}
    assert answers["t-before"] == first
    assert (answers["t-full"]["status"], answers["t-full"]["error"]) == ("error", "storage_full")
    assert sorted(stage.channel.acked) == [21, 22]
    assert stage.rows("SELECT count(*) FROM pairs") == [(1,)]  # nothing of it written

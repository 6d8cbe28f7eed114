"""The device_context a turn forwards stays within memory.device_context_budget_bytes (issue 30,
item 14; edge/app/context_budget.py): in-process, the app with the cloud as a MockTransport."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from a2a_common import jsonx
from edge.app import turn_inputs
from edge.app.context_budget import bounded_context
from edge.channel.topics import DeviceContextMsg, TurnRequestMsg
from tests.edge.test_app import Robot

PAD = "x" * 55_000


def test_a_context_within_its_budget_goes_as_it_is() -> None:
    context = {"current_room": "안방", "battery": 40, "mode": "조용히"}
    assert bounded_context(context, 256).context == context


def test_known_keys_are_kept_the_largest_unknown_ones_go_and_no_value_is_cut() -> None:
    context = {
        "pad": PAD,
        "current_room": "안방",
        "note": "아이 방 옆, 창문 쪽",
        "battery": 40,
        "medium": "y" * 300,
        "observations": {"air": {"value": "나쁨"}, "noise": {"value": 70}},
    }
    kept = bounded_context(context, 512)
    assert len(jsonx.canonical(kept.context)) <= 512
    assert kept.context == {
        "current_room": "안방",
        "note": "아이 방 옆, 창문 쪽",  # Korean as it came: whole
        "battery": 40,
        "medium": "y" * 300,
        "observations": {"air": {"value": "나쁨"}, "noise": {"value": 70}},
    }
    assert kept.dropped == ("pad",)
    assert bounded_context(dict(reversed(context.items())), 512).context == kept.context


def test_a_known_key_out_of_its_shape_is_not_kept_first() -> None:
    kept = bounded_context({"current_room": PAD, "battery": 30}, 256)
    assert kept.context == {"battery": 30} and kept.dropped == ("current_room",)


def test_the_newest_observations_are_kept_when_they_do_not_all_fit() -> None:
    observed = {f"kind{n}": {"value": "z" * 80} for n in range(10)}  # newest first
    kept = bounded_context({"current_room": "거실", "observations": observed}, 512)
    assert len(jsonx.canonical(kept.context)) <= 512
    assert list(kept.context["observations"]) == [f"kind{n}" for n in range(4)]


def test_the_turn_request_carries_a_bounded_device_context(tmp_path: Path) -> None:
    robot = Robot(tmp_path, memory={"device_context_budget_bytes": 1024})
    retained = DeviceContextMsg.model_validate({"current_room": "안방", "battery": 50})
    robot.app.take_device_context(retained, robot.arrival("device/context"))
    context = {"pad": PAD, "battery": 45, "자리": "침대 옆"}
    [answer] = robot.say("t1", "여기 공기 어때?", device_context=context)
    assert answer["status"] == "ok"
    [sent] = [body for path, body in robot.cloud.requests if path == "/v1/a2a/turn"]
    forwarded = sent["device_context"]
    assert len(jsonx.canonical(forwarded)) <= 1024  # main: 55 KB, verbatim
    assert forwarded == {"current_room": "안방", "battery": 45, "자리": "침대 옆"}
    asyncio.run(robot.app.close())


def test_a_turn_beyond_the_waiting_ones_is_answered_busy_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_inputs, "MAX_WAITING", 2)
    robot = Robot(tmp_path)

    async def go() -> None:
        for n in range(3):
            msg = TurnRequestMsg(turn_id=f"t{n}", recognized_text="안녕")
            robot.app.take_turn(msg, robot.arrival("turn/request"))
        assert [r["turn_id"] for r in robot.wire.on("turn/response")] == ["t2"]  # before any
        await asyncio.gather(*robot.app.turns_in_flight)

    asyncio.run(go())
    answers = {r["turn_id"]: r for r in robot.wire.on("turn/response")}
    assert answers["t2"]["status"] == "rejected" and answers["t2"]["error"] == "busy"
    assert answers["t0"]["status"] == answers["t1"]["status"] == "ok"
    assert robot.rows("SELECT turn_id FROM pairs ORDER BY turn_id") == [("t0",), ("t1",)]
    assert robot.say("t2", "안녕")[-1]["status"] == "ok"  # taken once there is room: no mark
    asyncio.run(robot.app.close())

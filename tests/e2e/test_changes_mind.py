"""Issue 19 through the real process (MQTT, the sim cloud's own planner, the SQLite file) on a
simulated clock (A2A_CLOCK_OFFSET_FILE moves the runtime a day at a time): what snapshot the
planner gets each day while the user changes their mind, and what it gets under a tight budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.e2e.test_memory_cli import cli

DAY = 86400


def snapshots(cloud: SimCloud) -> list[dict[str, Any]]:
    return [r["body"]["voice_context"]["memory_snapshot"] for r in cloud.requests("/v1/a2a/turn")]


def rooms(snapshot: dict[str, Any]) -> list[Any]:
    items = snapshot["long_term"]["profile_items"]
    return [i["value"] for i in items if i["key"] == "preferred_room"]


class Days:
    def __init__(self, offset: Path) -> None:
        self.offset, self.day = offset, 0
        offset.write_text("0")

    def next(self) -> None:
        self.day += 1
        self.offset.write_text(str(self.day * DAY))


def room_status(state_rows: StateRows, value: str) -> str:
    rows = state_rows(
        "SELECT status FROM profile_items WHERE key = 'preferred_room' AND value = ?",
        [json.dumps(value, ensure_ascii=False)],
    )
    return str(rows[0][0]) if rows else ""


def test_the_planner_follows_the_user_from_anbang_to_geosil(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    """On main: days 7–13 every snapshot said 안방 while the user asked for 거실; one 안방 on day
    14 made 안방 suggestable again and on day 15 the planner proposed "안방 청정을 시작할까요?"."""
    days = Days(tmp_path / "clock-offset")
    runtime = runtime_factory(env={"A2A_CLOCK_OFFSET_FILE": str(days.offset)})
    for n in range(7):  # days 0–6: 안방, auto-confirmed on the 7th distinct day
        probe.turn(f"t-a{n}", "안방 청정해줘")
        days.next()
    eventually(lambda: room_status(state_rows, "안방") == "confirmed")
    for n in range(7):  # days 7–13: 거실 every day
        probe.turn(f"t-g{n}", "거실 청정해줘")
        days.next()
    seen = [rooms(s) for s in snapshots(cloud)[7:14]]
    assert seen[0] == ["안방"] and seen[1] == ["안방"], seen  # one contrary day contests nothing
    assert seen[2:] == [[]] * 5, seen  # contested from the 2nd 거실 day: 안방 is not sent
    eventually(lambda: room_status(state_rows, "거실") == "confirmed")
    probe.turn("t-a-again", "안방 청정해줘")  # day 14: one request for the old room
    days.next()
    assert rooms(snapshots(cloud)[-1]) == ["거실"]
    eventually(lambda: "t-a-again" in [w["payload"].get("turn_id") for w in cloud.synced()])
    reply = probe.turn("t-hi", "안녕")  # day 15
    assert "안방 청정을 시작할까요" not in reply["assistant_text"], reply
    assert room_status(state_rows, "안방") == "candidate"
    superseded = state_rows(
        "SELECT superseded_by FROM profile_items WHERE key = 'preferred_room' AND value = ?",
        [json.dumps("안방", ensure_ascii=False)],
    )
    assert superseded[0][0] is not None
    confirmed = [w for w in cloud.synced() if w["kind"] == "profile_confirmed"]
    assert confirmed[-1]["payload"]["supersedes"]["value"] == "안방"
    shown = json.loads(cli("memory", "show", "--json", "--config", str(runtime.config)))
    old = next(i for i in shown["profile_items"] if i["value"] == "안방")
    assert old["state"] == "superseded" and old["why"].startswith('superseded by "거실"'), old


def test_a_tight_budget_keeps_the_room_the_utterance_names(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    """On main, with 1,150 bytes and "거실 청정해줘", the snapshot kept favorite_song, wake_time
    and hobby = 등산 and dropped preferred_room = 거실; at 4,096 bytes it sent 등산 every turn."""
    items = [
        {"key": "favorite_song", "value": "골든", "relevance_score": 0.9},
        {"key": "wake_time", "value": "07:30", "relevance_score": 0.9},
        {"key": "hobby", "value": "등산", "relevance_score": 0.8},
        {"key": "preferred_room", "value": "거실", "relevance_score": 0.4},
    ]
    items = [i | {"status": "confirmed", "confidence": 0.9} for i in items]
    cloud.script_sync({"status": 200, "updates": {"profile_items": items}})
    runtime = runtime_factory(memory={"snapshot_budget_bytes": 1150})
    probe.turn("t-0", "안녕 오늘 날씨 정말 좋다 그치?")
    eventually(lambda: len(state_rows("SELECT key FROM profile_items")) == 4)
    for n in range(1, 6):
        probe.turn(f"t-{n}", "오늘 날씨 정말 좋다 그치? 산책 가고 싶어")
    probe.turn("t-room", "거실 청정해줘")
    keys = [i["key"] for i in snapshots(cloud)[-1]["long_term"]["profile_items"]]
    assert keys[:1] == ["preferred_room"], keys
    assert len(keys) < 4  # the budget is tight: something had to go, and not the room
    args = ("memory", "snapshot", "--json", "--for", "노래 틀어줘", "--config", str(runtime.config))
    printed = json.loads(cli(*args))["snapshot"]
    assert printed["long_term"]["profile_items"][0]["key"] == "favorite_song"

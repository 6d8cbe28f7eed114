"""`a2a-edge demo` end to end (it is the README's run command)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("broker", ["mosquitto", "embedded"])
def test_demo_plays_every_scene_and_sums_up(broker: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edge", "demo", "--json", "--broker", broker],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    scenes = [e["en"] for e in events if e["kind"] == "scene"]
    assert len(scenes) == 7 and scenes[0] == "a two-step room workflow"
    assert scenes[6] == "a vital measurement: consent at the robot"
    summary = events[-1]
    assert summary["kind"] == "summary"
    assert summary["turns"] == {"ok": 12, "offline": 2}
    assert summary["workflows"] == {"completed": 7, "cancelled": 2}
    assert summary["writes_synced"] >= 15 and summary["sync_pending"] == 0
    assert 0 < summary["snapshot_bytes"] <= 4096
    assert summary["preferred_room"] == "안방"
    replies = [e["reply"] for e in events if e["kind"] == "robot"]
    assert (replies[4]["status"], replies[4]["route_family"]) == ("offline", "")
    assert (replies[5]["status"], replies[5]["route_family"]) == ("offline", "LOCAL")
    assert replies[10]["assistant_text"].endswith("안방 청정을 시작할까요?")
    asked, agreed = replies[12], replies[13]
    assert "동의하시겠어요" in asked["assistant_text"] and asked["workflow_ids"] == []
    assert agreed["status"] == "ok" and len(agreed["workflow_ids"]) == 1
    granted = next(e for e in events if "result" in e)["result"]
    assert granted["ok"] and granted["grants"][0]["scope"] == "capability:vital_app"


def test_demo_text_timeline_is_readable() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edge", "demo"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for line in (
        "== 1. 두 단계 방 워크플로",
        "사용자 ▶ 안방으로 가서 청정해줘",
        "[PUI] 취소 버튼을 눌렀어요",
        "로봇   ◀ 알겠어요, 멈출게요.",
        "preferred_room / 선호 방           안방",
    ):
        assert line in out

"""The demo's memory scenes (issue 19, SPEC §5.4 and §5.2): the user changes their mind — 안방
was confirmed on day 6, now they ask for 거실 day after day: 안방 is contested (left out of the
snapshot), 거실 is proposed and accepted, and supersedes 안방; then relevance under a small
budget: what the utterance names is what the snapshot keeps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.demo import Demo

SMALL_BUDGET = 1000  # bytes: room for the recent pairs, the summary and one profile item


def _rooms_said(demo: Demo, day: int | None, text: str) -> None:
    if day is not None:
        demo.pass_days(day)
    reply = demo.turn(text)
    if reply["workflow_ids"]:
        demo.follow(demo.ended(reply["workflow_ids"][0]))
    room = demo.preferred_room() or "-"
    demo.say(
        "info",
        f"   스냅샷의 preferred_room: {room}",
        f"the snapshot's preferred_room: {room}",
        preferred=room,
    )


def change_of_mind(demo: Demo) -> None:
    demo.say("scene", "10. 마음이 바뀌면 기억도 바뀐다", "the user changes their mind")
    for day in (7, 8, 9):
        _rooms_said(demo, day, "거실 청정해줘")
    demo.say("wait", "   (클라우드와 동기화 중)", "syncing with the cloud")
    demo.wait(lambda: demo.status()["pending"] == 0)
    demo.pass_days(10)
    demo.turn("오늘 날씨 어때?")  # the planner proposes 거실 now
    _rooms_said(demo, None, "응, 거실 청정 시작해")
    why = _superseded(demo)
    demo.say("info", f"   안방: {why}", f"안방: {why}", why=why)


def _superseded(demo: Demo) -> str:
    from edge.config.settings import load_settings
    from edge.views.state import memory_show

    shown = memory_show(load_settings(demo.config))["profile_items"]
    old = [i for i in shown if i["key"] == "preferred_room" and i["value"] == "안방"]
    return str(old[0]["why"] or old[0]["state"]).split(" at ")[0] if old else "-"


def relevance_under_a_small_budget(demo: Demo) -> None:
    demo.say(
        "scene",
        f"11. 작은 예산({SMALL_BUDGET}바이트)에서 발화와 관련된 기억 우선",
        f"relevance under a {SMALL_BUDGET}-byte budget",
    )
    items = [
        {"key": "favorite_song", "value": "골든", "relevance_score": 0.9},
        {"key": "hobby", "value": "등산", "relevance_score": 0.8},
        {"key": "wake_time", "value": "07:30", "relevance_score": 0.8},
    ]
    confirmed = [i | {"status": "confirmed", "confidence": 0.9} for i in items]
    demo.cloud.script_sync({"status": 200, "updates": {"profile_items": confirmed}})
    demo.turn("고마워")
    demo.say("wait", "   (클라우드의 프로필 항목을 받는 중)", "the cloud's profile items arrive")
    demo.wait(lambda: _confirmed_keys(demo) >= 4)
    for text in ("노래 틀어줘", "거실 청정해줘"):
        kept = [i["key"] for i in _focused(demo, text)["long_term"]["profile_items"]]
        first = kept[0] if kept else "-"  # the rest is standing context, in turns by the minute
        demo.say(
            "info",
            f"   '{text}' → {first} 먼저 (항목 {len(kept)}개)",
            f"'{text}' keeps {first} first, {len(kept)} in all",
            kept=kept,
        )


def _confirmed_keys(demo: Demo) -> int:
    from edge.config.settings import load_settings
    from edge.views.state import memory_show

    shown = memory_show(load_settings(demo.config))["profile_items"]
    return len({i["key"] for i in shown if i["status"] == "confirmed"})


def _focused(demo: Demo, text: str) -> dict[str, Any]:
    """The snapshot a turn with `text` would send now, under the small budget."""
    from edge.config.settings import load_settings
    from edge.views.state import memory_snapshot

    settings = load_settings(demo.config)
    memory = settings.memory.model_copy(update={"snapshot_budget_bytes": SMALL_BUDGET})
    snapshot, _ = memory_snapshot(settings.model_copy(update={"memory": memory}), text)
    return snapshot

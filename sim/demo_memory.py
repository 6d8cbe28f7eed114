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
        # what the utterance names, then standing context: the items it does not name go with
        # at most half of the turns, placed by the turn's ordinal and minute (cache/relevance.py)
        # — so the line names only what the utterance names, the same in every minute, and the
        # event carries the whole list as well
        kept = [i["key"] for i in _focused(demo, text)["long_term"]["profile_items"]]
        named = [i["key"] for i in _focused(demo, text, standing=0)["long_term"]["profile_items"]]
        first = named[0] if named else "-"
        demo.say(
            "info",
            f"   '{text}' → {first} 먼저 (발화가 부르는 항목 {len(named)}개)",
            f"'{text}' keeps {first} first, {len(named)} named by it",
            kept=kept,
            named=named,
        )


def _confirmed_keys(demo: Demo) -> int:
    from edge.config.settings import load_settings
    from edge.views.state import memory_show

    shown = memory_show(load_settings(demo.config))["profile_items"]
    return len({i["key"] for i in shown if i["status"] == "confirmed"})


def _focused(demo: Demo, text: str, standing: int | None = None) -> dict[str, Any]:
    """The snapshot a turn with `text` would send now, under the small budget (`standing`: the
    standing context's size instead of the config's; 0 keeps what the utterance names only)."""
    from edge.config.settings import load_settings
    from edge.views.state import memory_snapshot

    settings = load_settings(demo.config)
    update: dict[str, int] = {"snapshot_budget_bytes": SMALL_BUDGET}
    if standing is not None:
        update["snapshot_standing_items"] = standing
    memory = settings.memory.model_copy(update=update)
    snapshot, _ = memory_snapshot(settings.model_copy(update={"memory": memory}), text)
    return snapshot


MOM, SON = ("mom", "엄마"), ("son", "아들")
GUEST = "손님"


def people_in_the_household(demo: Demo) -> None:
    """SPEC §5.7: two people whose songs differ and a guest. The cloud confirms each person's
    song (sync `updates` naming `person_id`); each asks for a song and the planner gets their
    own and the household's (골든, scene 11's), never the other's; the guest's turn is the
    household's and carries the household's only."""
    demo.say("scene", "13. 가족 두 사람과 손님", "two people of the household and a guest")
    songs = {MOM[0]: "트로트 메들리", SON[0]: "케이팝 플레이리스트"}
    items = [
        {"key": "favorite_song", "value": song, "status": "confirmed", "confidence": 0.9}
        for song in songs.values()
    ]
    demo.wait(lambda: demo.status()["pending"] == 0)  # no earlier write takes a scripted answer
    for (person, _), item in zip((MOM, SON), items, strict=True):
        update = {"person_id": person, "profile_items": [item]}
        demo.cloud.script_sync({"status": 200, "updates": update})
    demo.turn("고마워", MOM)  # its sync answer brings the scripted updates, one each: mom's
    demo.wait(lambda: demo.status()["pending"] == 0)  # synced first (sync.linger_s would put
    demo.turn("고마워", SON)  # both in one request, and only one scripted answer would come)
    demo.say(
        "wait", "   (클라우드가 각자의 노래를 확정하는 중)", "the cloud confirms each one's song"
    )
    # both people's songs, not any two (the household's 골든 and mom's were enough before, and
    # with sync.linger_s son's came after the song turns)
    demo.wait(lambda: {MOM[0], SON[0]} <= set(_songs(demo)))
    for speaker in (MOM, SON, None):
        demo.turn("노래 틀어줘", speaker, label=GUEST)
        got = _planner_songs(demo)
        shown = ", ".join(got) or "-"
        who_ko = speaker[1] if speaker else GUEST
        who_en = speaker[0] if speaker else "the guest (household)"
        demo.say(
            "info",
            f"   {who_ko}의 스냅샷: favorite_song = {shown}",
            f"{who_en}'s snapshot: favorite_song = {shown}",
            person=speaker[0] if speaker else "household",
            songs=got,
        )
    demo.wait(lambda: demo.status()["pending"] == 0)


def _songs(demo: Demo) -> list[str]:
    from edge.config.settings import load_settings
    from edge.views.state import memory_show

    shown = memory_show(load_settings(demo.config))["profile_items"]
    return [i["person_id"] for i in shown if i["key"] == "favorite_song"]


def _planner_songs(demo: Demo) -> list[str]:
    """Every favorite_song the planner got with the last turn (the speaker's own and the
    household's, SPEC 5.7), sorted."""
    body = demo.cloud.requests("/v1/a2a/turn")[-1]["body"]
    items = body["voice_context"]["memory_snapshot"]["long_term"]["profile_items"]
    return sorted(str(i["value"]) for i in items if i["key"] == "favorite_song")

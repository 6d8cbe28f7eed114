"""Issue 19 in process: memory that changes its mind (SPEC §5.4 windows, contest, supersede) and
knows what the turn is about (SPEC §5.2 relevance), on a ManualClock moved a day at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from cache.memory import Memory
from cache.model import CandidateIn
from edge.store.schema import MIGRATIONS

DAY = 86400.0


def room(value: str, kind: str = "mention") -> CandidateIn:
    return CandidateIn("preferred_room", value, "device_pattern", 0.8, kind)  # type: ignore[arg-type]


def say(memory: Memory, text: str, *cands: CandidateIn) -> list[SyncWrite]:
    """One answered turn whose planner update carried `cands`; the sync writes it owed."""
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t-{memory.now().isoformat()}-{text}", requested_session=None, text=text
        )
        memory.store.close_pair(pair_id, status="ok", now=memory.now())
        writes: list[SyncWrite] = []
        for cand in cands:
            writes += memory.profile.add_evidence(
                cand, pair_id=pair_id, session_id=session, source="cloud"
            )
    return writes


def rooms_in(snapshot: dict[str, Any]) -> list[Any]:
    items = snapshot["long_term"]["profile_items"]
    return [i["value"] for i in items if i["key"] == "preferred_room"]


def state(memory: Memory, value: str) -> dict[str, Any]:
    item = memory.profile.item("preferred_room", value)
    assert item is not None
    return item


def days_of(memory: Memory, clock: ManualClock, value: str, days: int) -> None:
    for _ in range(days):
        say(memory, f"{value} 청정해줘", room(value))
        clock.advance(DAY)


def test_a_move_to_another_room_contests_then_supersedes(
    memory: Memory, clock: ManualClock
) -> None:
    """Bullet 1: 안방 confirmed, then 거실 every day: on main every snapshot of days 7–13 still
    said 안방, and one 안방 on day 14 made it suggestable again."""
    days_of(memory, clock, "안방", 7)  # days 0-6: auto-confirmed on the 7th day
    assert state(memory, "안방")["status"] == "confirmed"
    seen = []
    for _ in range(7):
        say(memory, "거실 청정해줘", room("거실"))
        seen.append(rooms_in(memory.snapshot(None, "거실 청정해줘")))
        clock.advance(DAY)
    assert seen[0] == ["안방"]  # one contrary mention contests nothing
    assert seen[1:6] == [[]] * 5  # contested: the planner is not told 안방 any more
    assert seen[6] == ["거실"]  # confirmed on its 7th day, superseding 안방
    old, new = state(memory, "안방"), state(memory, "거실")
    assert old["superseded_by"] == new["item_id"] and new["supersedes"] == old["item_id"]
    assert old["status"] == "candidate"
    say(memory, "안방 청정해줘", room("안방"))  # day 14: one mention of the old value
    assert state(memory, "안방")["status"] == "candidate"  # not suggestable again
    assert rooms_in(memory.snapshot(None, "안방 청정해줘")) == ["거실"]


def test_one_stale_mention_never_reconfirms_a_superseded_value(
    memory: Memory, clock: ManualClock
) -> None:
    """Bullet 2: 안방 on 7 days, 거실 on 7 days, then ONE 안방: on main 안방 confirmed again."""
    days_of(memory, clock, "안방", 7)
    days_of(memory, clock, "거실", 7)
    assert state(memory, "거실")["status"] == "confirmed"
    writes = say(memory, "안방 청정해줘", room("안방"))
    assert state(memory, "안방")["status"] == "candidate"
    assert state(memory, "거실")["status"] == "confirmed"
    assert not [w for w in writes if w.kind == "profile_confirmed"]
    # fresh evidence that meets the rule again does bring it back
    clock.advance(DAY)
    days_of(memory, clock, "안방", 6)
    assert state(memory, "안방")["status"] == "confirmed"
    assert state(memory, "거실")["superseded_by"] == state(memory, "안방")["item_id"]


def test_old_mentions_fade_outside_the_window(memory: Memory, clock: ManualClock) -> None:
    for _ in range(2):
        say(memory, "서재 청정해줘", room("서재"))
        clock.advance(DAY)
    clock.advance(30 * DAY)
    say(memory, "서재 청정해줘", room("서재"))  # 3 mentions on 3 days, but two long gone
    assert state(memory, "서재")["status"] == "candidate"


def test_the_confirmation_write_names_what_it_supersedes(
    memory: Memory, clock: ManualClock
) -> None:
    days_of(memory, clock, "안방", 7)
    confirmed: list[SyncWrite] = []
    for _ in range(7):
        confirmed += [w for w in say(memory, "거실", room("거실")) if w.kind == "profile_confirmed"]
        clock.advance(DAY)
    assert len(confirmed) == 1
    assert confirmed[0].payload["supersedes"]["value"] == "안방"
    assert confirmed[0].payload["value"] == "거실"


def test_a_cloud_update_replacing_a_value_supersedes_it(memory: Memory, clock: ManualClock) -> None:
    """Bullet 3: a cloud item 소다팝 replacing 골든 left 골든 a candidate with no link."""
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": "favorite_song", "value": "골든"})
    clock.advance(DAY)
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": "favorite_song", "value": "소다팝"})
    old = memory.profile.item("favorite_song", "골든")
    new = memory.profile.item("favorite_song", "소다팝")
    assert old is not None and new is not None
    assert old["superseded_by"] == new["item_id"] and new["supersedes"] == old["item_id"]
    assert old["status"] == "candidate" and new["status"] == "confirmed"


def _standing_cache(memory: Memory) -> None:
    with memory.db.atomic():
        for key, value, rel in (
            ("favorite_song", "골든 by 헌트릭스", 0.9),
            ("wake_time", "매일 아침 7시 반에 일어남", 0.9),
            ("hobby", "등산, 주말마다 북한산", 0.8),
            ("preferred_room", "거실", 0.4),
        ):
            memory.profile.put_confirmed(
                {"key": key, "value": value, "confidence": 0.9, "relevance_score": rel}
            )
        for n in range(6):
            pair_id, _s = memory.record_utterance(
                turn_id=f"t{n}", requested_session="s", text="오늘 날씨 어때?" * 3
            )
            memory.store.close_pair(pair_id, status="ok", now=memory.now())


def test_a_tight_budget_keeps_what_the_utterance_names(memory: Memory) -> None:
    """Bullet 4a: 1,150 bytes and "거실 청정해줘": main kept song, wake time and hobby and
    dropped preferred_room = 거실."""
    _standing_cache(memory)
    memory.policy = type(memory.policy)(snapshot_budget_bytes=1150)
    snapshot = memory.snapshot("s", "거실 청정해줘", {"current_room": "주방"})
    keys = [i["key"] for i in snapshot["long_term"]["profile_items"]]
    assert keys and keys[0] == "preferred_room", keys
    assert len(json.dumps(snapshot, separators=(",", ":"), ensure_ascii=False).encode()) <= 1150


def test_an_unmatched_item_does_not_go_with_every_turn(memory: Memory, clock: ManualClock) -> None:
    """Bullet 4b: at 4,096 bytes main sent the same items for every utterance, 등산 included."""
    _standing_cache(memory)
    texts = ["거실 청정해줘", "노래 틀어줘", "내일 몇 시에 깨워줄래", "안녕"]
    sent = []
    for minute in range(12):
        text = texts[minute % len(texts)]
        items = memory.snapshot("s", text)["long_term"]["profile_items"]
        sent.append([i["key"] for i in items])
        clock.advance(60)
    assert sent[0][0] == "preferred_room" and sent[1][0] == "favorite_song"
    assert sent[2][0] == "wake_time"
    hobby = sum("hobby" in keys for keys in sent)
    assert 0 < hobby < len(sent), sent  # standing context sometimes, not every turn
    assert all(len(keys) <= 1 + memory.policy.standing_items for keys in sent)
    assert memory.snapshot("s", "주말에 등산 갈까")["long_term"]["profile_items"][0]["key"] == (
        "hobby"
    )


def test_the_same_cache_clock_and_utterance_give_the_same_bytes(memory: Memory) -> None:
    _standing_cache(memory)
    first = json.dumps(memory.snapshot("s", "거실 청정해줘"), ensure_ascii=False)
    assert json.dumps(memory.snapshot("s", "거실 청정해줘"), ensure_ascii=False) == first


def test_the_migration_dates_the_confirmations_it_finds(tmp_path: Path) -> None:
    """`cache_0005_memory_windows` on a DB of schema v13: confirmed items count as confirmed
    at their last update; nothing is contested or superseded."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS[:13])
    db.execute(
        "INSERT INTO profile_items (item_id, key, value, status, created_at, updated_at)"
        " VALUES ('p1', 'preferred_room', '\"안방\"', 'confirmed', 'T0', 'T1'),"
        " ('p2', 'preferred_room', '\"거실\"', 'candidate', 'T0', 'T2')"
    )
    db.conn.commit()
    db.close()
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    rows = db.execute(
        "SELECT item_id, confirmed_at, contested_by, superseded_by FROM profile_items"
        " ORDER BY item_id"
    ).fetchall()
    db.close()
    assert rows == [("p1", "T1", None, None), ("p2", None, None, None)]

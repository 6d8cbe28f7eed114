"""SPEC §5.4 promotion: the seed's day 1–6 scenario under freezegun, and the negative cases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from freezegun import freeze_time

from a2a_common.clock import SystemClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn, Evidence, PromotionPolicy
from cache.promotion import StepOutcome, next_status, observed_candidates
from edge.store.schema import MIGRATIONS

ROOM = CandidateIn("preferred_room", "안방", "device_pattern", 0.7)
ACCEPT = CandidateIn("preferred_room", "안방", "device_pattern", 0.9, "suggestion_accepted")


@pytest.fixture
def live_memory(tmp_path: Path) -> Iterator[Memory]:
    """A cache on the real clock, which freezegun moves."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield Memory(db=db, clock=SystemClock(), policy=MemoryPolicy())
    db.close()


WRITES: list[str] = []


def turn(memory: Memory, when: str, text: str, cand: CandidateIn) -> str:
    """One turn at `when` whose planner update carried `cand`; the sync writes it owed are
    appended to WRITES by kind."""
    with freeze_time(when), memory.db.atomic():
        pair_id, session = memory.record_utterance(turn_id=when, requested_session=None, text=text)
        memory.store.close_pair(pair_id, status="ok", now=memory.now())
        writes = memory.profile.add_evidence(
            cand, pair_id=pair_id, session_id=session, source="cloud"
        )
    WRITES.extend(w.kind for w in writes)
    return pair_id


def preferred(memory: Memory, when: str) -> list[object]:
    with freeze_time(when):
        items = memory.snapshot(None)["long_term"]["profile_items"]
    return [i["value"] for i in items if i["key"] == "preferred_room"]


def status(memory: Memory) -> str:
    item = memory.profile.item("preferred_room", "안방")
    assert item is not None
    return str(item["status"])


def test_seed_scenario_days_1_to_6(live_memory: Memory) -> None:
    m = live_memory
    WRITES.clear()
    day1 = turn(m, "2026-06-01T11:00:00Z", "안방 청정해줘", ROOM)  # 20:00 in Seoul
    assert preferred(m, "2026-06-01T12:00:00Z") == []
    day2 = turn(m, "2026-06-02T11:00:00Z", "안방 좀 깨끗하게 해줘", ROOM)
    assert status(m) == "candidate"
    day4 = turn(m, "2026-06-04T13:00:00Z", "잘 때는 안방 먼저 청정해", ROOM)
    assert status(m) == "suggestable"  # 3 mentions on 3 days: the cloud may now suggest
    assert preferred(m, "2026-06-05T11:00:00Z") == []  # suggestable is not confirmed
    day6 = turn(m, "2026-06-06T11:00:00Z", "응, 안방 청정 시작해", ACCEPT)
    assert status(m) == "confirmed"
    assert preferred(m, "2026-06-06T12:00:00Z") == ["안방"]
    item = m.profile.item("preferred_room", "안방")
    assert item is not None
    assert json.loads(item["source_pair_ids"]) == [day1, day2, day4, day6]
    assert len(json.loads(item["source_candidate_ids"])) == 4
    assert len(json.loads(item["source_session_ids"])) >= 1
    # every change of evidence is queued for the cloud, and the confirmation once
    assert WRITES == ["profile_candidate"] * 4 + ["profile_confirmed"]


def test_one_mention_never_confirms(live_memory: Memory) -> None:
    turn(live_memory, "2026-06-01T11:00:00Z", "안방 청정해줘", ROOM)
    assert status(live_memory) == "candidate"
    assert preferred(live_memory, "2026-06-01T12:00:00Z") == []


def test_acceptance_before_suggestable_does_not_confirm(live_memory: Memory) -> None:
    m = live_memory
    turn(m, "2026-06-01T11:00:00Z", "안방 청정해줘", ROOM)
    turn(m, "2026-06-02T11:00:00Z", "안방 청정해줘", ROOM)
    turn(m, "2026-06-03T11:00:00Z", "응 안방", ACCEPT)  # arrives while still a candidate
    assert status(m) == "suggestable"
    assert preferred(m, "2026-06-03T12:00:00Z") == []
    turn(m, "2026-06-05T11:00:00Z", "응 안방 해줘", ACCEPT)  # now it is suggestable
    assert status(m) == "confirmed"


def test_the_same_turn_counted_once(live_memory: Memory) -> None:
    m = live_memory
    pair = turn(m, "2026-06-01T11:00:00Z", "안방 청정해줘", ROOM)
    with freeze_time("2026-06-01T11:00:01Z"), m.db.atomic():
        session = m.db.execute("SELECT session_id FROM pairs WHERE pair_id = ?", [pair]).fetchone()[
            0
        ]
        again = m.profile.add_evidence(ROOM, pair_id=pair, session_id=session, source="device")
    assert again == []  # nothing changed, nothing to sync
    item = m.profile.item("preferred_room", "안방")
    assert item is not None
    assert len(m.profile.evidence(item["item_id"])) == 1


def test_auto_confirm_after_seven_distinct_days(live_memory: Memory) -> None:
    for day in range(1, 8):
        turn(live_memory, f"2026-06-{day:02d}T11:00:00Z", "안방 청정해줘", ROOM)
        assert (status(live_memory) == "confirmed") is (day == 7)


def test_a_new_confirmed_value_demotes_the_old_one(live_memory: Memory) -> None:
    m = live_memory
    with freeze_time("2026-06-01T11:00:00Z"), m.db.atomic():
        m.profile.put_confirmed({"key": "preferred_room", "value": "거실"})
    for day in range(1, 8):
        turn(m, f"2026-06-{day:02d}T11:00:00Z", "안방 청정해줘", ROOM)
    assert preferred(m, "2026-06-08T00:00:00Z") == ["안방"]
    old = m.profile.item("preferred_room", "거실")
    assert old is not None and old["status"] == "candidate"


def test_local_days_follow_the_configured_zone() -> None:
    policy = PromotionPolicy()
    same_local_day = [
        Evidence("c1", "p1", "s", "2026-06-01", "mention"),
        Evidence("c2", "p2", "s", "2026-06-01", "mention"),
        Evidence("c3", "p3", "s", "2026-06-01", "mention"),
    ]
    days = len({e.day for e in same_local_day})
    assert days == 1
    after = (len(same_local_day), days)
    assert next_status("candidate", (2, 1), after, "mention", policy) == "candidate"


def test_device_observation_is_a_mention_of_the_room() -> None:
    steps = [
        StepOutcome("mobility", "move_to_room", "COMPLETED", {"room": "안방"}),
        StepOutcome("air_purifier", "start", "COMPLETED", {"mode": "auto"}),
    ]
    assert observed_candidates(steps) == [CandidateIn("preferred_room", "안방", "device_pattern")]
    failed = [steps[0], StepOutcome("air_purifier", "start", "FAILED", {})]
    assert observed_candidates(failed) == []
    no_move = [StepOutcome("air_purifier", "start", "COMPLETED", {})]
    assert observed_candidates(no_move) == []

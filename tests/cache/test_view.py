"""What the snapshot may read: filters and bounds, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.privacy import PrivacyPolicy
from edge.store.schema import MIGRATIONS


def put_item(memory: Memory, key: str, value: str, **fields: object) -> None:
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": key, "value": value, **fields})


def keys(memory: Memory) -> list[str]:
    return [i["key"] for i in memory.snapshot(None)["long_term"]["profile_items"]]


def test_only_live_confirmed_consented_items(memory: Memory, clock: ManualClock) -> None:
    put_item(memory, "preferred_room", "거실", relevance_score=0.9)
    put_item(memory, "wake_time", "07:00", relevance_score=0.4)
    put_item(memory, "old_habit", "x", expire_at="2026-06-24T19:00:00.000Z")  # already past
    put_item(memory, "blood_pressure", "high", category="health")  # sensitive by default
    with memory.db.atomic():
        memory.db.execute("UPDATE profile_items SET status = 'revoked' WHERE key = 'wake_time'")
        memory.profile.put_confirmed({"key": "nap", "value": "yes", "relevance_score": 0.1})
        memory.db.execute("UPDATE profile_items SET status = 'suggestable' WHERE key = 'nap'")
    assert keys(memory) == ["preferred_room"]


def test_sensitive_category_with_consent(tmp_path: Path, clock: ManualClock) -> None:
    db = open_state_db(tmp_path / "c.db", MIGRATIONS)
    memory = Memory(
        db=db,
        clock=clock,
        policy=MemoryPolicy(privacy=PrivacyPolicy(consented=frozenset({"health"}))),
    )
    put_item(memory, "blood_pressure", "high", category="health", relevance_score=0.2)
    put_item(memory, "address", "…", category="contact", relevance_score=0.9)
    assert keys(memory) == ["blood_pressure"]
    db.close()


def test_categories_compare_case_insensitively(tmp_path: Path, clock: ManualClock) -> None:
    db = open_state_db(tmp_path / "c.db", MIGRATIONS)
    policy = PrivacyPolicy(
        sensitive=frozenset({"Health", "contact"}), consented=frozenset({"HEALTH"})
    )
    assert policy.is_sensitive("health") and policy.is_sensitive(" Contact ")
    assert not policy.shared("CONTACT") and policy.of("Health").store == "days:30"
    memory = Memory(db=db, clock=clock, policy=MemoryPolicy(privacy=policy))
    put_item(memory, "blood_pressure", "high", category="Health")
    put_item(memory, "address", "…", category="Contact")
    with db.atomic():  # a row written before names were normalised, flagged not sensitive
        db.execute(
            "INSERT INTO profile_items (item_id, key, value, category, status, sensitive,"
            " created_at, updated_at) VALUES ('old', 'phone', '\"010\"', 'CONTACT', 'confirmed',"
            " 0, '2026-06-01T00:00:00.000Z', '2026-06-01T00:00:00.000Z')"
        )
    rows = db.execute("SELECT key, category, sensitive FROM profile_items ORDER BY key").fetchall()
    assert rows == [
        ("address", "contact", 1),
        ("blood_pressure", "health", 1),
        ("phone", "CONTACT", 0),
    ]
    assert keys(memory) == ["blood_pressure"]  # consented (in any case); contact never
    db.close()


def test_profile_items_by_relevance(memory: Memory) -> None:
    put_item(memory, "b", "1", relevance_score=0.2)
    put_item(memory, "a", "1", relevance_score=0.9)
    put_item(memory, "c", "1", relevance_score=0.9)
    assert keys(memory) == ["a", "c", "b"]


def test_expired_and_pending_pairs_left_out(memory: Memory, clock: ManualClock) -> None:
    with memory.db.atomic():
        old, _ = memory.record_utterance(turn_id="1", requested_session="s", text="오래된 말")
        memory.store.close_pair(old, status="ok", now=clock.now())
        memory.db.execute(
            "UPDATE pairs SET expire_at = ? WHERE pair_id = ?", ["2026-06-24T19:59:59.000Z", old]
        )
        memory.record_utterance(turn_id="2", requested_session="s", text="대답 기다리는 중")
        kept, _ = memory.record_utterance(turn_id="3", requested_session="s", text="남는 말")
        memory.store.close_pair(kept, status="offline", now=clock.now())
    pairs = memory.snapshot("s")["short_term"]["recent_pairs"]
    assert pairs == [{"user": "남는 말", "assistant": ""}]


def test_mid_term_newest_first_and_expired_out(memory: Memory) -> None:
    with memory.db.atomic():
        for day in range(1, 10):
            memory.tiers.put_daily(f"2026-06-{day:02d}", f"day {day}")
        memory.tiers.put_daily("2026-06-10", "expired", expire_at="2026-06-01T00:00:00.000Z")
        memory.tiers.put_weekly("2026-W22", "old digest")
        memory.tiers.put_weekly("2026-W23", "new digest")
        memory.tiers.put_daily("2026-06-09", "day 9 replaced")
    mid = memory.snapshot(None)["mid_term"]
    assert [d["day"] for d in mid["daily_summaries"]] == [
        f"2026-06-{d:02d}" for d in range(9, 2, -1)
    ]
    assert mid["daily_summaries"][0]["summary"] == "day 9 replaced"
    assert mid["weekly_digest"] == "new digest"


def test_cloud_updates_apply_per_tier(memory: Memory) -> None:
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": "old_key", "value": 1})
        counts = memory.tiers.apply_updates(
            {
                "daily_summaries": [
                    {
                        "day": "2026-06-24",
                        "summary": "저녁에 청정을 자주 요청",
                    }
                ],
                "weekly_digest": {
                    "week": "2026-W26",
                    "digest": "저녁에 청정을 자주 요청",
                    "source_summary_ids": ["daily-2026-06-24"],
                },
                "profile_items": [
                    {
                        "key": "preferred_room",
                        "value": "거실",
                        "category": "device_pattern",
                        "confidence": 0.83,
                        "status": "confirmed",
                        # sources the device does not hold, no one named: refused (cache.owner)
                        "source_pair_ids": ["pair-1"],
                    },
                    {
                        "key": "preferred_room",
                        "value": "거실",
                        "category": "device_pattern",
                        "confidence": 0.83,
                        "status": "confirmed",
                    },
                ],
                "deleted_profile_keys": ["old_key"],
            }
        )
    assert counts == {
        "daily_summaries": 1,
        "weekly_digest": 1,
        "profile_items": 1,
        "deleted": 1,
        "refused": 1,
    }
    snap = memory.snapshot(None)
    assert snap["long_term"]["profile_items"] == [
        {"key": "preferred_room", "value": "거실", "category": "device_pattern", "confidence": 0.83}
    ]
    assert snap["mid_term"]["weekly_digest"] == "저녁에 청정을 자주 요청"

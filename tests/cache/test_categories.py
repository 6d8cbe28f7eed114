"""Categories on every tier (SPEC §5.5): lexicon, cloud, provenance both ways; one policy on
what is written, what the snapshot reads and what sync carries; forgetting along the chain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.jsonx import canonical
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.privacy import CategoryPolicy, PrivacyPolicy
from cache.update import UpdateChanges
from edge.store.schema import MIGRATIONS

SESSION = "session-1"
HEALTH = CandidateIn("condition", "고혈압", "health")


@pytest.fixture
def make(tmp_path: Path, clock: ManualClock) -> Iterator[Any]:
    dbs = []

    def build(**privacy: Any) -> Memory:
        db = open_state_db(tmp_path / f"m{len(dbs)}.db", MIGRATIONS)
        dbs.append(db)
        return Memory(db=db, clock=clock, policy=MemoryPolicy(privacy=PrivacyPolicy(**privacy)))

    yield build
    for db in dbs:
        db.close()


def turn(memory: Memory, text: str, **changes: Any) -> tuple[str, list[SyncWrite]]:
    fields: dict[str, Any] = {
        "assistant_text": "네",
        "route_family": "CHAT",
        "workflow_id": "",
        "last_route": None,
        "session_summary": None,
        "active_workflow_id": None,
        "sync": None,
    }
    fields.update(changes)
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t-{text}", requested_session=SESSION, text=text
        )
        writes = memory.apply_turn(pair_id, session, UpdateChanges(**fields))
    return pair_id, writes


def text_of(memory: Memory) -> str:
    return canonical(memory.snapshot(SESSION)).decode()


def test_a_health_utterance_stays_out_of_every_tier_of_the_snapshot(make: Any) -> None:
    memory = make()
    _, writes = turn(
        memory, "나 고혈압이 있어서 약 먹고 있어", session_summary="사용자는 고혈압 약을 복용 중"
    )
    with memory.db.atomic():
        memory.tiers.apply_updates(
            {"daily_summaries": [{"day": "2026-06-24", "summary": "혈압약 복용을 두 번 언급"}]}
        )
    turn(memory, "거실 청정해줘")
    snapshot = text_of(memory)
    assert "혈압" not in snapshot and "복용" not in snapshot
    assert "거실 청정해줘" in snapshot
    assert writes == []  # the pair is not queued for sync
    row = memory.db.execute("SELECT categories, sensitive, expire_at FROM pairs").fetchone()
    assert json.loads(row[0]) == ["health"] and row[1] == 1 and row[2] is not None


def test_with_consent_the_sensitive_texts_come_back(make: Any) -> None:
    memory = make(consented=frozenset({"health"}))
    _, writes = turn(memory, "나 고혈압이 있어서 약 먹고 있어")
    assert "고혈압" in text_of(memory)
    assert writes == []  # consent opens the snapshot, never the cloud's long-term sync


def test_explicit_share_false_holds_even_with_consent(make: Any) -> None:
    memory = make(
        consented=frozenset({"health"}),
        categories={"health": CategoryPolicy("days:30", share=False)},
    )
    turn(memory, "혈압 재줘")
    assert "혈압" not in text_of(memory)


def test_a_pair_that_sourced_a_sensitive_candidate_becomes_sensitive(make: Any) -> None:
    memory = make()
    turn(memory, "거실 청정해줘")
    _, writes = turn(
        memory,
        "나 그거 매일 먹어",  # nothing the lexicon knows
        session_summary="사용자가 매일 챙기는 것이 있음",
        profile_candidates=(HEALTH,),
    )
    assert [w.kind for w in writes] == []  # neither the pair nor the health candidate
    with memory.db.atomic():
        memory.tiers.apply_updates(
            {
                "daily_summaries": [
                    {"day": "2026-06-24", "summary": "매일 챙김", "source_session_ids": [SESSION]}
                ],
                "weekly_digest": {
                    "week": "2026-W26",
                    "digest": "꾸준함",
                    "source_summary_ids": ["daily-2026-06-24"],
                },
            }
        )
    snapshot = memory.snapshot(SESSION)
    assert [p["user"] for p in snapshot["short_term"]["recent_pairs"]] == ["거실 청정해줘"]
    assert snapshot["short_term"]["session_summary"] == ""  # no hole through the summary
    assert snapshot["mid_term"]["daily_summaries"] == []
    assert snapshot["mid_term"]["weekly_digest"] == ""


def test_a_cloud_item_relabels_its_source_pairs_retroactively(make: Any) -> None:
    memory = make()
    pair_id, writes = turn(memory, "문 열 때 그 숫자 누르면 돼")
    assert [w.kind for w in writes] == ["short_term_pair"]  # not known as sensitive yet
    with memory.db.atomic():
        memory.tiers.apply_updates(
            {
                "profile_items": [
                    {
                        "key": "door_code",
                        "value": "4321",
                        "category": "home_layout",
                        "source_pair_ids": [pair_id],
                    }
                ]
            }
        )
    assert "숫자" not in text_of(memory)
    assert memory.labels.of_pair(pair_id) == ["home_layout"]


def test_the_cloud_category_of_a_pair_is_taken(make: Any) -> None:
    memory = make()
    _, writes = turn(memory, "그거 알려줘", pair_category="Contact")
    assert writes == [] and "그거" not in text_of(memory)


def test_sensitive_cloud_confirmed_items_expire_within_30_days(
    make: Any, clock: ManualClock
) -> None:
    memory = make(consented=frozenset({"home_layout"}))
    with memory.db.atomic():
        memory.tiers.apply_updates(
            {"profile_items": [{"key": "door_code", "value": "4321", "category": "home_layout"}]}
        )
        memory.tiers.apply_updates(  # an item with no category the lexicon classifies
            {"profile_items": [{"key": "blood_pressure_med", "value": "아침 복용"}]}
        )
    row = memory.db.execute(
        "SELECT expire_at FROM profile_items WHERE key = 'door_code'"
    ).fetchone()
    assert row[0] is not None
    assert memory.profile.items("blood_pressure_med")[0]["category"] == "health"
    assert "door_code" in text_of(memory)
    clock.advance(timedelta(days=31).total_seconds())
    assert "door_code" not in text_of(memory)
    with memory.db.atomic():
        memory.sweeper.sweep_batch(memory.now(), None)
    assert memory.profile.items("door_code") == []


def test_store_never_keeps_no_words(make: Any) -> None:
    memory = make(categories={"health": CategoryPolicy("never", share=False)})
    turn(memory, "고혈압 약 먹었어", session_summary="고혈압 약")
    row = memory.db.execute("SELECT user_text, assistant_text FROM pairs").fetchone()
    assert row == ("", "")
    summary = memory.db.execute("SELECT summary FROM sessions").fetchone()[0]
    assert summary == ""
    with memory.db.atomic():
        counts = memory.tiers.apply_updates(
            {"daily_summaries": [{"day": "2026-06-24", "summary": "혈압약"}]}
        )
    assert counts["daily_summaries"] == 0


def test_forgetting_a_key_forgets_its_source_pairs_and_what_only_they_made(make: Any) -> None:
    memory = make()
    pair_id, _ = turn(
        memory,
        "나 고혈압이 있어",
        session_summary="고혈압 언급",
        profile_candidates=(HEALTH,),
    )
    with memory.db.atomic():
        memory.tiers.put_daily("2026-06-24", "혈압 이야기", source_session_ids=[SESSION])
        memory.tiers.put_weekly("2026-W26", "건강", source_summary_ids=["daily-2026-06-24"])
        gone = memory.forgetter.forget("profile_key", "condition")
    assert gone.pairs == [pair_id]
    assert sorted(gone.summary_ids) == ["daily-2026-06-24", "weekly-2026-W26"]
    dump = "".join(memory.db.conn.iterdump())
    assert "고혈압" not in dump and "혈압" not in dump
    tomb = gone.tombstone().payload
    assert tomb["pair_ids"] == [pair_id] and tomb["with_sources"] is True


def test_forgetting_a_key_without_sources_keeps_the_pairs(make: Any) -> None:
    memory = make()
    pair_id, _ = turn(
        memory,
        "나 고혈압이 있어",
        profile_candidates=(HEALTH,),
    )
    with memory.db.atomic():
        gone = memory.forgetter.forget("profile_key", "condition", with_sources=False)
    assert gone.pairs == [] and memory.store.has_pair(pair_id)
    assert memory.profile.items("condition") == []
    assert gone.tombstone().payload["with_sources"] is False


def test_a_daily_summary_with_a_live_source_is_kept(make: Any) -> None:
    memory = make()
    turn(memory, "거실 청정해줘")
    turn(
        memory,
        "나 고혈압이 있어",
        profile_candidates=(HEALTH,),
    )
    with memory.db.atomic():
        memory.tiers.put_daily("2026-06-24", "청정 요청", source_session_ids=[SESSION])
        memory.forgetter.forget("profile_key", "condition")
    assert memory.db.execute("SELECT count(*) FROM daily_summaries").fetchone()[0] == 1


def test_the_migration_labels_what_an_older_db_holds(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = open_state_db(path, MIGRATIONS[:11])
    with old.atomic():
        old.execute(
            "INSERT INTO sessions (session_id, started_at, last_turn_at, summary)"
            " VALUES ('s', 'x', 'x', '오늘 이야기')"
        )
        old.execute(
            "INSERT INTO pairs (pair_id, turn_id, session_id, user_text, status, created_at)"
            " VALUES ('p', 't', 's', '고혈압 약 먹었어', 'ok', '2026-06-24T20:00:00.000Z')"
        )
        old.execute(
            "INSERT INTO profile_items (item_id, key, value, category, status, sensitive,"
            " created_at, updated_at) VALUES ('i', 'door', '\"4321\"', 'home_layout',"
            " 'confirmed', 1, 'x', '2026-06-24T20:00:00.000Z')"
        )
    old.close()
    db = open_state_db(path, MIGRATIONS)
    row = db.execute("SELECT categories, sensitive, expire_at FROM pairs").fetchone()
    assert row == ('["health"]', 1, "2026-07-24T20:00:00.000Z")
    summary = db.execute("SELECT summary_categories, summary_sensitive FROM sessions").fetchone()
    assert summary == ('["health"]', 1)  # the union of its pairs' categories
    row = db.execute("SELECT expire_at, categories FROM profile_items").fetchone()
    assert row == ("2026-07-24T20:00:00.000Z", '["home_layout"]')
    db.close()


def test_the_cloud_names_categories_where_the_contract_carries_them() -> None:
    from cloud_client.models import SyncUpdates, TurnResponse
    from edge.app.turns import update_input_of

    response = TurnResponse.model_validate(
        {
            "request_id": "r",
            "route_family": "CHAT",
            "assistant_text": "네",
            "memory_update": {
                "write_candidates": {"short_term_pair": {"category": " Health "}},
                "device_cache_update": {"session_summary": "요약", "session_summary_category": ""},
            },
        }
    )
    update = update_input_of(response)
    assert update.pair_category == "health" and update.session_summary_category is None
    updates = SyncUpdates.model_validate(
        {
            "daily_summaries": [{"day": "2026-06-24", "summary": "s", "category": "Vital"}],
            "weekly_digest": {"week": "2026-W26", "digest": "d", "category": "contact"},
        }
    ).model_dump(mode="json")
    assert updates["daily_summaries"][0]["category"] == "vital"
    assert updates["weekly_digest"]["category"] == "contact"

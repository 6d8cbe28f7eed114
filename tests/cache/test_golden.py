"""The seed's three JSON examples as golden vectors, through a real SQLite cache."""

from __future__ import annotations

import json

from cache.memory import Memory
from cache.model import SyncPosition
from cache.update import UpdateChanges, plan_update
from cloud_client.models import MemorySnapshot, TurnResponse
from edge.app.turns import update_input_of
from sim.memory import normalize_memory_context
from tests.conftest import fixture_json

SEED_SESSION = "memory-session"


def load_seed_input(memory: Memory) -> None:
    """The cache state the seed's input example was taken from."""
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id="seed-0", requested_session=SEED_SESSION, text="거실 청정해줘"
        )
        memory.store.apply_changes(
            pair_id,
            session,
            UpdateChanges(
                assistant_text="시작할게요",
                route_family=None,
                workflow_id="",
                last_route=None,
                session_summary="오늘 거실 청정을 자주 요청함",
                active_workflow_id=None,
                sync=SyncPosition("cur-2", "v2"),
            ),
            memory.now(),
        )
        memory.tiers.put_daily("2026-06-24", "저녁에 청정을 자주 요청")
        memory.tiers.put_weekly("2026-W26", "저녁에 청정을 자주 요청")
        memory.profile.put_confirmed({"key": "preferred_room", "value": "거실"})


def test_seed_input_example_comes_out_field_for_field(memory: Memory) -> None:
    load_seed_input(memory)
    expected = fixture_json("seed_turn_input.json")["voice_context"]["memory_snapshot"]
    snapshot = memory.snapshot(SEED_SESSION)
    assert snapshot == expected
    MemorySnapshot.model_validate(snapshot)


def test_normalizing_gives_the_seed_normalized_output(memory: Memory) -> None:
    load_seed_input(memory)
    normalized = normalize_memory_context(memory.snapshot(SEED_SESSION))
    assert normalized == fixture_json("seed_normalized_memory_context.json")
    assert list(normalized)[:3] == ["contract_version", "source", "current_turn_priority"]


def test_applying_the_seed_update_output(memory: Memory) -> None:
    load_seed_input(memory)
    update = fixture_json("seed_memory_update_output.json")
    reply = "거실 청정을 자주 하시는군요. 기억해 둘게요."
    response = TurnResponse.model_validate(
        {"request_id": "r", "route_family": "DEF", "assistant_text": reply, "memory_update": update}
    )
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id="seed-1", requested_session=SEED_SESSION, text="나는 거실을 자주 청정해"
        )
        changes = plan_update(update_input_of(response), memory.sync_position(), frozenset())
        writes = memory.apply_turn(pair_id, session, changes)

    row = memory.db.execute(
        "SELECT user_text, assistant_text, route_family, workflow_id, status FROM pairs"
        " WHERE pair_id = ?",
        [pair_id],
    ).fetchone()
    assert row == ("나는 거실을 자주 청정해", reply, "DEF", "", "ok")  # assistant_text filled
    assert memory.state("last_route") == "DEF"
    assert memory.state("active_workflow_id") is None  # "" names no accepted workflow
    snapshot = memory.snapshot(SEED_SESSION)
    assert snapshot["short_term"]["session_summary"] == "오늘 거실 청정을 자주 요청함"  # kept
    assert snapshot["sync"] == {"cursor": "cur-2", "version": "v2"}
    assert [p["user"] for p in snapshot["short_term"]["recent_pairs"]] == [
        "거실 청정해줘",
        "나는 거실을 자주 청정해",
    ]
    assert [w.kind for w in writes] == ["short_term_pair"]  # profile_candidates: []
    assert writes[0].payload["assistant_text"] == reply
    json.dumps(writes[0].payload, ensure_ascii=False)

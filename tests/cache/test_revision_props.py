"""Properties of memory that changes its mind (SPEC §5.4) and of the focused snapshot (§5.2):
for any sequence of dated mentions, acceptances, cloud updates and forgets, nothing is confirmed
from one utterance, a key never holds two confirmed values, a contested value is never shown;
for any cache and utterance the snapshot is valid, in budget and byte-identical, and an item the
utterance names exactly is in it whenever it would fit alone."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_common.clock import ManualClock
from a2a_common.jsonx import canonical
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.snapshot import build_snapshot
from cloud_client.models import MemorySnapshot
from edge.store.schema import MIGRATIONS
from tests.examples import examples

ROOMS = ["안방", "거실", "서재"]
step_s = st.one_of(
    st.tuples(st.just("mention"), st.sampled_from(ROOMS), st.integers(0, 3)),
    st.tuples(st.just("accept"), st.sampled_from(ROOMS), st.integers(0, 3)),
    st.tuples(st.just("cloud"), st.sampled_from(ROOMS), st.integers(0, 3)),
    st.tuples(st.just("forget"), st.sampled_from(ROOMS), st.integers(0, 3)),
)


def _fresh(tmp: str) -> tuple[Memory, ManualClock]:
    db = open_state_db(Path(tmp) / "state.db", MIGRATIONS, synchronous="NORMAL")
    clock = ManualClock()
    return Memory(db=db, clock=clock, policy=MemoryPolicy()), clock


def _step(memory: Memory, n: int, action: str, value: str) -> None:
    with memory.db.atomic():
        if action == "cloud":
            memory.profile.put_confirmed({"key": "preferred_room", "value": value})
            return
        if action == "forget":
            memory.forgetter.forget("profile_key", "preferred_room")
            return
        pair_id, session = memory.record_utterance(
            turn_id=f"t{n}", requested_session=None, text=f"{value} 청정해줘"
        )
        kind = "suggestion_accepted" if action == "accept" else "mention"
        cand = CandidateIn("preferred_room", value, "device_pattern", 0.7, kind)  # type: ignore[arg-type]
        before = memory.profile.item("preferred_room", value)
        memory.profile.add_evidence(cand, pair_id=pair_id, session_id=session, source="cloud")
        after = memory.profile.item("preferred_room", value)
        assert after is not None
        if after["status"] == "confirmed" and (before is None or before["status"] != "confirmed"):
            fresh = memory.db.execute(
                "SELECT count(*) FROM profile_evidence WHERE item_id = ? AND created_at > ?",
                [after["item_id"], (before or {}).get("superseded_at") or ""],
            ).fetchone()[0]
            assert fresh >= 2, "confirmed from one utterance"


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step_s, max_size=30))
def test_changing_minds_keeps_the_rules(steps: list[tuple[str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory, clock = _fresh(tmp)
        try:
            for n, (action, value, gap_days) in enumerate(steps):
                clock.advance(gap_days * 86400 + 60)
                _step(memory, n, action, value)
                held = memory.db.execute(
                    "SELECT value, contested_by FROM profile_items"
                    " WHERE key = 'preferred_room' AND status = 'confirmed'"
                ).fetchall()
                assert len(held) <= 1, held
                shown = [
                    i["value"]
                    for i in memory.snapshot(None, f"{value} 청정해줘")["long_term"][
                        "profile_items"
                    ]
                ]
                contested = [json.loads(v) for v, by in held if by]
                assert not set(shown) & set(contested)
        finally:
            memory.db.close()


text_s = st.text(alphabet="거실안방노래등산골든 ab7시", max_size=12)
item_s = st.tuples(st.sampled_from(["preferred_room", "favorite_song", "hobby", "k"]), text_s)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(item_s, max_size=6),
    pairs=st.lists(text_s, max_size=6),
    utterance=text_s,
    budget=st.integers(256, 1400),
)
def test_a_focused_snapshot_is_valid_in_budget_and_keeps_what_is_named(
    items: list[tuple[str, str]], pairs: list[str], utterance: str, budget: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory, _clock = _fresh(tmp)
        memory.policy = MemoryPolicy(snapshot_budget_bytes=budget)
        try:
            with memory.db.atomic():
                for n, text in enumerate(pairs):
                    pid, _s = memory.record_utterance(
                        turn_id=f"p{n}", requested_session="s", text=text or "안녕"
                    )
                    memory.store.close_pair(pid, status="ok", now=memory.now())
                for key, value in items:
                    memory.profile.put_confirmed({"key": key, "value": value})
            first = canonical(memory.snapshot("s", utterance))
            assert canonical(memory.snapshot("s", utterance)) == first
            assert len(first) <= budget
            snapshot: dict[str, Any] = json.loads(first)
            MemorySnapshot.model_validate(snapshot)
            shown = {(i["key"], i["value"]) for i in snapshot["long_term"]["profile_items"]}
            confirmed = memory.view("s").profile_items
            for item in confirmed:
                if not (isinstance(item.value, str) and item.value and item.value in utterance):
                    continue
                alone = build_snapshot(
                    type(memory.view("s"))(profile_items=(item,), sync=memory.view("s").sync),
                    budget - _others_size(snapshot),
                )
                if alone["long_term"]["profile_items"]:
                    assert (item.key, item.value) in shown or _room_taken_by_named(
                        snapshot, utterance
                    ), (item, snapshot)
        finally:
            memory.db.close()


def _others_size(snapshot: dict[str, Any]) -> int:
    """Bytes the pairs and the session summary take (kept before profile items)."""
    rest = dict(snapshot, long_term={"profile_items": []})
    rest["mid_term"] = {"daily_summaries": [], "weekly_digest": ""}
    rest["sync"] = {"cursor": "", "version": ""}
    skeleton = {
        "source": snapshot["source"],
        "short_term": {"recent_pairs": [], "session_summary": ""},
        "mid_term": {"daily_summaries": [], "weekly_digest": ""},
        "long_term": {"profile_items": []},
        "sync": {"cursor": "", "version": ""},
    }
    return len(canonical(rest)) - len(canonical(skeleton))


def _room_taken_by_named(snapshot: dict[str, Any], utterance: str) -> bool:
    """Another named item took the room first (named items rank among themselves)."""
    return any(
        isinstance(i["value"], str) and i["value"] and i["value"] in utterance
        for i in snapshot["long_term"]["profile_items"]
    )

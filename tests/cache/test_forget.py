"""Privacy policy, retention, forgetting along provenance, revocation — real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.privacy import CategoryPolicy, PrivacyPolicy
from edge.app.memory_ops import MemoryOps
from edge.host.checkpointer import Checkpointer
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox

ROOM = CandidateIn("preferred_room", "안방", "device_pattern")
ACCEPT = CandidateIn("preferred_room", "안방", "device_pattern", None, "suggestion_accepted")


class Home:
    def __init__(self, path: Path, clock: ManualClock, privacy: PrivacyPolicy) -> None:
        self.db = open_state_db(path, MIGRATIONS)
        self.clock = clock
        self.memory = Memory(
            db=self.db, clock=clock, policy=MemoryPolicy(privacy=privacy, retention_days=30)
        )
        self.sync = SyncOutbox(db=self.db, clock=clock)
        self.ops = MemoryOps(memory=self.memory, sync_outbox=self.sync, clock=clock)
        self.checkpointer = Checkpointer(path, busy_timeout_ms=1000)
        self.n = 0

    def say(self, text: str, cand: CandidateIn | None = None, session: str = "s1") -> str:
        self.n += 1
        with self.db.atomic():
            pair, sid = self.memory.record_utterance(
                turn_id=f"t{self.n}", requested_session=session, text=text
            )
            self.memory.store.close_pair(
                pair, status="ok", now=self.clock.now(), assistant_text="네"
            )
            writes = [self.memory.store.pair_write(pair)]
            if cand is not None:
                writes += self.memory.profile.add_evidence(
                    cand, pair_id=pair, session_id=sid, source="cloud"
                )
            self.sync.enqueue(writes)
        return pair

    def day(self, days: float = 1) -> None:
        self.clock.advance(days * 86400)

    def forget(self, scope: str, target: str | None = None) -> dict[str, int]:
        with self.db.atomic():
            removed = self.ops.forget(scope, target)
        self.checkpointer.truncate()
        return removed

    def sweep(self, limit: int = 500) -> dict[str, int]:
        with self.db.atomic():
            return self.ops.sweep(limit)

    def item(self, value: str = "안방") -> dict[str, Any] | None:
        return self.memory.profile.item("preferred_room", value)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self.db.execute(sql).fetchall()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    h = Home(tmp_path / "state.db", ManualClock(), PrivacyPolicy())
    yield h
    h.db.close()


def test_never_items_are_not_written(tmp_path: Path) -> None:
    policy = PrivacyPolicy(categories={"contact": CategoryPolicy("never")})
    h = Home(tmp_path / "s.db", ManualClock(), policy)
    h.say("엄마 번호는 010이야", CandidateIn("mom_phone", "010", "contact"))
    assert h.rows("SELECT count(*) FROM profile_items") == [(0,)]


def test_days_items_expire_and_sensitive_ones_stay_home(home: Home) -> None:
    cand = CandidateIn("blood_pressure", "high", "health")  # sensitive: 30 days, unshared
    home.say("혈압이 높대", cand)
    [(expire, sensitive)] = home.rows("SELECT expire_at, sensitive FROM profile_items")
    assert expire.startswith("2026-07-24") and sensitive == 1
    kinds = [k for (k,) in home.rows("SELECT kind FROM sync_outbox")]
    assert kinds == ["short_term_pair"]  # share: false keeps the item off the sync
    home.day(31)
    assert any(home.sweep().values())
    assert home.rows("SELECT count(*) FROM profile_items") == [(0,)]
    audit = home.rows("SELECT action, counts FROM memory_audit")
    assert audit[-1][0] == "expire" and "blood_pressure" not in audit[-1][1]


def test_session_items_vanish_when_their_session_ends(tmp_path: Path) -> None:
    policy = PrivacyPolicy(categories={"mood": CategoryPolicy("session")})
    h = Home(tmp_path / "s.db", ManualClock(), policy)
    h.say("오늘 좀 우울해", CandidateIn("mood", "low", "mood"), session="s1")
    h.say("그래도 괜찮아", session="s1")
    assert h.rows("SELECT count(*) FROM profile_items") == [(1,)]
    h.say("안녕", session="s2")
    assert h.rows("SELECT count(*) FROM profile_items") == [(0,)]


def test_forget_a_sole_source_removes_the_item(home: Home) -> None:
    pair = home.say("안방 청정해줘", ROOM)
    removed = home.forget("pair", pair)
    assert removed == {
        "pairs": 1,
        "sessions": 0,
        "profile_items": 1,
        "summaries": 0,
        "outbox": 2,
    }  # the pair write and the candidate write were unsent
    assert home.item() is None
    [(kind, payload)] = home.rows("SELECT kind, payload FROM sync_outbox")
    assert kind == "memory_deletion" and json.loads(payload)["pair_ids"] == [pair]


def test_forget_a_shared_source_keeps_the_item_with_the_rest(home: Home) -> None:
    first = home.say("안방 청정해줘", ROOM)
    home.day()
    second = home.say("안방 좀 깨끗하게", ROOM)
    removed = home.forget("pair", first)
    assert removed["profile_items"] == 0
    item = home.item()
    assert item is not None and json.loads(item["source_pair_ids"]) == [second]
    assert len(home.memory.profile.evidence(item["item_id"])) == 1


def test_a_confirmed_item_falls_back_when_its_acceptance_is_forgotten(home: Home) -> None:
    for _ in range(3):
        home.say("안방 청정해줘", ROOM)
        home.day()
    yes = home.say("응 안방", ACCEPT)
    item = home.item()
    assert item is not None and item["status"] == "confirmed"
    home.forget("pair", yes)
    item = home.item()
    assert item is not None and item["status"] == "suggestable"  # 3 mentions on 3 days remain
    assert home.memory.snapshot(None)["long_term"]["profile_items"] == []


def test_forget_a_session_cascades_to_summaries(home: Home) -> None:
    home.say("안방 청정해줘", session="s1")
    home.say("거실도", session="s2")
    with home.db.atomic():
        home.memory.tiers.put_daily("2026-06-24", "둘 다", source_session_ids=["s1", "s2"])
        home.memory.tiers.put_daily("2026-06-23", "하나", source_session_ids=["s1"])
        home.memory.tiers.put_weekly("2026-W26", "주간", source_summary_ids=["daily-2026-06-23"])
    removed = home.forget("session", "s1")
    assert removed["pairs"] == 1 and removed["sessions"] == 1 and removed["summaries"] == 2
    assert home.rows("SELECT day, source_session_ids FROM daily_summaries") == [
        ("2026-06-24", '["s2"]')
    ]
    assert home.rows("SELECT count(*) FROM weekly_digests") == [(0,)]


def test_forget_all_keeps_the_sync_position_and_the_audit(home: Home) -> None:
    home.say("안방 청정해줘", ROOM)
    with home.db.atomic():
        home.memory.store.set_sync(home.memory.sync_position().__class__("cur-7", "v7"))
        home.memory.tiers.put_daily("2026-06-24", "요약")
    home.forget("profile_key", "nothing")
    removed = home.forget("all")
    assert removed["pairs"] == 1 and removed["profile_items"] == 1
    for table in ("pairs", "sessions", "profile_items", "profile_evidence", "daily_summaries"):
        assert home.rows(f"SELECT count(*) FROM {table}") == [(0,)], table
    assert home.memory.sync_position().version == "v7"
    assert [a for (a,) in home.rows("SELECT action FROM memory_audit")] == ["forget", "forget"]
    kinds = [k for (k,) in home.rows("SELECT kind FROM sync_outbox")]
    assert kinds == ["memory_deletion", "memory_deletion"]


def test_revoke_keeps_the_item_without_its_value_and_old_evidence_cannot_repromote(
    home: Home,
) -> None:
    for _ in range(7):
        home.say("안방 청정해줘", ROOM)
        home.day()
    assert home.item() is not None and home.item()["status"] == "confirmed"  # type: ignore[index]
    with home.db.atomic():
        result = home.ops.revoke("preferred_room")
    assert len(result["revoked"]) == 1
    [(status, value)] = home.rows("SELECT status, value FROM profile_items")
    assert status == "revoked" and "안방" not in value
    assert home.memory.snapshot(None)["long_term"]["profile_items"] == []
    home.say("안방 청정해줘", ROOM)  # new evidence starts a new item from zero
    fresh = home.item()
    assert fresh is not None and fresh["status"] == "candidate"
    assert len(home.memory.profile.evidence(fresh["item_id"])) == 1


def test_retention_prunes_synced_pairs_only_in_bounded_batches(home: Home) -> None:
    old = [home.say(f"옛날 말 {n}") for n in range(7)]
    with home.db.atomic():
        home.memory.store.mark_synced(old[:5])
    home.day(31)
    home.say("새 말")
    first = home.sweep(limit=3)
    assert first["pairs"] == 3
    assert home.sweep(limit=3)["pairs"] == 2
    assert not any(home.sweep(limit=3).values())
    left = [p for (p,) in home.rows("SELECT pair_id FROM pairs ORDER BY created_at")]
    assert left == old[5:] + left[-1:]  # the unsynced old ones and the new one


def test_the_audit_is_append_only(home: Home) -> None:
    home.forget("all")
    with pytest.raises(sqlite3.IntegrityError):
        home.db.execute("DELETE FROM memory_audit")

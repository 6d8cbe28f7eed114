"""The lasting part of the snapshot's view, kept between turns (cache/lasting.py): after every
kind of change — a forget, a revocation, an expiry (swept or merely passed), a consent revoked
or granted, a relabel, a new privacy policy, a write rolled back, a commit by another
connection — the next snapshot is exactly the one a fresh read builds. Real SQLite file."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_common.clock import ManualClock, iso
from a2a_common.jsonx import canonical
from a2a_common.sqlite import open_state_db
from cache.lasting import Lasting
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from cache.privacy import CategoryPolicy, PrivacyPolicy
from edge.app.memory_ops import MemoryOps
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox

KEYS = ["preferred_room", "bedtime", "blood_pressure"]
VALUES = {"preferred_room": "안방", "bedtime": "밤 11시", "blood_pressure": "혈압 높음"}
UTTERANCES = [None, "안방 청정해줘", "혈압 얘기", "안녕"]


class Uncached:
    """A lasting cache that keeps nothing: every view read afresh (the oracle)."""

    def get(self, key: object, stamp: str, read: Callable[[], Lasting]) -> Lasting:
        return read()

    def clear(self) -> None:
        pass


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = open_state_db(path, MIGRATIONS, synchronous="NORMAL")
        self.clock = ManualClock()
        self.consent: set[str] = set()
        self.memory = Memory(
            db=self.db,
            clock=self.clock,
            policy=MemoryPolicy(),
            consents=lambda _person: frozenset(self.consent),
        )
        self.ops = MemoryOps(
            memory=self.memory,
            sync_outbox=SyncOutbox(db=self.db, clock=self.clock),
            clock=self.clock,
        )
        self.n = 0

    def snapshots(self) -> list[bytes]:
        return [canonical(self.memory.snapshot("s1", text)) for text in UTTERANCES]

    def fresh(self) -> list[bytes]:
        kept, self.memory.lasting = self.memory.lasting, Uncached()  # type: ignore[assignment]
        try:
            return self.snapshots()
        finally:
            self.memory.lasting = kept

    def confirm(
        self, key: str, category: str | None = None, expire_in_s: int | None = None
    ) -> None:
        expire = iso(self.clock.now() + timedelta(seconds=expire_in_s)) if expire_in_s else None
        item: dict[str, Any] = {"key": key, "value": VALUES[key], "category": category}
        if expire:
            item["expire_at"] = expire
        with self.db.atomic():
            self.memory.tiers.apply_updates({"profile_items": [item]})

    def daily(self, day: int, text: str, category: str | None = None) -> None:
        with self.db.atomic():
            self.memory.tiers.put_daily(f"2026-06-{day:02d}", text, category=category)
            self.memory.tiers.put_weekly("2026-W26", f"주간 {text}", category=category)

    def say(self, text: str, cand: CandidateIn | None = None) -> str:
        self.n += 1
        with self.db.atomic():
            pair, sid = self.memory.record_utterance(
                turn_id=f"t{self.n}", requested_session="s1", text=text
            )
            self.memory.store.close_pair(
                pair, status="ok", now=self.clock.now(), assistant_text="네"
            )
            if cand is not None:
                self.memory.profile.add_evidence(cand, pair_id=pair, session_id=sid, source="cloud")
        return pair

    def items(self) -> list[str]:
        snap = self.memory.snapshot("s1")
        return [i["key"] for i in snap["long_term"]["profile_items"]]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    h = Home(tmp_path / "state.db")
    yield h
    h.db.close()


def test_a_forgotten_key_leaves_the_next_snapshot_at_once(home: Home) -> None:
    home.confirm("preferred_room")
    assert home.items() == ["preferred_room"]  # kept now
    with home.db.atomic():
        home.ops.forget("profile_key", "preferred_room")
    assert home.items() == []
    assert home.snapshots() == home.fresh()


def test_a_revoked_item_leaves_the_next_snapshot_at_once(home: Home) -> None:
    home.confirm("bedtime")
    assert home.items() == ["bedtime"]
    with home.db.atomic():
        home.ops.revoke("bedtime")
    assert home.items() == []


def test_a_revoked_consent_hides_its_texts_from_the_next_snapshot(home: Home) -> None:
    # 혈압 잰 날 measures blood pressure: vital and health (tests/fixtures/privacy_eval.md; the
    # classifier tags it so since b581272), so its day needs both grants to go out.
    home.consent.update({"health", "vital"})
    home.confirm("blood_pressure", "health")
    home.daily(24, "혈압 잰 날", "health")
    snap = home.memory.snapshot("s1")
    assert [i["key"] for i in snap["long_term"]["profile_items"]] == ["blood_pressure"]
    assert [d["summary"] for d in snap["mid_term"]["daily_summaries"]] == ["혈압 잰 날"]
    home.consent.discard("health")  # no write to any cached table: the key changes
    snap = home.memory.snapshot("s1")
    assert snap["long_term"]["profile_items"] == []
    assert snap["mid_term"]["daily_summaries"] == [] and snap["mid_term"]["weekly_digest"] == ""
    home.consent.add("health")
    assert home.items() == ["blood_pressure"]
    snap = home.memory.snapshot("s1")
    assert [d["summary"] for d in snap["mid_term"]["daily_summaries"]] == ["혈압 잰 날"]
    home.consent.discard("vital")  # health alone: the item goes on, the reading's day does not
    snap = home.memory.snapshot("s1")
    assert [i["key"] for i in snap["long_term"]["profile_items"]] == ["blood_pressure"]
    assert snap["mid_term"]["daily_summaries"] == [] and snap["mid_term"]["weekly_digest"] == ""


def test_an_item_past_its_expiry_leaves_the_snapshot_before_any_sweep(home: Home) -> None:
    home.confirm("preferred_room", expire_in_s=60)
    home.confirm("bedtime")
    assert home.items() == ["bedtime", "preferred_room"]
    home.clock.advance(61)  # nothing written: the kept view's `until` has passed
    assert home.items() == ["bedtime"]
    assert home.snapshots() == home.fresh()


def test_a_clock_set_back_reads_again(home: Home) -> None:
    home.confirm("preferred_room", expire_in_s=60)
    home.clock.advance(61)
    assert home.items() == []
    home.clock.advance(-30)  # before the expiry again: the row is live in a fresh read
    assert home.items() == ["preferred_room"]


def test_a_relabel_to_a_sensitive_category_hides_the_daily_summary(home: Home) -> None:
    home.say("평범한 대화")
    with home.db.atomic():
        home.memory.tiers.put_daily("2026-06-24", "평범한 하루", source_session_ids=["s1"])
    assert home.memory.snapshot("s1")["mid_term"]["daily_summaries"]
    cand = CandidateIn("blood_pressure", "혈압 높음", "health")  # its pair is now health
    home.say("혈압이 높대", cand)
    assert home.memory.snapshot("s1")["mid_term"]["daily_summaries"] == []
    assert home.snapshots() == home.fresh()


def test_a_new_privacy_policy_applies_to_the_next_snapshot(home: Home) -> None:
    home.confirm("bedtime", "routine")
    assert home.items() == ["bedtime"]
    policy = PrivacyPolicy(categories={"routine": CategoryPolicy(share=False)})
    home.memory.set_privacy(policy)
    assert home.items() == []


def test_a_write_rolled_back_is_never_served(home: Home) -> None:
    home.confirm("bedtime")
    before = home.snapshots()
    with pytest.raises(RuntimeError), home.db.atomic():
        home.db.execute("UPDATE profile_items SET value = '\"새벽 3시\"'")
        inside = home.memory.snapshot("s1")  # read inside: holds the uncommitted value
        assert inside["long_term"]["profile_items"][0]["value"] == "새벽 3시"
        raise RuntimeError("roll back")
    assert home.snapshots() == before == home.fresh()


def test_a_commit_by_another_connection_is_seen(home: Home) -> None:
    home.daily(24, "오래된 요약")
    assert home.memory.snapshot("s1")["mid_term"]["daily_summaries"][0]["summary"] == "오래된 요약"
    with closing(sqlite3.connect(home.path)) as other, other:
        other.execute("UPDATE daily_summaries SET summary = '새 요약'")
    assert home.memory.snapshot("s1")["mid_term"]["daily_summaries"][0]["summary"] == "새 요약"


def test_what_does_not_change_is_read_once(home: Home) -> None:
    home.confirm("bedtime")
    reads = 0
    real = home.memory.lasting.get

    def counting(key: Any, stamp: str, read: Callable[[], Lasting]) -> Lasting:
        def counted() -> Lasting:
            nonlocal reads
            reads += 1
            return read()

        return real(key, stamp, counted)

    home.memory.lasting.get = counting  # type: ignore[method-assign]
    home.memory.snapshot("s1", "안녕")
    home.say("안녕")  # a turn's own writes (pairs, sessions) do not touch it
    home.memory.snapshot("s1", "안녕")
    assert reads == 1
    home.confirm("preferred_room")
    home.memory.snapshot("s1", "안녕")
    assert reads == 2


OPS = st.sampled_from(
    [
        "confirm",
        "confirm_health",
        "confirm_expiring",
        "daily",
        "daily_health",
        "say",
        "say_health",
        "forget_key",
        "forget_session",
        "forget_all",
        "revoke",
        "consent",
        "advance",
        "next_day",
        "sweep",
        "rollback",
        "other_connection",
        "privacy",
    ]
)


def apply(home: Home, op: str, n: int) -> None:
    key = KEYS[n % len(KEYS)]
    if op.startswith("confirm"):
        category = "health" if op == "confirm_health" else None
        home.confirm(key, category, 90 if op == "confirm_expiring" else None)
    elif op.startswith("daily"):
        home.daily(1 + n % 28, f"요약 {n}", "health" if op == "daily_health" else None)
    elif op.startswith("say"):
        cand = CandidateIn(key, VALUES[key], "health" if op == "say_health" else None)
        home.say(f"말 {n}", cand)
    elif op.startswith("forget"):
        scope = op.removeprefix("forget_").replace("key", "profile_key")
        target = {"profile_key": key, "session": "s1"}.get(scope)
        with home.db.atomic():
            home.ops.forget(scope, target)
    elif op == "revoke":
        with home.db.atomic():
            home.ops.revoke(key)
    elif op == "consent":
        home.consent ^= {"health"}
    elif op == "advance":
        home.clock.advance(60 * (1 + n % 3))
    elif op == "next_day":  # evidence on a new day: promotions, contests, supersedes
        home.clock.advance(86400)
    elif op == "sweep":
        with home.db.atomic():
            home.ops.sweep()
    elif op == "rollback":
        with pytest.raises(RuntimeError), home.db.atomic():
            home.db.execute("UPDATE profile_items SET relevance_score = 1 - relevance_score")
            home.db.execute("DELETE FROM daily_summaries")
            home.snapshots()
            raise RuntimeError("roll back")
    elif op == "other_connection":
        with closing(sqlite3.connect(home.path)) as other, other:
            other.execute("UPDATE daily_summaries SET summary = summary || '+'")
            other.execute("UPDATE profile_items SET relevance_score = 0.9 WHERE key = ?", [key])
    else:
        shared = n % 2 == 0
        policy = PrivacyPolicy(categories={"health": CategoryPolicy(share=shared)})
        home.memory.set_privacy(policy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(OPS, st.integers(0, 100)), min_size=1, max_size=20))
def test_every_snapshot_is_the_one_a_fresh_read_builds(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "state.db")
        try:
            for op, n in ops:
                home.snapshots()  # kept from here
                apply(home, op, n)
                assert home.snapshots() == home.fresh(), op
        finally:
            home.db.close()


def test_a_memory_made_inside_a_rolled_back_transaction_still_sees_every_write(
    tmp_path: Path,
) -> None:
    home = Home(tmp_path / "state.db")
    try:
        with pytest.raises(RuntimeError), home.db.atomic():
            home.memory = Memory(db=home.db, clock=home.clock, policy=MemoryPolicy())
            raise RuntimeError("roll back")  # its triggers would have gone with it
        home.confirm("bedtime")
        assert home.items() == ["bedtime"]
        with home.db.atomic():
            home.ops.forget("profile_key", "bedtime")
        assert home.items() == []
        assert home.snapshots() == home.fresh()
    finally:
        home.db.close()


def test_a_read_only_connection_builds_its_snapshot(home: Home) -> None:
    from a2a_common.sqlite import open_readonly

    home.confirm("bedtime")
    reader = open_readonly(home.path, len(MIGRATIONS))
    try:
        memory = Memory(db=reader, clock=home.clock, policy=MemoryPolicy())
        assert [i["key"] for i in memory.snapshot(None)["long_term"]["profile_items"]] == [
            "bedtime"
        ]
        home.confirm("preferred_room")  # the writer's commit: data_version changes
        keys = [i["key"] for i in memory.snapshot(None)["long_term"]["profile_items"]]
        assert keys == ["bedtime", "preferred_room"]
    finally:
        reader.close()

"""CacheStore's counts of every tier, on a real SQLite file."""

from __future__ import annotations

from a2a_common.clock import ManualClock
from cache.memory import Memory
from cache.model import CacheCounts


def test_counts_of_every_tier(memory: Memory, clock: ManualClock) -> None:
    assert memory.store.counts() == CacheCounts(0, 0, 0, 0, 0, 0)
    with memory.db.atomic():
        answered, _ = memory.record_utterance(turn_id="t1", requested_session="s1", text="안녕")
        memory.store.close_pair(answered, status="ok", now=clock.now())
        synced, _ = memory.record_utterance(turn_id="t2", requested_session="s1", text="고마워")
        memory.store.close_pair(synced, status="ok", now=clock.now())
        memory.store.mark_synced([synced])
        memory.record_utterance(turn_id="t3", requested_session="s2", text="잠깐")  # unanswered
        memory.tiers.put_daily("2026-06-23", "어제")
        memory.tiers.put_daily("2026-06-24", "오늘")
        memory.tiers.put_weekly("2026-W26", "이번 주")
    assert memory.store.counts() == CacheCounts(
        pairs=3,
        pairs_unsynced=2,
        turns_pending=1,
        sessions=2,
        daily_summaries=2,
        weekly_digests=1,
    )


def test_a_turn_writes_no_index_that_no_turn_reads(memory: Memory) -> None:
    """Issue 36: every index of pairs and sessions is a WAL frame in each turn's commit; the two
    no turn reads are gone (and the pending pairs' one, read once per start: cache_0009), and
    the turn's own reads still go through an index."""
    names = {
        row[0]
        for row in memory.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN (?, ?)",
            ["pairs", "sessions"],
        )
    }
    assert not names & {"pairs_created", "sessions_last_turn", "pairs_status"}
    assert {"pairs_person", "sessions_person"} <= names
    for sql in (
        "SELECT session_id, last_turn_at FROM sessions WHERE person_id = 'p'"
        " ORDER BY entered_at DESC LIMIT 1",
        "SELECT pair_id FROM pairs WHERE person_id = 'p' AND status != 'pending'"
        " ORDER BY created_at DESC, pair_id DESC LIMIT 3",
    ):  # the pending pairs are read once per start, from the pairs (cache_0009)
        plan = " ".join(str(row[-1]) for row in memory.db.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (sql, plan)

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

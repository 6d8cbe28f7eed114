"""A `profile_candidate` sync write does not grow with its item's evidence (issue 36, CPU per
turn over a year): it carries the provenance its change added, the totals as `mentions` and
`days`; the whole chain stays in the item and goes with `profile_confirmed`."""

from __future__ import annotations

import json

import pytest
from freezegun import freeze_time

from a2a_common.clock import SystemClock
from a2a_common.jsonx import dumps
from a2a_common.writes import SyncWrite
from cache.memory import Memory
from cache.model import CandidateIn

ROOM = CandidateIn("preferred_room", "안방", "device_pattern", 0.7)


@pytest.fixture
def clock() -> SystemClock:  # conftest's `memory` on the clock freezegun moves
    return SystemClock()


def mention(memory: Memory, n: int) -> tuple[str, str, list[SyncWrite]]:
    """The `n`th turn of one day naming the same room: (pair id, session, writes owed)."""
    with freeze_time(f"2026-06-01T11:{n // 60:02d}:{n % 60:02d}Z"), memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t{n}", requested_session=None, text="안방 청정해줘"
        )
        memory.store.close_pair(pair_id, status="ok", now=memory.now())
        writes = memory.profile.add_evidence(
            ROOM, pair_id=pair_id, session_id=session, source="device"
        )
    return pair_id, session, writes


def test_a_candidate_write_stays_the_same_size_as_its_mentions_grow(memory: Memory) -> None:
    sizes, pairs = [], []
    for n in range(200):
        pair_id, session, writes = mention(memory, n)
        pairs.append(pair_id)
        assert [w.kind for w in writes] == ["profile_candidate"]  # one day: never suggestable
        payload = writes[0].payload
        assert payload["mentions"] == n + 1 and payload["days"] == ["2026-06-01"]
        assert payload["source_pair_ids"] == [pair_id]
        assert payload["source_session_ids"] == [session]
        assert len(payload["source_candidate_ids"]) == 1
        sizes.append(len(dumps(payload)))
    # ids of one length each time: the same bytes for the 200th mention as for the 2nd
    assert max(sizes[1:]) - min(sizes[1:]) <= 16, sizes
    item = memory.profile.item("preferred_room", "안방")
    assert item is not None and json.loads(item["source_pair_ids"]) == pairs  # chain kept


def test_the_confirmation_carries_the_whole_chain(memory: Memory) -> None:
    pairs = []
    for day in range(1, 8):  # auto_confirm_days: 7 distinct days
        with freeze_time(f"2026-06-0{day}T11:00:00Z"), memory.db.atomic():
            pair_id, session = memory.record_utterance(
                turn_id=f"d{day}", requested_session=None, text="안방 청정해줘"
            )
            memory.store.close_pair(pair_id, status="ok", now=memory.now())
            writes = memory.profile.add_evidence(
                ROOM, pair_id=pair_id, session_id=session, source="device"
            )
        pairs.append(pair_id)
    kinds = {w.kind: w.payload for w in writes}
    assert kinds["profile_candidate"]["source_pair_ids"] == [pairs[-1]]
    assert kinds["profile_confirmed"]["status"] == "confirmed"
    assert kinds["profile_confirmed"]["source_pair_ids"] == pairs
    assert len(kinds["profile_confirmed"]["source_candidate_ids"]) == 7

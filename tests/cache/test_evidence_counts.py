"""A mention's promotion check does not grow with its item's evidence (issue 36, CPU per turn
over a year): `counted` stops at what the thresholds ask, and the days go by index seeks."""

from __future__ import annotations

import random
import sqlite3

import pytest
from freezegun import freeze_time

from a2a_common.clock import SystemClock
from cache.memory import Memory
from cache.model import CandidateIn
from cache.revision import counted, evidence_days

ROOM = CandidateIn("preferred_room", "안방", "device_pattern", 0.7)


@pytest.fixture
def clock() -> SystemClock:  # conftest's `memory` on the clock freezegun moves
    return SystemClock()


def steps_of_mention(memory: Memory, n: int, day: int = 1) -> int:
    """SQLite VM steps of the `n`th mention's add_evidence (one progress call per step)."""
    conn: sqlite3.Connection = memory.db.conn
    stamp = f"2026-06-{day:02d}T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
    with freeze_time(stamp), memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t{day}-{n}", requested_session=None, text="안방 청정해줘"
        )
        memory.store.close_pair(pair_id, status="ok", now=memory.now())
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(step, 1)
        try:
            memory.profile.add_evidence(ROOM, pair_id=pair_id, session_id=session, source="device")
        finally:
            conn.set_progress_handler(None, 1)
    return steps[0]


def test_a_mention_does_the_same_work_at_its_600th_as_at_its_30th(memory: Memory) -> None:
    steps = [steps_of_mention(memory, n) for n in range(600)]
    early, late = steps[30], steps[599]
    # before: counted() visited every row of the window twice (~75,000 more steps at 600)
    assert late <= early * 1.05, (early, late)
    item = memory.profile.item("preferred_room", "안방")
    assert item is not None and item["status"] == "candidate"  # one day: never suggestable
    with freeze_time("2026-06-01T12:00:00Z"):  # the console's count stays exact
        assert memory.profile.window_counts(item) == (600, 1)


def test_capped_counts_are_the_exact_ones_up_to_the_cap(memory: Memory) -> None:
    rng = random.Random(36)
    for day in range(1, 10):
        for n in range(rng.randrange(0, 6)):
            steps_of_mention(memory, n, day)
    item = memory.profile.item("preferred_room", "안방")
    assert item is not None
    rows = memory.db.execute(
        "SELECT pair_id, day, created_at FROM profile_evidence WHERE item_id = ?",
        [item["item_id"]],
    ).fetchall()
    assert evidence_days(memory.db, item["item_id"]) == sorted({d for _p, d, _c in rows})
    for first in ("2026-05-01", "2026-06-03", "2026-06-08", "2026-07-01"):
        for since in (None, "2026-06-04T00:00:02Z", rows[len(rows) // 2][2]):
            for without in ("", rows[0][0], rows[-1][0]):
                live = [
                    (p, d) for p, d, c in rows if d >= first and c > (since or "") and p != without
                ]
                exact = (len(live), len({d for _p, d in live}))
                got = counted(memory.db, item["item_id"], first, since, without)
                assert got == exact
                for cap in ((0, 0), (1, 1), (3, 7), (3, 3), (50, 50)):
                    capped = counted(memory.db, item["item_id"], first, since, without, cap)
                    assert capped == (min(exact[0], cap[0]), min(exact[1], cap[1]))

"""Issue 36, bytes per turn: the b-trees a turn's two commits write (its take-in, its answer),
read from the WAL frames each commit appends and mapped to their b-trees with dbstat. Each
b-tree a commit touches is at least a WAL frame (a 1 KiB page) on the disk."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from edge.store.schema import MIGRATIONS

WAL_HEADER, FRAME_HEADER = 32, 24


def frames(db: Database, path: Path, commit: Callable[[], object]) -> Counter[str]:
    """The b-trees of the pages `commit` wrote to the WAL (a page freed since: `(free)`)."""
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    start = wal.stat().st_size if wal.exists() else 0
    commit()
    data = wal.read_bytes()
    size = int(db.execute("PRAGMA page_size").fetchone()[0])
    offset = max(start, WAL_HEADER)
    pages = []
    while offset + FRAME_HEADER + size <= len(data):
        pages.append(struct.unpack(">I", data[offset : offset + 4])[0])
        offset += FRAME_HEADER + size
    owner = dict(db.execute("SELECT pageno, name FROM dbstat").fetchall())
    return Counter(owner.get(p, "(free)") for p in pages)


def test_a_pending_turn_is_no_index_entry_and_is_still_recovered(tmp_path: Path) -> None:
    """cache_0009: `pairs_status` (pending pairs) took a WAL frame at the take-in and one at
    the answer, for a read made once per start; the recovery reads the pairs instead."""
    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS)
    clock = ManualClock()
    memory = Memory(db=db, clock=clock, policy=MemoryPolicy())
    made: list[tuple[str, str]] = []

    def take(turn_id: str) -> None:
        with db.atomic():
            made.append(
                memory.record_utterance(turn_id=turn_id, requested_session=None, text="안녕")
            )

    for n in range(3):
        take(f"t{n}")
        clock.advance(5)
    taken = frames(db, path, lambda: take("t3"))
    pair_id = made[-1][0]

    def answer() -> None:
        with db.atomic():
            memory.store.close_pair(pair_id, status="ok", now=clock.now(), assistant_text="네")

    answered = frames(db, path, answer)
    assert taken["pairs"] >= 1 and answered["pairs"] >= 1  # the check can fail
    assert "pairs_status" not in taken + answered
    indexes = {r[0] for r in db.execute("SELECT name FROM pragma_index_list('pairs')")}
    assert "pairs_status" not in indexes
    # t0..t2 never answered: what a restart answers `interrupted`, oldest first
    assert memory.store.pending_turns() == [(f"t{n}", made[n][0]) for n in range(3)]
    assert memory.store.counts().turns_pending == 3
    db.close()

"""Issue 36, bytes per turn: the b-trees a turn's two commits write (its take-in, its answer),
read from the WAL frames each commit appends and mapped to their b-trees with dbstat. Each
b-tree a commit touches is at least a WAL frame (a 1 KiB page) on the disk."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from a2a_common.clock import ManualClock, iso
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


def test_a_turn_that_goes_on_in_its_session_moves_no_index_entry(tmp_path: Path) -> None:
    """cache_0010: `sessions_person` keys a session by when it was entered, not by its last
    turn, which moved the entry every take-in; the latest session is the same: a session taken
    up again (the turn names it) is the current one for the next turn, and a DB made before
    keeps its current session."""
    path = tmp_path / "state.db"
    names = [m.name for m in MIGRATIONS]
    clock = ManualClock()
    old = open_state_db(path, MIGRATIONS[: names.index("cache_0010_sessions_entered")])
    first, second = "session-first", "session-second"
    with old.atomic():  # as the code before kept them: `second` has the latest turn
        for session, started, last in ((second, 0, 10), (first, 5, 5)):
            old.execute(
                "INSERT INTO sessions (session_id, started_at, last_turn_at) VALUES (?, ?, ?)",
                [session, iso(clock.now() + timedelta(seconds=started)),
                 iso(clock.now() + timedelta(seconds=last))],
            )  # fmt: skip
    old.close()
    clock.advance(15)
    db = open_state_db(path, MIGRATIONS)
    memory = Memory(db=db, clock=clock, policy=MemoryPolicy())

    def take(turn_id: str, session: str | None = None) -> str:
        with db.atomic():
            _pair, session_id = memory.record_utterance(
                turn_id=turn_id, requested_session=session, text="안녕"
            )
        clock.advance(5)
        return session_id

    assert take("t3") == second  # the current session as the old DB kept it
    assert take("t4", first) == first  # taken up again: the latest
    assert take("t5") == first
    going_on = frames(db, path, lambda: take("t6"))
    assert going_on["pairs"] and "sessions_person" not in going_on
    entering = frames(db, path, lambda: take("t7", second))
    assert entering["sessions_person"] == 1  # the check can fail
    assert take("t8") == second
    latest = memory.store.latest_session()
    assert latest is not None and (latest.session_id, latest.last_turn_at) == (
        second,
        db.execute("SELECT created_at FROM pairs WHERE turn_id = 't8'").fetchone()[0],
    )
    clock.advance(memory.policy.session_idle_s)
    fresh = take("t9")
    assert fresh not in (first, second)
    assert memory.current_sessions(clock.now()) == [fresh]
    db.close()


def test_a_turn_that_goes_on_in_its_session_writes_the_session_once(tmp_path: Path) -> None:
    """A turn in the latest session writes no session row at its take-in: its answer (or its
    close, `interrupted` at a restart) moves `last_turn_at` on in the commit that writes the
    session's summary, and until then the turn's pair tells when it came, so a turn that comes
    while the one before waits for its answer is in the same session and that session is
    going on."""
    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS)
    clock = ManualClock()
    memory = Memory(db=db, clock=clock, policy=MemoryPolicy())
    idle = memory.policy.session_idle_s

    def take(turn_id: str) -> tuple[str, str]:
        with db.atomic():
            return memory.record_utterance(turn_id=turn_id, requested_session=None, text="안녕")

    def answer(pair_id: str, summary: str = "요약") -> None:
        with db.atomic():
            memory.store.close_pair(pair_id, status="ok", now=clock.now(), assistant_text="네")
            memory.labels.session_summary(session, summary, None)

    def last_turn() -> str:
        return str(db.execute("SELECT last_turn_at FROM sessions").fetchone()[0])

    def said(pair_id: str) -> str:
        row = db.execute("SELECT created_at FROM pairs WHERE pair_id = ?", [pair_id])
        return str(row.fetchone()[0])

    first, session = take("t0")
    clock.advance(5)
    answer(first)
    assert last_turn() == said(first)
    clock.advance(5)
    taken = frames(db, path, lambda: take("t1"))
    pair = db.execute("SELECT pair_id FROM pairs WHERE turn_id = 't1'").fetchone()[0]
    assert "sessions" not in taken and taken["pairs"] == 1  # the check can fail
    answered = frames(db, path, lambda: answer(pair))
    assert answered["sessions"] == 1
    assert last_turn() == said(pair)
    # t2 waits for its answer while t3 comes just within the idle time after it
    waiting, _ = take("t2")
    clock.advance(idle - 1)
    later, again = take("t3")
    assert again == session
    assert memory.current_sessions(clock.now()) == [session]
    assert last_turn() == said(pair)  # neither answered yet
    with db.atomic():  # a restart closes them, the later first
        memory.close_unanswered(later, "error")
        memory.close_unanswered(waiting, "error")
    assert last_turn() == said(later)
    clock.advance(idle)
    assert take("t4")[1] != session
    db.close()

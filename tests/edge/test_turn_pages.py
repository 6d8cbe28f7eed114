"""Issue 36, bytes per turn: a turn's rows fit their 1 KiB leaves (its stored answer in
inbox_seen, its pair write in sync_outbox). A WITHOUT ROWID row keeps at
most 231 bytes in its leaf and spills the rest into an overflow page, which is freed and zeroed
(secure_delete) when the row goes, with the freelist trunk and page 1: WAL frames every turn."""

from __future__ import annotations

from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from a2a_common.writes import SyncWrite
from edge.store.inbox import InboxDedupe, Seen
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox

TOPIC = "a2a/robot-1/turn/request"
TEXT = "안녕하세요! 오늘은 맑고 따뜻한 날씨예요. 산책하기 좋은 날이네요. 무엇을 도와드릴까요?"


def before(name: str) -> list:  # type: ignore[type-arg]
    return MIGRATIONS[: [m.name for m in MIGRATIONS].index(name)]


def answer(turn_id: str) -> dict[str, object]:
    return {"turn_id": turn_id, "status": "ok", "assistant_text": TEXT, "route_family": "DEF",
            "workflow_ids": []}  # fmt: skip


def overflow(db: Database, table: str) -> int:
    row = db.execute(
        "SELECT count(*) FROM dbstat WHERE name = ? AND pagetype = 'overflow'", [table]
    ).fetchone()
    return int(row[0])


def test_a_turns_stored_answer_fits_its_leaf_and_an_older_db_keeps_its_marks(
    tmp_path: Path,
) -> None:
    """edge_0011: inbox_seen as a rowid table (a stored answer of ~300 bytes took an overflow
    page every turn) without its `seen_at` index; a DB made before keeps its marks, answers
    and fingerprints, and the prune still takes the oldest first."""
    path = tmp_path / "state.db"
    clock = ManualClock()
    old = open_state_db(path, before("edge_0011_inbox_seen_inline"))
    dedupe = InboxDedupe(db=old, clock=clock)
    with old.atomic():
        for n in range(3):
            dedupe.mark(f"turn:t{n}", TOPIC, f"words{n}")
            dedupe.answered(f"turn:t{n}", answer(f"t{n}"))
            clock.advance(60)
    assert overflow(old, "inbox_seen") == 3  # the check can fail
    old.close()
    db = open_state_db(path, MIGRATIONS)
    dedupe = InboxDedupe(db=db, clock=clock)
    assert dedupe.seen("turn:t1") == Seen("words1", answer("t1"))
    with db.atomic():
        for n in range(3, 6):
            dedupe.mark(f"turn:t{n}", TOPIC, f"words{n}")
            dedupe.answered(f"turn:t{n}", answer(f"t{n}"))
    assert overflow(db, "inbox_seen") == 0
    assert dedupe.seen("turn:t4") == Seen("words4", answer("t4"))
    indexes = [r[0] for r in db.execute("SELECT name FROM pragma_index_list('inbox_seen')")]
    assert indexes == ["sqlite_autoindex_inbox_seen_1"]  # the key's; no seen_at index
    with db.atomic():
        assert dedupe.prune("2099-01-01T00:00:00.000Z", limit=2) == 2
    keys = [r[0] for r in db.execute("SELECT key FROM inbox_seen ORDER BY key")]
    assert keys == [f"turn:t{n}" for n in range(2, 6)]  # the two oldest went
    db.close()


def test_a_pair_write_fits_its_leaf_and_the_outbox_keeps_write_id_order(tmp_path: Path) -> None:
    """sync_0004: sync_outbox as a rowid table (a turn's pair write, both texts, took an
    overflow page until the cloud acked it); a DB made before keeps its writes in order, a
    dead letter put back goes among them by write_id, and an ack batch deletes by write_id."""
    path = tmp_path / "state.db"
    clock = ManualClock()
    pair = SyncWrite("short_term_pair", {"user_text": TEXT, "assistant_text": TEXT * 2})
    old = open_state_db(path, before("sync_0004_outbox_inline"))
    outbox = SyncOutbox(db=old, clock=clock)
    with old.atomic():
        first, second, third = outbox.enqueue([pair, pair, pair])
        outbox.kill([(second, "rejected")])
    assert overflow(old, "sync_outbox") == 2  # the check can fail
    old.close()
    db = open_state_db(path, MIGRATIONS)
    outbox = SyncOutbox(db=db, clock=clock)
    with db.atomic():
        [fourth] = outbox.enqueue([pair])
    assert overflow(db, "sync_outbox") == 0
    assert [p.write_id for p in outbox.oldest(10)] == [first, third, fourth]
    with db.atomic():
        assert outbox.requeue_dead() == 1
    assert [p.write_id for p in outbox.oldest(10)] == [first, second, third, fourth]
    assert outbox.oldest(10)[1].payload == pair.payload
    with db.atomic():
        outbox.attempted([first, third], "timeout")
        outbox.ack([second, fourth])
    rows = db.execute("SELECT write_id, attempts, last_error FROM sync_outbox ORDER BY id")
    assert [tuple(r) for r in rows] == [(first, 1, "timeout"), (third, 1, "timeout")]
    db.close()

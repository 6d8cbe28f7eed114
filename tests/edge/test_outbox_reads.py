"""`flush()` reads the outbox only while a row may wait past its cursor (issue 36): after every
commit it read once to find the rows just put and once more to find none, and after a reap with
nothing put it read again to find none."""

from __future__ import annotations

import json
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from tests.edge.test_outbound import LinkWire


def test_flush_reads_once_for_what_was_put_and_not_at_all_when_nothing_was(
    tmp_path: Path,
) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=ManualClock(), window=3)
    wire = LinkWire()
    wire.connection = 1
    outbox.attach(wire)
    reads: list[str] = []
    db.conn.set_trace_callback(
        lambda sql: reads.append(sql) if "ORDER BY id LIMIT" in sql else None
    )
    with db.atomic():
        outbox.enqueue("a/r/x", {"task_id": "1", "n": 1})
        outbox.enqueue("a/r/x", {"task_id": "2", "n": 2})
    assert outbox.flush() == 2 and len(reads) == 1
    reads.clear()
    outbox.on_published(1)
    outbox.reap()
    assert outbox.flush() == 0 and reads == []
    with db.atomic():  # a window of 3, one still in flight: two of these go now
        for n in range(3, 6):
            outbox.enqueue("a/r/x", {"task_id": str(n), "n": n})
    reads.clear()
    assert outbox.flush() == 2 and len(reads) == 1
    outbox.on_published(2)  # room for the third: it was never read past, so it is read now
    assert [json.loads(body)["n"] for _t, body, _q, _r in wire.sent] == [1, 2, 3, 4, 5]
    wire.connection = 2  # a new connection: what was not PUBACKed goes again
    assert outbox.flush() == 3
    db.close()

"""The agents' rows of a commit go ahead of the events committed with them (issue 36): a
callback batch's RUNNING and COMPLETED commit the step's workflow/event rows before the
dependant's command, which waited behind their writes to the socket. Only among rows handed
together; on each topic id order holds, and rows a window cannot all take keep id order."""

from __future__ import annotations

import json
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from tests.edge.test_outbound import LinkWire

COMMAND, CANCEL, EVENT = "a/r/task/command/arm", "a/r/task/cancel/arm", "a/r/workflow/event"


def sent(wire: LinkWire) -> list[tuple[str, int]]:
    return [(topic, json.loads(body)["n"]) for topic, body, _q, _r in wire.sent]


def outbox_on(tmp_path: Path, window: int) -> tuple[DurableOutbox, LinkWire]:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=ManualClock(), window=window)
    outbox.send_first("a/r/task/command/", "a/r/task/cancel/")
    wire = LinkWire()
    wire.connection = 1
    outbox.attach(wire)
    return outbox, wire


def put(outbox: DurableOutbox, *rows: tuple[str, int]) -> None:
    with outbox._db.atomic():
        for topic, n in rows:
            outbox.enqueue(topic, {"task_id": f"t{n}", "n": n})


def test_commands_and_cancels_go_ahead_of_the_events_committed_with_them(
    tmp_path: Path,
) -> None:
    outbox, wire = outbox_on(tmp_path, window=16)
    put(outbox, (EVENT, 1), (CANCEL, 2), (EVENT, 3), (COMMAND, 4), (EVENT, 5))
    assert outbox.flush() == 5
    assert sent(wire) == [(CANCEL, 2), (COMMAND, 4), (EVENT, 1), (EVENT, 3), (EVENT, 5)]
    put(outbox, (EVENT, 6), (COMMAND, 7))  # the next commit: its rows alone, the same way
    assert outbox.flush() == 2
    assert sent(wire)[5:] == [(COMMAND, 7), (EVENT, 6)]
    for mid in range(1, 8):  # every row PUBACKed, reaped: none is handed again
        outbox.on_published(mid)
    outbox.reap()
    assert outbox.flush() == 0 and outbox.pending() == 0


def test_a_small_window_reorders_only_the_rows_it_hands_together(tmp_path: Path) -> None:
    """Rows read that the window cannot all take go in id order (none waits behind later
    ones); what it takes whole goes agents' rows first."""
    outbox, wire = outbox_on(tmp_path, window=2)
    put(outbox, (EVENT, 1), (COMMAND, 2), (EVENT, 3), (COMMAND, 4), (EVENT, 5))
    assert outbox.flush() == 2
    assert sent(wire) == [(COMMAND, 2), (EVENT, 1)]
    outbox.on_published(1)  # room for one: the next row in id order
    assert sent(wire)[2:] == [(EVENT, 3)]
    outbox.on_published(2)
    assert sent(wire)[3:] == [(COMMAND, 4)]
    wire.connection = 2  # a new connection: what was not PUBACKed goes again, once each
    assert outbox.flush() == 2
    assert sent(wire)[4:] == [(COMMAND, 4), (EVENT, 3)]

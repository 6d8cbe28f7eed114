"""The durable MQTT outbox against a real SQLite file; the wire is a recording stand-in for
paho (the e2e tests cover the real broker)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from a2a_common.clock import ManualClock, iso
from a2a_common.sqlite import open_state_db
from edge.store.inbox import InboxDedupe
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS


class RecordingWire:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, int, bool]] = []

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:
        self.sent.append((topic, payload, qos, retain))
        return len(self.sent)


def test_rows_live_until_puback_and_are_resent_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=ManualClock())
    wire = RecordingWire()
    outbox.attach(wire)
    with db.atomic():
        outbox.enqueue("a/b", {"text": "안방"})
        outbox.enqueue("a/c", {"n": 2}, retain=True)
    assert outbox.flush() == 2
    assert outbox.flush() == 0  # handed once per process
    assert wire.sent[0] == ("a/b", '{"text":"안방"}'.encode(), 1, False)
    outbox.on_published(1)
    assert outbox.pending() == 2  # deleted by the next reap, in one transaction
    assert outbox.reap() == 1
    assert outbox.pending() == 1
    db.close()

    db = open_state_db(path, MIGRATIONS)  # a restart: the un-acked row goes again
    again = DurableOutbox(db=db, clock=ManualClock())
    wire2 = RecordingWire()
    again.attach(wire2)
    assert again.flush() == 1
    assert wire2.sent == [("a/c", b'{"n":2}', 1, True)]
    db.close()


def test_rolled_back_change_sends_nothing(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=ManualClock())
    outbox.attach(RecordingWire())
    with pytest.raises(RuntimeError), db.atomic():
        outbox.enqueue("a/b", {"x": 1})
        raise RuntimeError("the state change failed")
    assert outbox.pending() == 0
    assert outbox.flush() == 0


def test_dedupe_marks_inside_the_transaction(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    dedupe = InboxDedupe(db=db, clock=ManualClock())
    assert not dedupe.seen("turn:1")
    with db.atomic():
        dedupe.mark("turn:1", "a/turn/request")
    assert dedupe.seen("turn:1")


class ExpiryWire(RecordingWire):
    def __init__(self) -> None:
        super().__init__()
        self.expiries: dict[str, int | None] = {}

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:
        self.expiries[json.loads(payload)["task_id"]] = expiry_s
        return super().publish(topic, payload, qos=qos, retain=retain)


def test_commands_expire_at_their_deadline_and_safe_stops_never(tmp_path: Path) -> None:
    """SPEC 4.2: the expiry is the time left to `deadline` when handed to paho; a row whose
    deadline passed (a restart, a broker outage) is dropped unsent; a safe stop goes first and
    never expires."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    clock = ManualClock(datetime(2026, 6, 24, 20, 0, tzinfo=UTC))
    outbox = DurableOutbox(db=db, clock=clock)
    outbox.expire_under("a/r/task/command/")
    wire = ExpiryWire()
    outbox.attach(wire)
    at = clock.now()
    with db.atomic():
        for task_id, deadline_s in (("stale", 5), ("fresh", 125)):
            deadline = iso(at + timedelta(seconds=deadline_s))
            outbox.enqueue("a/r/task/command/mobility", {"task_id": task_id, "deadline": deadline})
        outbox.enqueue("a/r/task/cancel/mobility", {"task_id": "cancel"})
        stop = {"task_id": "stop", "deadline": iso(at), "safe_stop": True}
        outbox.enqueue("a/r/task/command/mobility", stop)
    clock.advance(10.5)  # the broker was away 10.5 s
    assert outbox.flush() == 3
    assert list(wire.expiries) == ["stop", "fresh", "cancel"]  # the stop first, the stale never
    assert wire.expiries == {"stop": None, "fresh": 115, "cancel": None}
    assert outbox.pending() == 3  # the stale row is gone, the others wait for their PUBACK
    db.close()


class LinkWire(ExpiryWire):
    """A stand-in for the channel that says which connection is up (a `Link`)."""

    def __init__(self) -> None:
        super().__init__()
        self.connection: int | None = None

    def ids(self) -> list[str]:
        return [json.loads(payload)["task_id"] for _t, payload, _q, _r in self.sent]


def command(outbox: DurableOutbox, clock: ManualClock, task_id: str, left_s: float) -> None:
    deadline = iso(clock.now() + timedelta(seconds=left_s))
    with outbox._db.atomic():
        outbox.enqueue("a/r/task/command/arm", {"task_id": task_id, "deadline": deadline})


def test_rows_wait_for_a_connection_and_go_a_window_at_a_time(tmp_path: Path) -> None:
    """SPEC 4.2: nothing is handed to paho while no connection is up; then at most `window`
    rows wait for a PUBACK, each PUBACK handing the next; a safe stop skips the window."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    clock = ManualClock(datetime(2026, 6, 24, 20, 0, tzinfo=UTC))
    outbox = DurableOutbox(db=db, clock=clock, window=2)
    outbox.expire_under("a/r/task/command/")
    wire = LinkWire()
    outbox.attach(wire)
    for n in range(4):
        command(outbox, clock, f"c{n}", 60)
    assert outbox.flush() == 0 and wire.sent == []  # the broker is away: they wait in the DB
    wire.connection = 1
    assert outbox.flush() == 2 and outbox.flush() == 0
    assert wire.ids() == ["c0", "c1"] and outbox.in_flight() == 2
    with db.atomic():
        outbox.enqueue("a/r/task/command/arm", {"task_id": "stop", "safe_stop": True})
    assert outbox.flush() == 1  # ahead of c2 and c3, the window full or not
    outbox.on_published(1)  # c0's PUBACK: c2 goes
    assert wire.ids() == ["c0", "c1", "stop", "c2"]
    assert outbox.acked == 1 and outbox.reap() == 1
    for mid in (2, 3, 4):
        outbox.on_published(mid)
    assert wire.ids() == ["c0", "c1", "stop", "c2", "c3"]
    db.close()


def test_a_new_connection_hands_what_was_not_acked_again_with_a_fresh_expiry(
    tmp_path: Path,
) -> None:
    """The rows in flight on a lost connection (the channel dropped paho's copies) go again on
    the next one, a safe stop first, each command's expiry computed then; one past its deadline
    is deleted unsent; a PUBACK of the old connection's mid no longer counts."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    clock = ManualClock(datetime(2026, 6, 24, 20, 0, tzinfo=UTC))
    outbox = DurableOutbox(db=db, clock=clock)
    outbox.expire_under("a/r/task/command/")
    wire = LinkWire()
    outbox.attach(wire)
    wire.connection = 1
    command(outbox, clock, "soon", 3)
    command(outbox, clock, "later", 60)
    assert outbox.flush() == 2
    assert wire.expiries == {"soon": 3, "later": 60}
    wire.connection = None  # lost before any PUBACK
    with db.atomic():
        outbox.enqueue("a/r/task/command/arm", {"task_id": "stop", "safe_stop": True})
    assert outbox.flush() == 0
    clock.advance(10)
    wire.connection = 2
    outbox.on_published(1)  # a late PUBACK of connection 1's mid: not this connection's
    assert outbox.acked == 0
    wire.expiries.clear()
    assert outbox.flush() == 2
    assert wire.ids()[2:] == ["stop", "later"]
    assert wire.expiries == {"stop": None, "later": 50}  # "soon" never: past its deadline
    assert [p["task_id"] for _, p in outbox.rows_under("a/r/task/command/")] == ["later", "stop"]
    db.close()

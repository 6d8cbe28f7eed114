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

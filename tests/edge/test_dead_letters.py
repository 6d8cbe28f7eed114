"""The inbound dead letters' bounds (SPEC §2.4, §5.5): count, bytes (each payload, and all of
them together), age through the retention pass, and `forget --all` leaving no byte of a
dead-lettered payload in the state DB's files. In-process: the app over a real SQLite file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.inbox import InboxDeadLetters
from edge.store.schema import MIGRATIONS
from tests.edge.test_app import ROOT, Robot

DAY = 86400
MARKER = "우리집 금고 번호 Dl4xMarkerQ8"
NEEDLES = [MARKER.split()[-2].encode(), b"Dl4xMarkerQ8"]


def letters(robot: Robot) -> list[tuple[int, int, str]]:
    return [
        (int(r[0]), int(r[1]), str(r[2]))
        for r in robot.rows("SELECT id, length(payload), error FROM inbox_dead ORDER BY id")
    ]


BOUNDS = {"max_payload_bytes": 16384, "dead_letters_keep": 5}


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[Robot]:
    robot = Robot(tmp_path, live=False, mqtt=BOUNDS)
    yield robot
    asyncio.run(robot.app.close())


def test_the_count_bound_keeps_the_newest(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    dead = InboxDeadLetters(db=db, clock=ManualClock(), keep=3)
    with db.atomic():
        for n in range(7):
            dead.add(f"{ROOT}/turn/request", f"payload {n}".encode(), "boom")
    assert [r["payload"] for r in dead.listing()] == ["payload 6", "payload 5", "payload 4"]
    assert dead.count() == 3


def test_a_payload_is_kept_at_most_max_payload_bytes(bounded: Robot) -> None:
    """A message refused outside its handler (the intake's last resort) may be of any size:
    its dead letter keeps `mqtt.max_payload_bytes` of it and says it was cut."""
    bounded.app.dead_letter(f"{ROOT}/turn/request", b"x" * 200_000, "boom")
    [(_id, size, error)] = letters(bounded)
    assert size == 16384
    assert error.startswith("payload cut at 16384 of 200000 bytes; boom")


def test_all_payloads_together_stay_under_dead_letters_max_kb(tmp_path: Path) -> None:
    bounded = Robot(tmp_path, live=False, mqtt={**BOUNDS, "dead_letters_max_kb": 64})
    for n in range(5):
        bounded.app.dead_letter(f"{ROOT}/turn/request", bytes([65 + n]) * 16000, "boom")
    kept = letters(bounded)
    assert sum(size for _id, size, _e in kept) <= 64 * 1024
    assert [size for _id, size, _e in kept] == [16000] * 4  # the oldest went
    assert bounded.rows("SELECT substr(payload, 1, 1) FROM inbox_dead ORDER BY id") == [
        (b"B",),
        (b"C",),
        (b"D",),
        (b"E",),
    ]
    # one that alone is past the bound is still kept (the newest always is), the rest go
    bounded.app.dead_letter(f"{ROOT}/turn/request", b"Z" * 16384, "boom")
    assert len(letters(bounded)) == 4
    asyncio.run(bounded.app.close())


def test_the_count_bound_holds_through_the_app(bounded: Robot) -> None:
    for n in range(8):
        bounded.app.dead_letter(f"{ROOT}/turn/request", f"p{n}".encode(), "boom")
    assert [bytes(r[0]) for r in bounded.rows("SELECT payload FROM inbox_dead ORDER BY id")] == [
        b"p3",
        b"p4",
        b"p5",
        b"p6",
        b"p7",
    ]


def test_retention_removes_dead_letters_past_their_days(bounded: Robot) -> None:
    bounded.app.dead_letter(f"{ROOT}/turn/request", b"old", "boom")
    bounded.clock.advance(6 * DAY)
    bounded.app.dead_letter(f"{ROOT}/turn/request", b"new", "boom")
    assert bounded.app.sweep() is False  # nothing is 7 days old yet
    assert len(letters(bounded)) == 2
    bounded.clock.advance(DAY + 1)
    assert bounded.app.sweep() is True
    assert [bytes(r[0]) for r in bounded.rows("SELECT payload FROM inbox_dead")] == [b"new"]
    bounded.clock.advance(6 * DAY)
    while bounded.app.sweep():
        pass
    assert letters(bounded) == []


def test_forget_all_leaves_no_byte_of_a_dead_lettered_payload(bounded: Robot) -> None:
    state = Path(bounded.settings.state_dir)
    body = f'{{"turn_id": "t-1", "recognized_text": "{MARKER}"}}'.encode()
    bounded.app.dead_letter(f"{ROOT}/turn/request", body, f"handler failed on {MARKER}")

    def holding() -> list[str]:
        found = []
        for path in sorted(p for p in state.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{path.name}: {n!r}" for n in NEEDLES if n in data]
        return found

    assert holding()  # it is there before
    answer = bounded.admin("a-1", "memory.forget", scope="all")
    assert answer["ok"] is True, answer
    assert letters(bounded) == []
    assert holding() == []

"""Which session a recorded utterance lands in, on a real SQLite file."""

from __future__ import annotations

import pytest

from a2a_common.clock import ManualClock
from cache.memory import Memory
from cache.model import SessionRow


def record(memory: Memory, turn_id: str, session: str | None = None) -> str:
    with memory.db.atomic():
        _pair, session_id = memory.record_utterance(
            turn_id=turn_id, requested_session=session, text="안녕"
        )
    return session_id


def test_a_session_goes_on_until_it_is_idle(memory: Memory, clock: ManualClock) -> None:
    first = record(memory, "t1")
    clock.advance(memory.policy.session_idle_s - 1)
    assert record(memory, "t2") == first
    clock.advance(memory.policy.session_idle_s)
    third = record(memory, "t3")
    assert third != first
    assert record(memory, "t4", session="asked-for") == "asked-for"
    assert memory.session_for(None, clock.now()) == "asked-for"


def test_a_turn_reads_the_latest_session_once(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(memory, "t1")
    reads: list[SessionRow | None] = []
    real = memory.store.latest_session

    def counted(person: str = "household") -> SessionRow | None:
        reads.append(row := real(person))
        return row

    monkeypatch.setattr(memory.store, "latest_session", counted)
    record(memory, "t2")
    assert len(reads) == 1

"""`a2a_agent.Task` on its own: seq numbering, nothing after the end, evidence allowlist, the
windows a handler can read (no broker: the reports go to a list)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from a2a_agent import Task

NOW = datetime(2026, 6, 24, 20, 1, 2, tzinfo=UTC)


def task(sent: list[dict[str, Any]], **command: Any) -> Task:
    body = {"task_id": "wf-1:move", "capability_id": "mobility", "operation_id": "move_to_room"}
    return Task(
        {**body, **command},
        lock=threading.RLock(),
        send=sent.append,
        clock=lambda: NOW,
        evidence_keys=frozenset({"arrived_room"}),
    )


def test_seq_grows_from_one_and_nothing_is_sent_after_the_end() -> None:
    sent: list[dict[str, Any]] = []
    t = task(sent)
    assert t.running() and not t.running()  # RUNNING once
    assert t.progress(40) and t.completed(arrived_room="안방", battery=80)
    assert not t.failed("late") and not t.cancelled()
    assert [(b["seq"], b["status"]) for b in sent] == [
        (1, "RUNNING"),
        (2, "PROGRESS"),
        (3, "COMPLETED"),
    ]
    assert sent[-1]["evidence"] == {"arrived_room": "안방"}  # battery is not terminal evidence
    assert sent[-1]["ts"] == "2026-06-24T20:01:02.000Z" and t.last == sent[-1] and t.terminal


def test_a_callback_can_be_numbered_without_being_sent() -> None:
    sent: list[dict[str, Any]] = []
    t = task(sent)
    held = t.callback("PROGRESS", progress=75)
    t.completed(arrived_room="안방")
    assert held is not None and held["seq"] == 1 and sent[0]["seq"] == 2


def test_windows_from_the_command_and_a_cancel_wakes_the_handler() -> None:
    ack = (NOW + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    t = task([], deadline="2026-06-24T20:03:02.120Z", ack_deadline=ack)
    assert t.ack_seconds_left() == 5.0 and t.seconds_left() == 120.12
    assert task([]).ack_seconds_left() is None  # older runtimes send no ack_deadline
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(t.wait_cancelled(10)))
    waiter.start()
    t._request_cancel("pui")
    waiter.join(10)
    assert woke == [True] and t.cancel_requested and t.cancel_reason == "pui"
    assert t.cancelled() and not t.completed()

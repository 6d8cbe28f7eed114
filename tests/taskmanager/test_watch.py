"""The shell of a cancel's confirmation (SPEC §4.2) on a real SQLite file: watches persist with
the cancel, survive a restart, re-arm while the cancel is still owed, end on confirmation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.outbound import DurableOutbox
from edge.publisher import TaskPublisher
from edge.schema import MIGRATIONS
from edge.topics import Topics
from taskmanager.catalog import load_catalog
from taskmanager.events import Callback
from taskmanager.service import TaskManager
from tests.taskmanager.helpers import MOVE_PURIFY, T0

ROOT = "a2a/robot-t"
MOVE = "wf-1:step_move"


def manager(
    path: Path, clock: ManualClock, owed: bool = False
) -> tuple[TaskManager, DurableOutbox]:
    db = open_state_db(path, MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=clock)
    publisher = TaskPublisher(topics=Topics("a2a", "robot-t"), outbox=outbox)
    tm = TaskManager(
        db=db,
        clock=clock,
        catalog=load_catalog(),
        publisher=publisher,
        unsent_cancels=publisher.owed_cancels if owed else None,
    )
    tm.reload()
    return tm, outbox


def cancels(outbox: DurableOutbox) -> int:
    return len(outbox.rows_under(f"{ROOT}/task/cancel/"))


def test_a_watch_outlives_a_restart_and_escalates_late_at_once(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.callback(Callback(MOVE, 1, "RUNNING"))
    assert tm.cancel(None, "pui").finished  # cancelled for the user at once
    assert cancels(outbox) == 1 and tm.next_deadline() is not None
    clock.advance(9)  # down through both windows
    again, outbox = manager(tmp_path / "s.db", clock)
    assert again.next_deadline() is not None and again.next_deadline() <= clock.now()
    result = again.tick()
    assert cancels(outbox) == 2 and result.commands == 1  # re-sent, and the safe stop
    [(_, stop)] = [r for r in outbox.rows_under(f"{ROOT}/task/command/") if r[1].get("safe_stop")]
    assert stop["operation_id"] == "stop" and again.alarms() == [MOVE]
    assert [r.body["event"]["status"] for r in result.reports] == ["CANCEL_UNCONFIRMED"]
    assert again.verdict(MOVE + "~safe_stop", 1, "RUNNING") == "apply"
    again.callback(Callback(MOVE + "~safe_stop", 1, "RUNNING"))
    assert again.alarms() == [MOVE]  # a stop under way confirms nothing
    again.callback(Callback(MOVE + "~safe_stop", 2, "COMPLETED"))
    assert again.alarms() == [] and again.next_deadline() is None
    # the agent's own CANCELLED after the stop confirmed: a new seq of an ended task
    assert again.verdict(MOVE, 2, "CANCELLED") == "terminal"
    assert again.verdict(MOVE + "~safe_stop", 3, "COMPLETED") == "duplicate"  # silent
    kinds = [t["kind"] for t in again.store.timeline("wf-1")]
    assert kinds[-2:] == ["safe_stop_callback", "cancel_confirmed"]


def test_a_cancel_still_owed_gets_its_window_from_when_it_goes_out(tmp_path: Path) -> None:
    """The CLI cancelled while no service ran: its cancel sits in the outbox; the service that
    starts later must not escalate before the agent could even hear it."""
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock, owed=True)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.callback(Callback(MOVE, 1, "RUNNING"))
    tm.cancel("wf-1", "user")
    clock.advance(3600)
    started, outbox = manager(tmp_path / "s.db", clock, owed=True)
    assert started.next_deadline() == clock.now() + timedelta(seconds=2)
    started.tick()
    assert cancels(outbox) == 1 and started.alarms() == []

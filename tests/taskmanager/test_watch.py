"""The shell of a cancel's confirmation (SPEC §4.2) on a real SQLite file: watches persist with
the cancel, survive a restart, re-arm while the cancel is still owed, end on confirmation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from taskmanager.catalog import load_catalog
from taskmanager.events import Callback
from taskmanager.service import TaskManager
from tests.taskmanager.helpers import MOVE_PURIFY, T0, ReportSink, task_publisher

ROOT = "a2a/robot-t"
MOVE = "wf-1:step_move"
SINK = ReportSink()


def manager(
    path: Path, clock: ManualClock, owed: bool = False
) -> tuple[TaskManager, DurableOutbox]:
    db = open_state_db(path, MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=clock)
    publisher = task_publisher(outbox, SINK)
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
    assert [r.body["event"]["status"] for r in SINK.reports[-1:]] == ["CANCEL_UNCONFIRMED"]
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


MOVE_ONLY = {**MOVE_PURIFY, "steps": MOVE_PURIFY["steps"][:1]}


def commands(outbox: DurableOutbox, workflow_id: str) -> list[dict[str, object]]:
    rows = outbox.rows_under(f"{ROOT}/task/command/")
    return [c for _, c in rows if c["workflow_id"] == workflow_id and not c.get("safe_stop")]


def test_a_cancelled_task_holds_its_resource_until_its_stop_is_confirmed(tmp_path: Path) -> None:
    """SPEC 4.2: the stop of a cancelled move must not hit the next move on `base`."""
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_ONLY, source="planner")
    assert tm.cancel(None, "pui").finished  # cancelled for the user at the press
    clock.advance(0.2)
    tm.submit({**MOVE_ONLY, "workflow_id": "wf-2"}, source="planner")
    assert commands(outbox, "wf-2") == []  # waits for `base`
    clock.advance(9)  # both windows: the safe stop goes, the resource stays held
    tm.tick()
    assert tm.alarms() == [MOVE] and commands(outbox, "wf-2") == []
    again, outbox = manager(tmp_path / "s.db", clock)  # a restart keeps the fence
    again.tick()
    assert commands(outbox, "wf-2") == []
    again.callback(Callback(MOVE + "~safe_stop", 1, "COMPLETED"))
    [move] = commands(outbox, "wf-2")
    assert move["operation_id"] == "move_to_room" and again.alarms() == []


def test_the_agents_terminal_callback_frees_the_resource(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_ONLY, source="planner")
    tm.callback(Callback(MOVE, 1, "RUNNING"))
    tm.cancel("wf-1", "user")
    tm.submit({**MOVE_ONLY, "workflow_id": "wf-2"}, source="planner")
    tm.submit({**MOVE_ONLY, "workflow_id": "wf-3"}, source="planner")
    assert commands(outbox, "wf-2") == []
    tm.callback(Callback(MOVE, 2, "CANCELLED"))
    assert len(commands(outbox, "wf-2")) == 1 and commands(outbox, "wf-3") == []  # FIFO


def test_a_repeated_confirmation_is_a_silent_duplicate(tmp_path: Path) -> None:
    """SPEC 2.2: the confirming seq is applied; its repeat is a duplicate, not `terminal`."""
    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.cancel(None, "pui")
    assert tm.verdict(MOVE, 2, "CANCELLED") == "apply"
    tm.callback(Callback(MOVE, 2, "CANCELLED"))
    assert tm.verdict(MOVE, 2, "CANCELLED") == "duplicate"
    assert tm.verdict(MOVE, 3, "RUNNING") == "terminal"
    again, _ = manager(tmp_path / "s.db", clock)  # on disk too
    assert again.verdict(MOVE, 2, "CANCELLED") == "duplicate"


def test_a_confirmation_after_the_prune_says_the_workflows_last_status(tmp_path: Path) -> None:
    """Pruned while the alarm stood: the event carries what the workflow last was."""
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.cancel(None, "pui")
    ended = tm.store.get("wf-1")
    assert ended is not None
    clock.advance(9)
    tm.tick()
    tm.store.prune_ended("9999-01-01T00:00:00Z", 100)
    assert tm.store.get("wf-1") is None
    tm.callback(Callback(MOVE + "~safe_stop", 1, "COMPLETED"))
    events = [p for _, p in outbox.rows_under(f"{ROOT}/workflow/event")]
    [confirmed] = [e for e in events if e["status"] == "CANCEL_CONFIRMED"]
    assert confirmed["workflow_status"] == ended["status"] == "cancelled"
    assert confirmed["etag"] == ended["etag"] != 0


def test_a_confirmation_reads_the_ended_workflow_once_for_its_watch_and_trace(
    tmp_path: Path,
) -> None:
    """The watch's report and the trace's etag come from one read of the ended workflow (issue
    36: the same row was read three times); recording the confirming seq reads it once more."""
    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.callback(Callback(MOVE, 1, "RUNNING"))
    tm.cancel(None, "pui")
    reads: list[str] = []
    tm.store._db.conn.set_trace_callback(
        lambda sql: reads.append(sql) if sql.startswith("SELECT doc FROM workflows") else None
    )
    tm.callback(Callback(MOVE, 2, "CANCELLED"))
    assert tm.alarms() == [] and len(reads) == 2
    assert tm.store.timeline("wf-1")[-1]["kind"] == "cancel_confirmed"

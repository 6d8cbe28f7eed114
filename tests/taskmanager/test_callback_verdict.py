"""Who may speak for a task, and when (SPEC §2, §4.5, §4.2; issue 30 items 2 and 13): the
TaskManager's verdict on a callback before anything is written. A callback on another
capability's topic is `wrong_capability` (also for a cancelled task whose stop is awaited: it
never confirms it); one for a step not dispatched, or under an attempt never sent, is
`not_dispatched`, so the real agent's seq 1..n stay free."""

from __future__ import annotations

from pathlib import Path

from a2a_common.clock import ManualClock
from taskmanager.events import Callback
from tests.taskmanager.helpers import MOVE_PURIFY, T0
from tests.taskmanager.test_watch import manager

MOVE = "wf-1:step_move"
PURIFY = "wf-1:step_purify"  # depends on the move: QUEUED until it completes


def test_a_queued_step_takes_no_callback_and_its_seq_stays_free(tmp_path: Path) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    tm.submit(MOVE_PURIFY, source="planner")
    for seq in range(1, 21):  # on main: "apply" (and the app marked each seq seen)
        assert tm.verdict(PURIFY, seq, "COMPLETED") == "not_dispatched"
        assert tm.verdict(PURIFY, seq, "RUNNING", capability_id="air_purifier") == (
            "not_dispatched"
        )
    tm.callback(Callback(MOVE, 1, "COMPLETED", evidence={"arrived_room": "안방"}))
    for seq, status in enumerate(("RUNNING", "PROGRESS", "COMPLETED"), start=1):
        assert tm.verdict(PURIFY, seq, status, capability_id="air_purifier") == "apply"
        tm.callback(Callback(PURIFY, seq, status))
    assert tm.verdict(PURIFY, 3, "COMPLETED") == "duplicate"


def test_a_callback_under_an_attempt_never_sent_is_refused(tmp_path: Path) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    tm.submit(MOVE_PURIFY, source="planner")  # the move: dispatched, attempt 1
    assert tm.verdict(MOVE, 1, "RUNNING", attempt=2) == "not_dispatched"
    assert tm.verdict(MOVE, 1, "RUNNING", attempt=1) == "apply"
    assert tm.verdict(MOVE, 1, "RUNNING") == "apply"  # `attempt` is optional


def test_only_the_tasks_own_capability_speaks_for_it(tmp_path: Path) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    tm.submit(MOVE_PURIFY, source="planner")
    assert tm.verdict(MOVE, 1, "RUNNING", capability_id="display") == "wrong_capability"
    assert tm.verdict(MOVE, 1, "RUNNING", capability_id="mobility") == "apply"
    assert tm.verdict(MOVE, 1, "RUNNING") == "apply"  # the shared topic of the first contract
    assert tm.verdict(PURIFY, 1, "RUNNING", capability_id="mobility") == "wrong_capability"
    assert tm.verdict("wf-none:step", 1, "RUNNING", capability_id="mobility") == "unknown"


def test_another_capability_never_confirms_a_cancel_nor_a_safe_stop(tmp_path: Path) -> None:
    """On main anyone's CANCELLED confirmed the mobility agent's stop (item 2)."""
    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.callback(Callback(MOVE, 1, "RUNNING"))
    tm.cancel(None, "pui")
    assert tm.verdict(MOVE, 2, "CANCELLED", capability_id="display") == "wrong_capability"
    stop = MOVE + "~safe_stop"
    assert tm.verdict(stop, 1, "COMPLETED", capability_id="air_purifier") == "wrong_capability"
    assert tm.alarms() == [] and tm.verdict(MOVE, 2, "CANCELLED", capability_id="mobility") == (
        "apply"
    )
    again, _ = manager(tmp_path / "s.db", clock)  # after a restart: the watch on disk says
    assert again.verdict(MOVE, 2, "CANCELLED", capability_id="speaker") == "wrong_capability"
    assert again.verdict(MOVE, 2, "CANCELLED", capability_id="mobility") == "apply"

"""The TaskManager shell against a real SQLite file: persistence, recovery, validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from taskmanager.catalog import load_catalog, parse_catalog
from taskmanager.core import Callback
from taskmanager.errors import CatalogError
from taskmanager.service import TaskManager
from tests.taskmanager.helpers import MOVE_PURIFY, T0, ReportSink, task_publisher

ROOT = "a2a/robot-t"


def manager(
    path: Path, clock: ManualClock, sink: ReportSink | None = None
) -> tuple[TaskManager, DurableOutbox]:
    db = open_state_db(path, MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=clock)
    publisher = task_publisher(outbox, sink)
    tm = TaskManager(db=db, clock=clock, catalog=load_catalog(), publisher=publisher)
    tm.reload()
    return tm, outbox


def test_transitions_and_their_messages_are_persisted_together(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    result = tm.submit(MOVE_PURIFY, source="planner")
    assert result.accepted == ["wf-1"]
    rows = outbox.rows_under(f"{ROOT}/task/command/")
    assert [p["task_id"] for _, p in rows] == ["wf-1:step_move"]
    assert tm.store.get("wf-1")["etag"] == 1  # type: ignore[index]
    trace = tm.store.timeline("wf-1")
    assert trace[0]["kind"] == "request" and trace[0]["request"] == MOVE_PURIFY
    assert trace[1]["kind"] == "accepted" and trace[1]["steps"] == ["step_move", "step_purify"]


def test_restart_resends_unacked_command_with_higher_attempt(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, _outbox = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")  # the command never reached the broker
    clock.advance(30)
    tm2, outbox2 = manager(tmp_path / "s.db", clock)
    assert list(tm2.board.workflows) == ["wf-1"]
    [(_row_id, payload)] = outbox2.rows_under(f"{ROOT}/task/command/")
    result = tm2.redispatch([payload["task_id"], "wf-1:step_purify"])
    assert result.commands == 1  # step_purify was not dispatched: nothing to resend
    [_old, (_row_id, fresh)] = outbox2.rows_under(f"{ROOT}/task/command/")
    assert fresh["task_id"] == "wf-1:step_move" and fresh["attempt"] == 2
    assert fresh["deadline"] == payload["deadline"]  # the deadline instant is kept


def test_deadlines_survive_a_restart_and_late_ones_fire(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.callback(Callback("wf-1:step_move", 1, "RUNNING"))
    clock.advance(500)  # the runtime was down past the move's 120 s timeout
    tm2, outbox2 = manager(tmp_path / "s.db", clock)
    assert tm2.next_deadline() is not None and tm2.next_deadline() < clock.now()  # type: ignore[operator]
    tm2.tick()
    cancels = outbox2.rows_under(f"{ROOT}/task/cancel/")
    assert [p["reason"] for _, p in cancels] == ["timeout"]


def test_rejected_request_is_recorded_with_its_reason(tmp_path: Path) -> None:
    tm, outbox = manager(tmp_path / "s.db", ManualClock(T0))
    bad: dict[str, Any] = {
        **MOVE_PURIFY,
        "steps": [
            {"step_id": "a", "capability_id": "mobility", "operation_id": "move_to_room"},
            {
                "step_id": "b",
                "capability_id": "mobility",
                "operation_id": "move_to_room",
                "depends_on": ["c"],
            },
        ],
    }
    result = tm.submit(bad, source="planner")
    assert result.accepted == [] and "depends_on c" in result.rejected[0][1]
    assert tm.store.get("wf-1")["status"] == "rejected"  # type: ignore[index]
    assert outbox.rows_under(f"{ROOT}/task/command/") == []
    # issue 16: only accepted workflows reserve their id; a refused request does not use it up
    again = tm.submit(MOVE_PURIFY, source="planner")
    assert again.accepted == ["wf-1"] and tm.store.get("wf-1")["status"] == "running"  # type: ignore[index]
    third = tm.submit(MOVE_PURIFY, source="planner")
    assert third.accepted == [] and third.ignored[0].reason == "duplicate"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {
                "steps": [
                    {"step_id": "a", "capability_id": "mobility", "operation_id": "move_to_room"},
                    {"step_id": "a", "capability_id": "mobility", "operation_id": "move_to_room"},
                ]
            },
            "duplicate step_id a",
        ),
        (
            {
                "steps": [
                    {
                        "step_id": "a",
                        "capability_id": "mobility",
                        "operation_id": "move_to_room",
                        "depends_on": ["a"],
                    }
                ]
            },
            "not an earlier step",
        ),
        (
            {
                "steps": [
                    {
                        "step_id": "a",
                        "capability_id": "mobility",
                        "operation_id": "move_to_room",
                        "timeout_s": 99999,
                    }
                ]
            },
            "timeout_s",
        ),
        ({"steps": [{"step_id": "w", "kind": "wait"}]}, "wait_s"),
        (
            {"steps": [{"step_id": f"s{i}", "kind": "wait", "wait_s": 1} for i in range(65)]},
            "more than 64 steps",
        ),
        ({"steps": []}, "steps"),
        ({"workflow_id": "has:colon"}, "workflow_id"),
    ],
)
def test_validation_rules(tmp_path: Path, change: dict[str, Any], reason: str) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    result = tm.submit({**MOVE_PURIFY, **change}, source="planner")
    assert result.accepted == []
    assert reason in result.rejected[0][1]


def test_bad_experience_is_refused_but_the_plan_runs(tmp_path: Path) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    experience = {
        "contract_version": "a2a-experience-policy-v1",
        "experience_id": "exp-1",
        "plan_binding": {"plan_id": "room_clean", "step_ids": ["step_move"], "step_count": 1},
    }
    result = tm.submit({**MOVE_PURIFY, "experience": experience}, source="planner")
    assert result.accepted == ["wf-1"]
    wf = tm.board.workflows["wf-1"]
    assert wf.experience is None
    assert wf.experience_refusal is not None and "step_ids" in wf.experience_refusal
    good = {
        **experience,
        "plan_binding": {
            "plan_id": "room_clean",
            "step_ids": ["step_move", "step_purify"],
            "step_count": 2,
        },
        "decision_budget": {"max_decisions": 1, "max_replans": 0},
    }
    tm.submit({**MOVE_PURIFY, "workflow_id": "wf-2", "experience": good}, source="planner")
    wf2 = tm.board.workflows["wf-2"]
    assert wf2.experience_id == "exp-1" and wf2.max_decisions == 1 and wf2.max_replans == 0


def test_consent_in_a_request_grants_nothing_only_a_held_grant_does(tmp_path: Path) -> None:
    tm, outbox = manager(tmp_path / "s.db", ManualClock(T0))
    db = tm._db
    vital = {
        "workflow_id": "wf-v",
        "consents": ["vital_app", "vital_app.start_session"],
        "steps": [
            {
                "step_id": "v",
                "capability_id": "vital_app",
                "operation_id": "start_session",
                "consent": True,
            }
        ],
    }
    assert tm.submit(vital, source="planner").rejected == [("wf-v", "consent_required")]
    task = {"capability_id": "vital_app", "operation_id": "start_session", "consent": True}
    assert tm.submit_task(task, fallback_id="task-v").rejected == [("task-v", "consent_required")]
    held = {"vital_app"}  # the register's seam: edge passes its held capabilities in
    tm = TaskManager(
        db=db,
        clock=ManualClock(T0),
        catalog=load_catalog(),
        publisher=task_publisher(outbox),
        held_capabilities=lambda _person: frozenset(held),
    )
    assert tm.submit({**vital, "workflow_id": "wf-v2"}, source="planner").accepted == ["wf-v2"]
    assert tm.needing("vital_app") == ["wf-v2"] and tm.needing("mobility") == []


def test_task_request_runs_as_a_one_step_workflow(tmp_path: Path) -> None:
    tm, outbox = manager(tmp_path / "s.db", ManualClock(T0))
    result = tm.submit_task(
        {"capability_id": "air_purifier", "operation_id": "stop"}, fallback_id="task-abc"
    )
    assert result.accepted == ["task-abc"]
    [(_, payload)] = outbox.rows_under(f"{ROOT}/task/command/air_purifier")
    assert payload["task_id"] == "task-abc:task"


def test_catalog_is_validated() -> None:
    assert len(load_catalog()) == 14  # 6 capabilities of SPEC §4.1, 5 of them with a new stop
    with pytest.raises(CatalogError) as info:
        parse_catalog(
            {"mobility": {"move_to_room": {"timeout_s": -1, "ack_timeout_s": 1}}}, "custom.json"
        )
    assert "custom.json:mobility.move_to_room.timeout_s" in str(info.value)
    with pytest.raises(CatalogError):
        parse_catalog({"mobility": {}}, "custom.json")


def test_a_cancel_says_itself_whether_the_workflow_ended_or_was_never_here(
    tmp_path: Path,
) -> None:
    tm, _ = manager(tmp_path / "s.db", ManualClock(T0))
    assert [i.reason for i in tm.cancel("wf-never", "pui").ignored] == ["unknown_workflow"]
    tm.submit(MOVE_PURIFY, source="planner")
    assert tm.cancel("wf-1", "pui").finished
    assert [i.reason for i in tm.cancel("wf-1", "pui").ignored] == ["ended"]


def test_every_effect_leaves_by_the_publisher(tmp_path: Path) -> None:
    """Commands, cancels, events and reports alike: the one road (no report in a Result)."""
    sink = ReportSink()
    tm, outbox = manager(tmp_path / "s.db", ManualClock(T0), sink)
    tm.submit(MOVE_PURIFY, source="planner")
    tm.cancel("wf-1", "user")
    assert [r.body["event"]["status"] for r in sink.reports][-1] == "WORKFLOW_CANCELLED"
    assert outbox.rows_under(f"{ROOT}/task/cancel/")

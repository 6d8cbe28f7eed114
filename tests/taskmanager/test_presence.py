"""SPEC §4.8 in the pure core and the shell: what an agent's status does to its tasks, the
catalog's policies, and the boot a task was dispatched under (persisted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2a_common.clock import ManualClock
from taskmanager.catalog import parse_catalog
from taskmanager.errors import CatalogError
from taskmanager.events import Command, Decide, Presence, Report
from tests.taskmanager.helpers import CATALOG, MOVE_PURIFY, T0, Run, workflow
from tests.taskmanager.test_service import ROOT, manager

PURIFY = {
    "workflow_id": "wf-p",
    "plan_id": "p",
    "steps": [
        {
            "step_id": "s",
            "capability_id": "air_purifier",
            "operation_id": "start",
            "args": {"mode": "auto"},
        },
    ],
}
SHOW = {
    "workflow_id": "wf-d",
    "plan_id": "p",
    "steps": [
        {
            "step_id": "s",
            "capability_id": "display",
            "operation_id": "show_content",
            "args": {},
            "timeout_s": 60,
        },
    ],
}


def online(run: Run, cap: str, boot: str, *tasks: str, at: float | None = None) -> None:
    run(Presence(cap, "online", boot, frozenset(tasks)), at=at)


def test_every_shipped_operation_sets_both_policies_and_no_motion_is_resent() -> None:
    data = json.loads((Path(__file__).parents[2] / "taskmanager/catalog.json").read_text())
    for cap, ops in data.items():
        for op, spec in ops.items():
            if op == "safe_stop":
                continue
            assert spec["on_agent_lost"] in ("fail", "wait"), (cap, op)
            assert spec["on_restart"] in ("fail", "resend"), (cap, op)
            if spec.get("resource") == "base":
                assert spec["on_restart"] == "fail", (cap, op)


def test_motion_with_resend_is_a_config_error() -> None:
    bad = {
        "mobility": {
            "go": {"timeout_s": 5, "ack_timeout_s": 1, "resource": "base", "on_restart": "resend"}
        }
    }
    with pytest.raises(CatalogError, match="on_restart"):
        parse_catalog(bad, "x.json")
    wrong = {"lamp": {"on": {"timeout_s": 5, "ack_timeout_s": 1, "on_agent_lost": "retry"}}}
    with pytest.raises(CatalogError, match="on_agent_lost"):
        parse_catalog(wrong, "x.json")


def test_offline_fails_a_running_move_agent_lost_and_cancels_its_dependants() -> None:
    run = Run()
    online(run, "mobility", "b1")
    run.submit(workflow())
    run.cb("wf-1:step_move", 1, "RUNNING", at=1)
    out = run(Presence("mobility", "offline", "b1"), at=2)
    wf = out.changed[0]
    assert (wf.steps[0].status, wf.steps[0].reason) == ("FAILED", "agent_lost")
    reports = [e for e in out.effects if isinstance(e, Report)]
    assert reports and reports[0].decision_requested  # a decision event within the budget
    out = run(Decide("wf-1", None), at=3)  # no decision came: the dependant is cancelled
    assert out.changed[0].steps[1].status == "CANCELLED"
    assert out.changed[0].status == "failed"


def test_wait_keeps_the_task_and_a_step_dispatched_to_an_offline_agent_fails_at_once() -> None:
    run = Run()
    run(Presence("air_purifier", "offline", "b1"))
    run(Presence("mobility", "offline", "b1"))
    out = run.submit(workflow())
    wf = out.changed[0]
    assert (wf.steps[0].status, wf.steps[0].reason) == ("FAILED", "agent_offline")
    assert wf.awaiting_decision == "step_move"  # a decision event, as any failure
    assert not [e for e in out.effects if isinstance(e, Command)]  # nothing sent
    out = run.submit(workflow(PURIFY))  # on_agent_lost: wait — sent all the same
    assert out.changed[0].steps[0].status == "DISPATCHED"


def test_a_restarted_agent_gets_a_resend_or_the_task_fails_agent_restarted() -> None:
    run = Run()
    online(run, "mobility", "b1")
    online(run, "display", "d1")
    run.submit(workflow())
    run.submit(workflow(SHOW))
    run.cb("wf-1:step_move", 1, "RUNNING", at=1)
    run.cb("wf-d:s", 1, "RUNNING", at=1)
    run.cb("wf-d:s", 2, "PROGRESS", at=1)
    out = run(Presence("display", "online", "d2"), at=3)
    step = out.changed[0].steps[0]
    [command] = [e for e in out.effects if isinstance(e, Command)]
    assert command.payload["task_id"] == "wf-d:s" and command.payload["attempt"] == 2
    assert (step.status, step.boot_id, step.last_seq, step.epoch_attempt) == (
        "DISPATCHED",
        "d2",
        0,
        2,
    )
    out = run(Presence("mobility", "online", "b2"), at=4)
    move = out.changed[0].steps[0]
    assert (move.status, move.reason) == ("FAILED", "agent_restarted")
    online(run, "display", "d3", "wf-d:s", at=5)  # it lists the task: still its own
    assert run.board.workflows["wf-d"].steps[0].status == "DISPATCHED"


def test_a_task_sent_to_an_offline_agent_is_resent_to_its_new_boot() -> None:
    """`wait` sends the command to an agent known offline (its will names the boot that died);
    that boot never heard it, so the new boot, not listing it, gets it again (found by the
    simulator, tests/devicesim/agents.py: the step adopted the new boot and timed out)."""
    run = Run()
    online(run, "air_purifier", "a1")
    run(Presence("air_purifier", "offline", "a1"), at=1)
    out = run.submit(workflow(PURIFY))
    assert out.changed[0].steps[0].status == "DISPATCHED"
    out = run(Presence("air_purifier", "online", "a2"), at=2)
    [command] = [e for e in out.effects if isinstance(e, Command)]
    assert (command.payload["task_id"], command.payload["attempt"]) == ("wf-p:s", 2)
    assert run.board.workflows["wf-p"].steps[0].boot_id == "a2"


def test_a_resend_only_before_its_deadline() -> None:
    run = Run()
    online(run, "display", "d1")
    run.submit(workflow(SHOW))
    run.cb("wf-d:s", 1, "RUNNING", at=1)
    board = run.board  # the tick has not run yet: the deadline passed meanwhile
    run.board = board
    out = run(Presence("display", "online", "d2"), at=61)
    assert out.changed[0].steps[0].reason in ("agent_restarted", "timeout")


def test_the_boot_is_persisted_and_a_restart_of_the_runtime_meets_it(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, _ = manager(tmp_path / "s.db", clock)
    agent, result = tm.presence("mobility", "online", "b1", (), None)
    tm.agents.commit(agent)
    tm.submit(MOVE_PURIFY, source="planner")
    clock.advance(2)
    tm2, _outbox = manager(tmp_path / "s.db", clock)  # a power cut: the runtime starts again
    assert tm2.board.workflows["wf-1"].steps[0].boot_id == "b1"
    assert tm2.held_by_agents() == {"mobility"}
    assert [a.boot_id for a in tm2.agents.all.values()] == ["b1"]  # shown, not acted on
    agent, result = tm2.presence("mobility", "online", "b2", (), None)
    assert result.commands == 0  # never re-sent to the new boot
    move = tm2.board.workflows["wf-1"].steps[0]
    assert (move.status, move.reason) == ("FAILED", "agent_restarted")
    trace = [t for t in tm2.store.timeline("wf-1") if t["kind"] == "presence"]
    assert trace[0]["at_start"] is True and trace[0]["outcome"] == "failed"


def test_an_unknown_capability_is_kept_and_never_acted_on(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    before = len(outbox.rows_under(f"{ROOT}/"))
    agent, result = tm.presence("toaster", "offline", "t1", (), None)
    assert not agent.known and not result.finished and result.commands == 0
    assert len(outbox.rows_under(f"{ROOT}/")) == before
    assert [a.capability_id for a in tm.agents.store.list()] == ["toaster"]
    assert CATALOG.get("toaster", "x") is None

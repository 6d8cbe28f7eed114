"""The pure state machine: every transition and the terminal races."""

from __future__ import annotations

from taskmanager.board import next_deadline
from taskmanager.core import Cancel, Decide, Emit, Tick
from taskmanager.model import Step
from tests.taskmanager.helpers import MOVE_PURIFY, Run, workflow

MOVE, PURIFY = "wf-1:step_move", "wf-1:step_purify"


def test_dependency_dispatches_only_after_completed() -> None:
    run = Run()
    run.submit()
    assert run.commands() == [MOVE]
    assert run.status() == "running"
    run.cb(MOVE, 1, "RUNNING", at=1)
    run.cb(MOVE, 2, "PROGRESS", progress=40, at=2)
    assert run.commands() == [MOVE]
    run.cb(MOVE, 3, "COMPLETED", evidence={"arrived_room": "안방"}, at=30)
    assert run.commands() == [MOVE, PURIFY]
    run.cb(PURIFY, 1, "COMPLETED", at=31)
    assert run.status() == "completed"
    assert run.board.workflows == {}
    statuses = [s for _, s in run.events()]
    assert statuses[0] == "WORKFLOW_ACCEPTED" and statuses[-1] == "WORKFLOW_COMPLETED"
    assert ("step_move", "PROGRESS") in run.events()


def test_command_payload_and_deadline() -> None:
    run = Run()
    run.submit()
    from taskmanager.core import Command

    payload = run.of(Command)[0].payload
    assert payload == {
        "task_id": MOVE,
        "workflow_id": "wf-1",
        "step_id": "step_move",
        "capability_id": "mobility",
        "operation_id": "move_to_room",
        "args": {"room": "안방"},
        "attempt": 1,
        "issued_at": "2026-06-24T20:00:00.000Z",
        "ack_deadline": "2026-06-24T20:00:05.000Z",  # SPEC 2.1: the agent's ack window
        "deadline": "2026-06-24T20:02:00.000Z",
    }


def test_etag_grows_by_one_per_change() -> None:
    run = Run()
    etags = [run.submit().changed[0].etag]
    for seq, status in enumerate(["RUNNING", "PROGRESS", "COMPLETED"], start=1):
        etags.append(run.cb(MOVE, seq, status).changed[0].etag)
    assert etags == [1, 2, 3, 4]
    from taskmanager.core import Emit

    last = [e.payload for e in run.last.effects if isinstance(e, Emit)] if run.last else []
    assert {p["etag"] for p in last} == {4}


def test_duplicate_and_stale_callbacks_ignored() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 2, "PROGRESS", progress=50)
    before = run.board
    out = run.cb(MOVE, 2, "PROGRESS", progress=50)
    assert out.changed == [] and run.ignored() == ["duplicate"]
    run.cb(MOVE, 1, "RUNNING")  # arrived late, lower seq
    assert run.ignored() == ["duplicate", "duplicate"]
    assert run.board == before


def test_out_of_order_completed_then_progress() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 3, "COMPLETED")
    run.cb(MOVE, 2, "PROGRESS")
    assert run.ignored() == ["late"]
    assert run.commands() == [MOVE, PURIFY]


def test_unknown_and_undispatched_tasks() -> None:
    run = Run()
    run.submit()
    run.cb("wf-9:step_x", 1, "RUNNING")
    run.cb(PURIFY, 1, "RUNNING")
    assert run.ignored() == ["unknown_task", "not_dispatched"]


def test_ack_timeout_cancels_and_fails_dependants() -> None:
    run = Run()
    run.submit()
    assert next_deadline(run.board) == run.now.replace(second=5)
    run(Tick(), at=4.9)
    assert run.cancels() == []
    run(Tick(), at=5)
    assert run.cancels() == [(MOVE, "timeout")]
    wf = run.board.workflows["wf-1"]
    assert wf.step("step_move").status == "TIMEOUT"  # type: ignore[union-attr]
    assert wf.step("step_move").reason == "ack_timeout"  # type: ignore[union-attr]
    assert wf.awaiting_decision == "step_move"  # the supervisor is asked first
    assert run.reports()[-1].decision_requested
    run(Decide("wf-1", None), at=6)
    assert run.status() == "failed"
    assert ("step_purify", "CANCELLED") in run.events()
    purify = [
        e
        for e in run.effects
        if getattr(e, "payload", {}).get("step_id") == "step_purify"
        and e.payload.get("status") == "CANCELLED"
    ]
    assert purify[0].payload["reason"] == "dependency"


def test_run_timeout_after_ack() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "RUNNING", at=1)
    run(Tick(), at=60)
    assert run.cancels() == []
    run(Tick(), at=120)
    assert run.cancels() == [(MOVE, "timeout")]


def test_completed_and_timeout_at_the_same_instant_completed_first() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "RUNNING", at=1)
    run.cb(MOVE, 2, "COMPLETED", at=120)
    run(Tick(), at=120)
    assert run.cancels() == []
    assert run.commands() == [MOVE, PURIFY]


def test_completed_and_timeout_at_the_same_instant_timeout_first() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "RUNNING", at=1)
    run(Tick(), at=120)
    run.cb(MOVE, 2, "COMPLETED", at=120)
    assert run.ignored() == ["late"]
    assert run.commands() == [MOVE]


def test_pui_cancel_mid_move() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "RUNNING", at=1)
    run(Cancel(None, "pui"), at=2)
    assert run.cancels() == [(MOVE, "pui")]  # only the dispatched task gets a cancel
    assert run.status() == "cancelled"
    assert run.board.workflows == {}
    assert run.commands() == [MOVE]  # no replacement action
    reasons = {
        s: r
        for (s, st), r in zip(
            run.events(),
            [
                e.payload["reason"]
                for e in run.effects
                if hasattr(e, "payload")
                and e.payload.get("workflow_id") == "wf-1"
                and "etag" in e.payload
            ],
            strict=False,
        )
        if st == "CANCELLED"
    }
    assert reasons == {"step_move": "pui", "step_purify": "pui"}
    final = [r for r in run.reports() if r.body["event"].get("status") == "WORKFLOW_CANCELLED"]
    assert final and final[0].body["event"]["evidence"] == {"cancelled_by_pui": True}
    assert not any(r.decision_requested for r in run.reports())


def test_pui_cancel_while_a_dependant_is_about_to_dispatch() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "COMPLETED", at=1)  # purify dispatched in the same decide
    run(Cancel("wf-1", "pui"), at=1)
    assert run.cancels() == [(PURIFY, "pui")]
    assert run.status() == "cancelled"


def test_resource_fifo_across_workflows() -> None:
    run = Run()
    run.submit(workflow(workflow_id="wf-a"))
    run.submit(workflow(workflow_id="wf-b"))
    run.submit(workflow(workflow_id="wf-c"))
    assert run.commands() == ["wf-a:step_move"]  # one body, one move at a time
    run.cb("wf-a:step_move", 1, "COMPLETED")
    # FIFO by readiness: wf-b's move was waiting for the base before wf-a's purify was ready
    assert run.commands() == ["wf-a:step_move", "wf-b:step_move", "wf-a:step_purify"]
    run.cb("wf-b:step_move", 1, "FAILED", reason="path_blocked")
    run(Decide("wf-b", None))
    assert run.commands()[-1] == "wf-c:step_move"


def test_wait_step_completes_by_itself() -> None:
    raw = {
        "workflow_id": "wf-rest",
        "steps": [
            {"step_id": "guide", "capability_id": "content", "operation_id": "play_guidance"},
            {"step_id": "rest", "kind": "wait", "wait_s": 600, "depends_on": ["guide"]},
        ],
    }
    run = Run()
    run.submit(workflow(raw))
    run.cb("wf-rest:guide", 1, "COMPLETED", at=10)
    wf = run.board.workflows["wf-rest"]
    assert wf.step("rest").status == "RUNNING"  # type: ignore[union-attr]
    run(Tick(), at=609)
    assert "wf-rest" in run.board.workflows
    run(Tick(), at=610)
    assert run.status("wf-rest") == "completed"


def test_needs_user_input_waits_for_the_user() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "NEEDS_USER_INPUT", reason="door_closed")
    assert run.status() == "waiting_user"
    assert run.reports()[-1].decision_requested
    run.cb(MOVE, 2, "RUNNING")
    assert run.status() == "running"


def test_an_unanswered_question_fails_the_workflow_user_timeout() -> None:
    """Before: the expired ask left the workflow waiting_user until the step's own timeout."""
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "NEEDS_USER_INPUT", reason="door_closed", at=0, ask_timeout_s=60)
    run(Decide("wf-1", None), at=1)  # the supervisor had nothing to say
    run(Tick(), at=59)
    assert run.status() == "waiting_user"
    run(Tick(), at=61)  # well before the move's own 120 s timeout
    assert run.status() == "failed"
    assert (MOVE, "timeout") in run.cancels()
    assert ("step_move", "TIMEOUT") in run.events()
    [ended] = [e for e in run.of(Emit) if e.payload["status"] == "WORKFLOW_FAILED"]
    assert ended.payload["reason"] == "user_timeout"
    assert run.reports()[-1].body["event"] == {
        "status": "WORKFLOW_FAILED",
        "reason": "user_timeout",
    }


def test_a_failed_workflow_says_which_reason_ended_it() -> None:
    wf = workflow({**MOVE_PURIFY, "workflow_id": "wf-b"})
    wf.max_decisions = 0
    run = Run()
    run.submit(wf)
    run.cb("wf-b:step_move", 1, "FAILED", reason="path_blocked")
    assert run.status("wf-b") == "failed"
    [ended] = [e for e in run.of(Emit) if e.payload["status"] == "WORKFLOW_FAILED"]
    assert ended.payload["reason"] == "path_blocked"
    assert run.reports()[-1].body["event"]["reason"] == "path_blocked"


def test_replan_replaces_dependants_within_budget() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "FAILED", reason="path_blocked", at=3)
    assert run.reports()[-1].decision_requested
    assert run.commands() == [MOVE]  # the dependant is held for the decision
    alt = [
        Step(
            step_id="step_move_alt",
            capability_id="mobility",
            operation_id="move_to_room",
            args={"room": "거실"},
            timeout_s=120,
            ack_timeout_s=5,
            resource="base",
        ),
        Step(
            step_id="step_purify_alt",
            capability_id="air_purifier",
            operation_id="start",
            depends_on=["step_move_alt"],
            timeout_s=30,
            ack_timeout_s=5,
            resource="purifier",
        ),
    ]
    run(Decide("wf-1", "replan", steps=alt), at=4)
    assert run.commands() == [MOVE, "wf-1:step_move_alt"]
    assert ("step_purify", "CANCELLED") in run.events()
    run.cb("wf-1:step_move_alt", 1, "COMPLETED", at=20)
    run.cb("wf-1:step_purify_alt", 1, "COMPLETED", at=21)
    assert run.status() == "completed"
    assert run.last is not None and run.last.changed[0].replans_used == 1


def test_second_replan_past_budget_fails() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "FAILED", at=1)
    alt = [
        Step(
            step_id="alt",
            capability_id="mobility",
            operation_id="move_to_room",
            timeout_s=60,
            ack_timeout_s=5,
            resource="base",
        )
    ]
    run(Decide("wf-1", "replan", steps=alt), at=2)
    run.cb("wf-1:alt", 1, "FAILED", at=3)
    again = [
        Step(
            step_id="alt2",
            capability_id="mobility",
            operation_id="move_to_room",
            timeout_s=60,
            ack_timeout_s=5,
            resource="base",
        )
    ]
    run(Decide("wf-1", "replan", steps=again), at=4)
    assert "wf-1:alt2" not in run.commands()
    assert run.status() == "failed"


def test_decision_budget_exhausted_means_no_request() -> None:
    raw = {**MOVE_PURIFY, "workflow_id": "wf-b"}
    wf = workflow(raw)
    wf.max_decisions = 0
    run = Run()
    run.submit(wf)
    run.cb("wf-b:step_move", 1, "BLOCKED")
    assert not run.reports()[-1].decision_requested
    assert run.status("wf-b") == "failed"


def test_continue_complete_abort_ask() -> None:
    run = Run()
    run.submit(workflow(workflow_id="wf-c"))
    run.cb("wf-c:step_move", 1, "FAILED")
    run(Decide("wf-c", "continue"))
    assert run.status("wf-c") == "completed"  # the failure was accepted, dependants dropped

    run.submit(workflow(workflow_id="wf-d"))
    run.cb("wf-d:step_move", 1, "RUNNING")
    run.cb("wf-d:step_move", 2, "NEEDS_USER_INPUT")
    run(Decide("wf-d", "complete"))
    assert run.status("wf-d") == "completed"
    assert ("wf-d:step_move", "supervisor") in run.cancels()
    assert run.board.fenced == {"base": "wf-d:step_move"}  # held until its stop is confirmed
    run.confirm("wf-d:step_move")

    run.submit(workflow(workflow_id="wf-e"))
    run(Decide("wf-e", "abort"))
    assert run.status("wf-e") == "cancelled"
    run.confirm("wf-e:step_move")

    run.submit(workflow(workflow_id="wf-f"))
    run.cb("wf-f:step_move", 1, "FAILED", at=0)
    run(Decide("wf-f", "ask", question="거실로 대신 갈까요?", ask_timeout_s=60), at=1)
    assert run.status("wf-f") == "waiting_user"
    assert ("step_purify", "CANCELLED") not in run.events("wf-f")
    run(Tick(), at=61)
    assert run.status("wf-f") == "failed"


def test_device_reported_cancel_cancels_the_workflow() -> None:
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "CANCELLED", reason="user_stopped_on_device")
    assert run.status() == "cancelled"
    assert run.cancels() == []


def test_late_callback_after_workflow_end_is_unknown_to_the_board() -> None:
    run = Run()
    run.submit()
    run(Cancel("wf-1", "user"))
    run.cb(MOVE, 5, "COMPLETED")
    assert run.ignored() == ["unknown_task"]  # the shell tells late from unknown via the DB


def test_input_board_is_not_mutated() -> None:
    run = Run()
    run.submit()
    snapshot = run.board
    from taskmanager.core import Callback, decide

    decide(snapshot, Callback(MOVE, 1, "COMPLETED"), run.now)
    assert snapshot.workflows["wf-1"].step("step_move").status == "DISPATCHED"  # type: ignore[union-attr]


def test_a_step_the_runtime_cancels_is_reported_once_as_the_workflows_end() -> None:
    """SPEC 3.3 sends a workflow's terminal events: a PUI (or user, or "멈춰") cancel mid-move
    reaches the planner as one WORKFLOW_CANCELLED with its reason and evidence, not a step
    CANCELLED per step (nor when the agent confirms the stop); a step the agent itself ends
    CANCELLED, unasked, is reported as the step's end (docs/contract.md §3.3)."""
    run = Run()
    run.submit()
    run.cb(MOVE, 1, "RUNNING", at=1)
    run(Cancel(None, "pui"), at=2)
    run.cb(MOVE, 2, "CANCELLED", at=3)  # the agent confirms the stop
    assert [r.body["event"]["status"] for r in run.reports()] == ["WORKFLOW_CANCELLED"]
    alone = Run()
    alone.submit()
    alone.cb(MOVE, 1, "RUNNING", at=1)
    alone.cb(MOVE, 2, "CANCELLED", reason="device", at=2)  # unasked
    assert [r.body["event"]["status"] for r in alone.reports()][:1] == ["CANCELLED"]

"""A step's args meet the MQTT gate's rule (SPEC 2.4; issue 30 item 16): finite numbers and at
most 32 levels of nesting as they sit in the step's `task/command`, whichever door the request
came by — a turn's workflow or task request, a replan, `P/workflow/request`. Refused like any
invalid workflow: rejected with a reason, nothing dispatched."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from a2a_common.jsonx import MAX_DEPTH
from edge.channel.topics import Refusal, TaskCallbackMsg, parse
from taskmanager.events import Command
from taskmanager.validate import Rejected, validate_replan, validate_task, validate_workflow
from tests.taskmanager.helpers import CATALOG, T0, Run, workflow
from tests.taskmanager.test_service import manager


def nested(levels: int, leaf: Any = "안방") -> Any:
    """`levels` objects, one inside the other, around `leaf`: nested(1) == {"k": leaf}."""
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def move(args: Any, step_id: str = "go") -> dict[str, Any]:
    return {
        "step_id": step_id,
        "capability_id": "mobility",
        "operation_id": "move_to_room",
        "args": args,
    }


DEPTH_REFUSAL = f"numbers must be finite and nesting at most {MAX_DEPTH} deep"


def gate_detail(body: Any) -> str | None:
    """What the MQTT gate says of `body` (any inbound model: the depth rule comes first)."""
    refused = parse(TaskCallbackMsg, json.dumps(body).encode(), 1 << 20)
    return refused.detail if isinstance(refused, Refusal) else None


def check(args: Any) -> Any:
    raw = {"workflow_id": "wf-d", "steps": [move(args)]}
    return validate_workflow(raw, CATALOG, now=T0, source="planner")


@pytest.mark.parametrize(
    "args",
    [
        {"room": nested(900)},  # what the cloud sent: 900 levels
        {"room": nested(MAX_DEPTH - 1)},  # one past the cap in the command
        {"room": [nested(MAX_DEPTH - 2, [])]},  # lists count as objects do
        {"room": math.nan},  # before: ValueError out of validation (canonical refuses NaN)
        {"room": [1.0, math.inf]},
    ],
)
def test_args_the_gate_would_refuse_reject_the_workflow(args: Any) -> None:
    """Before: 900 levels were accepted and dispatched; NaN raised out of validation."""
    result = check(args)
    assert isinstance(result, Rejected), result
    assert result.workflow_id == "wf-d" and "step go: args must hold finite numbers" in (
        result.reason
    )
    assert f"nest at most {MAX_DEPTH - 1} deep" in result.reason


def test_args_at_the_cap_are_accepted_and_their_command_passes_the_gate() -> None:
    """The deepest args accepted make a command exactly at the MQTT gate's cap; one more level
    and the workflow is rejected: the same rule, in one place."""
    wf = check({"room": nested(MAX_DEPTH - 2)})  # args, 30 levels, the leaf: 32 in the command
    assert not isinstance(wf, Rejected), wf
    run = Run()
    run.submit(wf)
    (command,) = [c.payload for c in run.of(Command)]  # what goes out on task/command
    assert gate_detail(command) != DEPTH_REFUSAL  # not refused for its depth
    assert gate_detail({"one_more": command}) == DEPTH_REFUSAL
    assert isinstance(check({"room": nested(MAX_DEPTH - 1)}), Rejected)


def test_a_task_request_and_a_replan_meet_the_same_rule() -> None:
    task = {"capability_id": "mobility", "operation_id": "move_to_room", "args": nested(900)}
    result = validate_task(task, CATALOG, now=T0, fallback_id="task-1")
    assert isinstance(result, Rejected) and "nest at most" in result.reason
    replan = validate_replan([move(nested(900), "again")], workflow(), CATALOG)
    assert isinstance(replan, str) and "step again: args must hold finite numbers" in replan


def test_a_deep_cloud_workflow_is_rejected_recorded_and_nothing_is_sent(tmp_path: Path) -> None:
    """Through the TaskManager as a turn submits it: rejected with its reason, the rejection
    recorded, no command in the outbox, and a good workflow of the same answer still runs."""
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "s.db", clock)
    deep = {"workflow_id": "wf-deep", "steps": [move({"room": nested(900)})]}
    result = tm.submit(deep, source="planner")
    assert result.accepted == [] and result.rejected[0][0] == "wf-deep"
    assert "nest at most" in result.rejected[0][1]
    assert tm.store.get("wf-deep")["status"] == "rejected"  # type: ignore[index]
    assert outbox.rows_under("a2a/robot-t/task/command/") == []
    clock.advance(timedelta(seconds=1).total_seconds())
    good = {"workflow_id": "wf-ok", "steps": [move({"room": "안방"})]}
    assert tm.submit(good, source="planner").accepted == ["wf-ok"]
    sent = outbox.rows_under("a2a/robot-t/task/command/")
    assert [p["task_id"] for _, p in sent] == ["wf-ok:go"]

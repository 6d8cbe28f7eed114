"""A command dispatched while the broker is away, through the real service process and a real
Mosquitto stopped and started again (SPEC 4.2, issue 30 item 4): it waits in the durable outbox,
not in paho's memory; its deadline passes meanwhile, so no subscriber ever receives it, and its
step ends TIMEOUT by the TaskManager's own deadline."""

from __future__ import annotations

import json
from typing import Any

from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.edge.test_outbox_on_broker import Keeper

WF = "wf-late"
MOVE = f"{WF}:move"


def step_status(state_rows: StateRows, step_id: str, workflow_id: str = WF) -> Any:
    rows = state_rows("SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id])
    if not rows:
        return None
    steps = {s["step_id"]: s for s in json.loads(rows[0][0])["steps"]}
    return steps[step_id]["status"]


def test_a_command_whose_deadline_passed_while_the_broker_was_away_never_reaches_the_agent(
    runtime_factory: RuntimeFactory,
    broker: Mosquitto,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    runtime_factory()
    keeper = Keeper(broker.port, f"{ROOT}/task/command/#", f"{ROOT}/workflow/event")
    try:
        probe.publish(
            f"{ROOT}/workflow/request",
            {
                "workflow_id": WF,
                "steps": [
                    {"step_id": "rest", "kind": "wait", "wait_s": 3},
                    {
                        "step_id": "move",
                        "capability_id": "mobility",
                        "operation_id": "move_to_room",
                        "args": {"room": "안방"},
                        "timeout_s": 2,
                        "depends_on": ["rest"],
                    },
                ],
            },
        )
        eventually(lambda: step_status(state_rows, "rest") == "RUNNING", 10)
        broker.stop()  # graceful: the keeper's session (its subscriptions) is kept
        # the move is dispatched while the broker is away, 2 s to its deadline; it passes
        eventually(lambda: step_status(state_rows, "move") == "TIMEOUT", 20)
        broker.start()
        keeper.wait(lambda: keeper.connects >= 2)
        keeper.wait(
            lambda: any(
                e.get("task_id") == MOVE and e.get("status") == "TIMEOUT" for e in keeper.bodies
            ),
            20,
        )
        commands = keeper.ids(f"{ROOT}/task/command/")
        assert MOVE not in commands, commands  # main: ['wf-late:move'], past its deadline
        assert step_status(state_rows, "move") == "TIMEOUT"
    finally:
        keeper.close()


def test_a_command_whose_task_ended_while_the_broker_was_away_is_never_sent(
    runtime_factory: RuntimeFactory,
    broker: Mosquitto,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    """SPEC 4.2, issue 30 item 4 (second round): the move is dispatched while the broker is
    away with a deadline far ahead (600 s); no agent answers it, so it ends TIMEOUT
    (`ack_timeout`) and its workflow fails before the broker is back. Its command row leaves
    the outbox with the task's end: the agent never receives it. The cancel (reason `timeout`)
    still goes. Before: on reconnect the agent got the safe stop, then the command of the task
    that had ended, then the cancels."""
    wf, move = "wf-ended", "wf-ended:go"
    runtime_factory()
    keeper = Keeper(
        broker.port,
        f"{ROOT}/task/command/#",
        f"{ROOT}/task/cancel/#",
        f"{ROOT}/workflow/event",
        client_id="keeper-ended",
    )
    try:
        probe.publish(
            f"{ROOT}/workflow/request",
            {
                "workflow_id": wf,
                "steps": [
                    {"step_id": "rest", "kind": "wait", "wait_s": 2},
                    {
                        "step_id": "go",
                        "capability_id": "mobility",
                        "operation_id": "move_to_room",
                        "args": {"room": "서재"},
                        "timeout_s": 600,
                        "depends_on": ["rest"],
                    },
                ],
            },
        )
        eventually(lambda: step_status(state_rows, "rest", wf) == "RUNNING", 10)
        broker.stop()  # graceful: the keeper's session (its subscriptions) is kept
        # dispatched while the broker is away (deadline 600 s), no RUNNING within its ack time
        eventually(lambda: step_status(state_rows, "go", wf) == "TIMEOUT", 30)
        broker.start()
        keeper.wait(lambda: keeper.connects >= 2)

        def seen_end() -> bool:
            ended = any(
                e.get("task_id") == move and e.get("status") == "TIMEOUT" for e in keeper.bodies
            )
            return ended and move in keeper.ids(f"{ROOT}/task/cancel/")

        keeper.wait(seen_end, 20)
        commands = keeper.ids(f"{ROOT}/task/command/")
        assert move not in commands, commands  # main: ['wf-ended:go~safe_stop', 'wf-ended:go']
        cancels = [
            b
            for t, b in zip(keeper.topics, keeper.bodies, strict=True)
            if t.startswith(f"{ROOT}/task/cancel/") and b.get("task_id") == move
        ]
        assert cancels and cancels[0]["reason"] == "timeout", cancels
        rows = state_rows("SELECT payload FROM mqtt_outbox WHERE topic LIKE '%/task/command/%'")
        assert not [p for (p,) in rows if json.loads(p).get("task_id") == move]
    finally:
        keeper.close()

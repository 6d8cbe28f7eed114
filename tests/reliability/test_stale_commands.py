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


def step_status(state_rows: StateRows, step_id: str) -> Any:
    rows = state_rows("SELECT doc FROM workflows WHERE workflow_id = ?", [WF])
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

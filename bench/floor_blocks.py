"""The units of load bench.floor sends to ours and to the floor alike, each timed on the wire
(bench.floor_wire): chit-chat turns, two-step workflows, and PUI presses that cancel a
three-step workflow whose tasks the agents hold RUNNING (as bench.cancel does)."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from bench.benchlib import pct
from bench.cancel import OPS, workflow
from bench.floor_wire import Wire
from bench.taskmanager import gap_ms, two_step
from sim.devices import Behavior, DeviceAgents

TEXTS = ("오늘 날씨 어때?", "안녕")


def is_answer(root: str, turn_id: str, topic: str, body: Any) -> bool:
    return topic == f"{root}/turn/response" and body.get("turn_id") == turn_id


def turn(wire: Wire, root: str, turn_id: str, text: str, timeout_s: float = 30) -> float:
    """One turn: seconds from its request handed to paho to its answer read off the wire."""
    sent, mark = wire.publish(f"{root}/turn/request", {"turn_id": turn_id, "recognized_text": text})
    return wire.wait(partial(is_answer, root, turn_id), since=mark, timeout_s=timeout_s) - sent


def turn_block(
    wire: Wire, root: str, first: int, count: int, gap_s: float, trips: dict[str, float]
) -> None:
    """`count` chit-chat turns one at a time, `gap_s` after each answer; each one's round trip
    goes into `trips` by turn id."""
    for n in range(first, first + count):
        turn_id = f"{root[-5:]}-t{n}"
        trips[turn_id] = turn(wire, root, turn_id, TEXTS[n % 2])
        time.sleep(gap_s)


def is_event(root: str, workflow_id: str, status: str, topic: str, body: Any) -> bool:
    return (
        topic == f"{root}/workflow/event"
        and body.get("workflow_id") == workflow_id
        and body.get("status") == status
    )


def workflow_block(wire: Wire, root: str, first: int, count: int) -> None:
    """`count` two-step workflows (bench.taskmanager's), one at a time."""
    for n in range(first, first + count):
        _, mark = wire.publish(f"{root}/workflow/request", two_step(n))
        done = partial(is_event, root, f"wf-{n:05d}", "WORKFLOW_COMPLETED")
        wire.wait(done, since=mark)


def gaps(agents: DeviceAgents, first: int, count: int) -> list[float]:
    """Step COMPLETED published by the agent -> the dependant command received by it (ms)."""
    return [gap_ms(agents, n) for n in range(first, first + count)]


def of_workflow(where: str, workflow_id: str, status: str | None, topic: str, body: Any) -> bool:
    """A message under topic prefix `where` about `workflow_id` (with `status`, when given; a
    callback names its task alone, `<workflow_id>:<step_id>`)."""
    return (
        topic.startswith(where)
        and (
            body.get("workflow_id") == workflow_id
            or str(body.get("task_id")).startswith(f"{workflow_id}:")
        )
        and (status is None or body.get("status") == status)
    )


def is_result(root: str, event_id: str, topic: str, body: Any) -> bool:
    return topic == f"{root}/pui/result" and body.get("event_id") == event_id


def cancel_block(
    wire: Wire, agents: DeviceAgents, root: str, first: int, count: int, presses: list[float]
) -> None:
    """`count` times: a three-step workflow whose agents hold their tasks RUNNING, a PUI press
    (every active workflow), ms from the press handed to paho to the last of the three
    `task/cancel` read off the wire into `presses`; then the agents' CANCELLED and the press's
    `pui/result` are awaited before the next."""
    held = {op: agents.behaviors.get(op, Behavior()) for op in OPS}
    agents.behaviors.update({op: Behavior("hold") for op in OPS})
    try:
        for n in range(first, first + count):
            workflow_id, event_id = f"wf-c{n:05d}", f"press-{root[-5:]}-{n}"
            _, mark = wire.publish(f"{root}/workflow/request", workflow(workflow_id))
            wire.wait(
                partial(of_workflow, f"{root}/task/callback", workflow_id, "RUNNING"),
                len(OPS),
                mark,
            )
            pressed, mark = wire.publish(
                f"{root}/pui/event", {"event_id": event_id, "kind": "cancel"}
            )
            cancels = partial(of_workflow, f"{root}/task/cancel/", workflow_id, None)
            presses.append((wire.wait(cancels, len(OPS), mark) - pressed) * 1000)
            confirmed = partial(of_workflow, f"{root}/task/callback", workflow_id, "CANCELLED")
            wire.wait(confirmed, len(OPS), mark)
            wire.wait(partial(is_result, root, event_id), 1, mark)
    finally:
        agents.behaviors.update(held)


def p99(values: list[float]) -> float:
    return pct(values, 0.99) if values else float("nan")

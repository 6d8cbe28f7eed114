"""Issue 35 item 5: the helper stops a handler whose task the runtime will take nothing more of.
A callback refused `task_terminal`, `unknown_task`, `not_dispatched` or `wrong_capability`
(SPEC 2.4) stops it: the cancel hook runs (the device stops), waiters wake, nothing more is
sent. A cancel stops its progress: once the cancel arrived only a terminal status goes out
(a slow stop does not leave the handler sending PROGRESS the runtime refuses)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from a2a_agent import DeviceAgent, Task
from sim.broker import Mosquitto
from sim.probe import MqttProbe
from tests.a2a_agent.workflows import one_step
from tests.conftest import ROOT, RuntimeFactory, eventually

MOVES = f"{ROOT}/task/callback/mobility"
SAYS = f"{ROOT}/task/callback/speaker"


@pytest.fixture
def agent(broker: Mosquitto) -> Iterator[DeviceAgent]:
    made = DeviceAgent(ROOT, client_id="stopped-agent", port=broker.port)
    yield made
    made.close()


def command(task_id: str) -> dict[str, Any]:
    workflow_id, step_id = task_id.split(":")
    return {
        "task_id": task_id,
        "workflow_id": workflow_id,
        "step_id": step_id,
        "capability_id": "speaker",
        "operation_id": "say",
        "args": {"text": "안녕"},
        "attempt": 1,
    }


@pytest.mark.parametrize(
    "error", ["task_terminal", "unknown_task", "not_dispatched", "wrong_capability"]
)
def test_a_refused_task_stops_its_handler(agent: DeviceAgent, probe: MqttProbe, error: str) -> None:
    """The probe plays the runtime: it refuses the task's first PROGRESS as SPEC 2.4 does."""
    woke: list[bool] = []
    sent: list[bool] = []
    hooked: list[str | None] = []
    done = threading.Event()

    def speak(task: Task) -> None:
        sent.append(task.progress(10))
        woke.append(task.wait_cancelled(20))  # a long step of work, cut short by the stop
        sent.extend(task.progress(p) for p in range(20, 90, 10))  # seven more
        sent.append(task.completed(spoken=True))
        done.set()

    agent.handle("speaker", "say", speak, on_cancel=lambda t: hooked.append(t.cancel_reason))
    agent.start()
    task_id = f"wf-stop-{error.replace('_', '-')}:say"
    probe.publish(f"{ROOT}/task/command/speaker", command(task_id))
    progress = probe.wait_for(SAYS, lambda b: b["task_id"] == task_id and b["status"] == "PROGRESS")
    probe.publish(
        f"{ROOT}/runtime/error",
        {
            "error": error,
            "detail": f"{task_id}: refused",
            "topic": SAYS,
            "ref": {"task_id": task_id, "seq": progress["seq"]},
        },
    )
    assert done.wait(30)
    assert woke == [True]  # woken by the refusal, not after its 20 s
    assert sent == [True] + [False] * 8  # nothing after the refusal
    task = agent.task(task_id)
    assert task is not None and task.stopped == error
    assert eventually(lambda: hooked) == [error]  # the device is told to stop
    marker = {"task_id": task_id, "seq": 99, "status": "FAILED", "reason": "marker"}
    agent.publish_callback(marker, "speaker")  # in order after anything the agent sent
    probe.wait_for(SAYS, lambda b: b.get("reason") == "marker")
    statuses = [b["status"] for b in probe.messages(SAYS) if b["task_id"] == task_id]
    assert statuses == ["RUNNING", "PROGRESS", "FAILED"]  # the marker


def test_another_refusal_does_not_stop_the_handler(agent: DeviceAgent, probe: MqttProbe) -> None:
    """`invalid_field` refuses one callback, not the task: the handler goes on."""
    agent.handle("speaker", "say", lambda task: None)
    agent.start()
    task_id = "wf-go-on:say"
    probe.publish(f"{ROOT}/task/command/speaker", command(task_id))
    probe.wait_for(SAYS, lambda b: b["task_id"] == task_id and b["status"] == "RUNNING")
    task = eventually(lambda: agent.task(task_id))
    probe.publish(
        f"{ROOT}/runtime/error",
        {"error": "invalid_field", "detail": "seq", "topic": SAYS, "ref": {"task_id": task_id}},
    )
    eventually(lambda: task.refusals)
    assert task.stopped is None and not task.cancel_requested
    assert task.completed(spoken=True)


def test_a_cancelled_task_sends_no_more_progress_while_it_stops(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent: DeviceAgent
) -> None:
    """A PUI press while the handler still works and its stop takes a while: on main every
    PROGRESS it sent meanwhile was refused `task_terminal` (the step is CANCELLED at the press).
    """
    pressed = threading.Event()
    finished = threading.Event()
    sent: list[bool] = []

    def move(task: Task) -> None:
        task.progress(5)
        pressed.wait(30)
        task.wait_cancelled(30)  # the cancel has arrived
        sent.extend(task.progress(p) for p in range(10, 80, 10))
        finished.set()

    def stop(task: Task) -> None:
        finished.wait(30)  # braking takes until the handler has finished its loop

    agent.handle("mobility", "move_to_room", move, on_cancel=stop)
    agent.start()
    runtime_factory()
    request = one_step("wf-slow-stop", "move", "mobility.move_to_room", room="안방")
    probe.publish(f"{ROOT}/workflow/request", request)
    task_id = "wf-slow-stop:move"
    probe.wait_for(MOVES, lambda b: b["task_id"] == task_id and b["status"] == "PROGRESS")
    probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-slow", "kind": "cancel"})
    pressed.set()
    probe.wait_for(MOVES, lambda b: b["task_id"] == task_id and b["status"] == "CANCELLED")
    assert sent == [False] * 7
    statuses = [b["status"] for b in probe.messages(MOVES) if b["task_id"] == task_id]
    assert statuses == ["RUNNING", "PROGRESS", "CANCELLED"]
    refused = [
        b
        for b in probe.messages(f"{ROOT}/runtime/error")
        if (b.get("ref") or {}).get("task_id") == task_id
    ]
    assert refused == []

"""`a2a_agent.DeviceAgent` against a real Mosquitto and the real runtime: a team's handler
runs a workflow to its end with evidence, a re-dispatch is answered and not executed again, a
cancel reaches the handler, a handler that raises reports FAILED and the agent goes on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from a2a_agent import DeviceAgent, Refusal, Task
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.a2a_agent.workflows import one_step
from tests.conftest import ROOT, RuntimeFactory, eventually

EVENTS = f"{ROOT}/workflow/event"
CALLBACKS = f"{ROOT}/task/callback/speaker"  # each agent writes its own topic (SPEC 2)
MOVES = f"{ROOT}/task/callback/mobility"


class AgentFactory(Protocol):
    def __call__(self, **options: Any) -> DeviceAgent: ...


@pytest.fixture
def agent_factory(broker: Mosquitto) -> Iterator[AgentFactory]:
    """`agent_factory(**options)`: a DeviceAgent on this test's broker, not started yet (the
    test registers its handlers first); closed at the end."""
    made: list[DeviceAgent] = []

    def make(**options: Any) -> DeviceAgent:
        agent = DeviceAgent(ROOT, client_id=f"team-agent-{len(made)}", port=broker.port, **options)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def say(workflow_id: str, text: str = "물 마실 시간이에요") -> dict[str, Any]:
    return one_step(workflow_id, "say", "speaker.say", text=text)


def move(workflow_id: str) -> dict[str, Any]:
    return one_step(workflow_id, "move", "mobility.move_to_room", room="안방")


def ended(probe: MqttProbe, workflow_id: str, status: str) -> Any:
    return probe.wait_for(
        EVENTS, lambda b: b.get("workflow_id") == workflow_id and b.get("status") == status
    )


def test_a_pushed_workflow_runs_to_completed_with_its_evidence(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    agent_factory: AgentFactory,
) -> None:
    seen: list[Task] = []

    def speak(task: Task) -> None:
        seen.append(task)
        task.progress(50)
        task.completed(spoken=True, volume=7)  # volume: not terminal evidence of speaker.say

    agent = agent_factory()
    agent.handle("speaker", "say", speak, evidence=["spoken"])
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", say("wf-agent"))
    ended(probe, "wf-agent", "WORKFLOW_COMPLETED")
    [task] = seen
    assert task.task_id == "wf-agent:say" and task.args == {"text": "물 마실 시간이에요"}
    assert task.workflow_id == "wf-agent" and task.step_id == "say" and task.attempt == 1
    assert task.deadline is not None and task.deadline > datetime.now(UTC)
    assert task.ack_deadline is not None and task.deadline is not None  # SPEC §2.1
    assert task.ack_deadline <= task.deadline
    callbacks = [b for b in probe.messages(CALLBACKS) if b["task_id"] == "wf-agent:say"]
    assert [(b["seq"], b["status"]) for b in callbacks] == [
        (1, "RUNNING"),
        (2, "PROGRESS"),
        (3, "COMPLETED"),
    ]
    assert callbacks[-1]["evidence"] == {"spoken": True}  # dropped by the agent, not sent
    reports = eventually(
        lambda: [
            r["body"]["event"]
            for r in cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"].get("status") == "COMPLETED"
        ]
    )
    assert reports[0]["evidence"] == {"spoken": True}


def test_a_redispatched_command_is_answered_not_executed_again(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    runs: list[str] = []

    def speak(task: Task) -> None:
        runs.append(task.task_id)
        task.completed(spoken=True)

    agent = agent_factory()
    agent.handle("speaker", "say", speak)
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", say("wf-again"))
    ended(probe, "wf-again", "WORKFLOW_COMPLETED")
    command = probe.wait_for(
        f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == "wf-again:say"
    )
    probe.publish(f"{ROOT}/task/command/speaker", {**command, "attempt": 2})  # a re-dispatch

    def completions() -> list[Any]:
        return [
            b
            for b in probe.messages(CALLBACKS)
            if b["task_id"] == "wf-again:say" and b["status"] == "COMPLETED"
        ]

    first, again = eventually(lambda: len(completions()) == 2 and completions())
    assert again == first  # the latest callback once more, same seq
    task = agent.task("wf-again:say")
    assert task is not None and task.deliveries == 2 and task.attempt == 2
    assert runs == ["wf-again:say"]


def test_a_cancel_reaches_the_handler_and_the_workflow_ends_cancelled(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    stopped: list[str | None] = []
    handler_done = threading.Event()

    def drive(task: Task) -> None:
        if task.wait_cancelled(20):  # the motion, until the cancel arrives
            handler_done.set()
            return
        task.completed(arrived_room="안방")

    agent = agent_factory()
    agent.handle(
        "mobility", "move_to_room", drive, on_cancel=lambda t: stopped.append(t.cancel_reason)
    )
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", move("wf-stop"))
    probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == "wf-stop:move" and b["status"] == "RUNNING"
    )
    probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-agent", "kind": "cancel"})
    assert ended(probe, "wf-stop", "WORKFLOW_CANCELLED")["reason"] == "pui"
    final = probe.wait_for(
        MOVES, lambda b: b["task_id"] == "wf-stop:move" and b["status"] == "CANCELLED"
    )
    assert final["reason"] == "pui" and final["seq"] == 2
    assert stopped == ["pui"] and handler_done.wait(5)


def test_a_handler_that_raises_reports_failed_and_the_agent_goes_on(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    def speak(task: Task) -> None:
        if task.args["text"] == "boom":
            raise ValueError("the user's private words")
        task.completed(spoken=True)

    agent = agent_factory()
    agent.handle("speaker", "say", speak)
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", say("wf-boom", "boom"))
    ended(probe, "wf-boom", "WORKFLOW_FAILED")
    failed = probe.wait_for(
        CALLBACKS, lambda b: b["task_id"] == "wf-boom:say" and b["status"] == "FAILED"
    )
    assert failed["reason"] == "handler_error:ValueError"  # the type, never the message
    step = probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == "wf-boom:say" and b["status"] == "FAILED"
    )
    assert step["reason"] == "handler_error:ValueError"
    probe.publish(f"{ROOT}/workflow/request", say("wf-after"))
    ended(probe, "wf-after", "WORKFLOW_COMPLETED")


def test_an_operation_without_handler_fails_at_once(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    agent = agent_factory()
    agent.handle("speaker", "stop", lambda task: task.completed())
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", say("wf-nobody"))
    step = probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == "wf-nobody:say" and b["status"] == "FAILED"
    )
    assert step["reason"] == "unsupported_operation"


def test_the_team_sees_refusals_of_its_callbacks(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    refused: list[tuple[Refusal, Task | None]] = []
    agent = agent_factory(on_refusal=lambda refusal, task: refused.append((refusal, task)))
    agent.handle("speaker", "say", lambda task: None)  # RUNNING on receipt; the test reports
    agent.start()
    runtime_factory()
    probe.publish(f"{ROOT}/workflow/request", say("wf-ref"))
    task = eventually(lambda: agent.task("wf-ref:say"))
    agent.publish_callback({"task_id": task.task_id, "seq": "three", "status": "PROGRESS"})
    [(refusal, about)] = eventually(lambda: refused)
    assert refusal.error == "invalid_field" and "seq" in refusal.detail
    assert refusal.task_id == task.task_id and about is task  # the `ref` of SPEC §2.4
    task.completed(spoken=True)
    ended(probe, "wf-ref", "WORKFLOW_COMPLETED")


def test_the_agent_subscribes_again_when_the_broker_lost_its_session(
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
    agent_factory: AgentFactory,
) -> None:
    agent = agent_factory(reconnect_max_s=1)
    agent.handle("speaker", "say", lambda task: task.completed(spoken=True))
    agent.start()
    runtime_factory()
    status = MqttProbe(broker.port, [f"{ROOT}/runtime/status"], client_id="status-watch")
    try:
        connects = status.connects
        broker.kill()
        for leftover in broker.workdir.glob("*.db"):
            leftover.unlink()  # back without persistence: every session is gone
        broker.start()
        status.wait_connected(connects + 1, timeout_s=15)
        assert agent.wait_ready(15)  # subscribed again: the new session had none
        probe.wait_connected(2)
        probe.publish(f"{ROOT}/workflow/request", say("wf-back"), qos=1)
        ended(probe, "wf-back", "WORKFLOW_COMPLETED")
    finally:
        status.close()


def test_a_denied_runtime_error_subscription_costs_refusals_not_the_start() -> None:
    """Brokers that check read ACLs at SUBSCRIBE (EMQX, HiveMQ, AWS IoT; Mosquitto 2.0 grants
    and filters on delivery) answer a denied topic with a failure code in the SUBACK."""
    agent = DeviceAgent(ROOT, client_id="suback", port=1)
    granted = ReasonCode(PacketTypes.SUBACK, "Granted QoS 1")
    denied = ReasonCode(PacketTypes.SUBACK, "Not authorized")
    subs = agent._subs  # the session's subscriptions (a2a_agent.session)
    subs._pending = {1: [f"{ROOT}/task/command/speaker", f"{ROOT}/runtime/error"]}
    subs.on_suback(1, [granted, denied])
    assert subs.refused is None and subs.ready.is_set()
    subs._pending = {2: [f"{ROOT}/task/command/mobility"]}
    subs.on_suback(2, [denied])
    assert subs.refused is not None and "task/command/mobility" in subs.refused
    agent.close()


def test_a_cancel_reaches_its_hook_while_every_worker_is_busy(
    runtime_factory: RuntimeFactory, probe: MqttProbe, agent_factory: AgentFactory
) -> None:
    """Found by an outside attack: with every worker in a blocking handler, `on_cancel` queued
    behind them and never ran — nothing stopped the device."""
    release = threading.Event()
    stopped: list[str | None] = []

    def block(task: Task) -> None:
        release.wait(30)  # a handler that does not watch for its cancel

    def stop(task: Task) -> None:
        stopped.append(task.cancel_reason)
        release.set()

    agent = agent_factory(workers=1)
    agent.handle("mobility", "move_to_room", block, on_cancel=stop)
    agent.start()
    runtime_factory()
    try:
        probe.publish(f"{ROOT}/workflow/request", move("wf-busy"))
        probe.wait_for(
            EVENTS, lambda b: b.get("task_id") == "wf-busy:move" and b["status"] == "RUNNING"
        )
        probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-busy", "kind": "cancel"})
        final = probe.wait_for(
            MOVES, lambda b: b["task_id"] == "wf-busy:move" and b["status"] == "CANCELLED"
        )
        assert final["reason"] == "pui" and stopped == ["pui"]
    finally:
        release.set()


def test_a_stale_command_is_dropped_and_a_stale_safe_stop_is_carried_out(
    agent_factory: AgentFactory, probe: MqttProbe
) -> None:
    """SPEC 4.2 on MQTT 3.1.1 (no broker expiry): a command past its `deadline` is not
    executed; a `safe_stop` command never expires."""
    ran: list[str] = []
    agent = agent_factory(protocol="3.1.1")
    agent.handle("mobility", "*", lambda task: (ran.append(task.task_id), task.completed()))
    agent.start()
    past = "2020-01-01T00:00:00Z"
    for task_id, operation, extra in (
        ("wf-s:move", "move_to_room", {}),
        ("wf-s:move~safe_stop", "stop", {"safe_stop": True}),
    ):
        command = {"task_id": task_id, "workflow_id": "wf-s", "step_id": "move", "attempt": 1}
        command |= {"capability_id": "mobility", "operation_id": operation, "args": {}}
        probe.publish(f"{ROOT}/task/command/mobility", {**command, "deadline": past, **extra})
    eventually(lambda: "wf-s:move~safe_stop" in ran)
    assert ran == ["wf-s:move~safe_stop"]  # in arrival order: the stale move came first

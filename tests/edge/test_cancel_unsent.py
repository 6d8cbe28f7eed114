"""A cancel of a task whose command never left the outbox has nothing to confirm (SPEC 4.2), on
the real channel (edge/channel/mqtt.py) and a real Mosquitto: the press ends the task, its
command row leaves unsent in that unit, and no confirmation window starts (no re-sent cancel,
no safe stop, no alarm). A command handed to the wire, PUBACKed or not, may have reached the
agent: its cancel is watched as before."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from edge.channel.mqtt import ChannelHandlers, LastWill, MqttChannel
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from sim.broker import Mosquitto
from taskmanager.catalog import load_catalog
from taskmanager.service import TaskManager
from tests.edge.test_mqtt_loop import channel_for, until
from tests.edge.test_outbound import RecordingWire
from tests.edge.test_outbox_on_broker import Keeper
from tests.taskmanager.helpers import MOVE_PURIFY, T0, ReportSink, task_publisher

ROOT = "a2a/robot-t"
MOVE = "wf-1:step_move"
MOVE_ONLY = {**MOVE_PURIFY, "steps": MOVE_PURIFY["steps"][:1]}  # type: ignore[index]


@dataclass
class Rig:
    tm: TaskManager
    outbox: DurableOutbox
    clock: ManualClock
    connects: list[bool]
    drops: list[str]

    def commands(self) -> list[dict[str, Any]]:
        return [c for _, c in self.outbox.rows_under(f"{ROOT}/task/command/")]

    def escalate(self) -> None:
        """Past both confirmation windows: an unconfirmed cancel is re-sent, then escalated."""
        for _ in range(3):
            self.clock.advance(5)
            self.tm.tick()


def manager(path: Path, clock: ManualClock) -> tuple[TaskManager, DurableOutbox]:
    """Wired as edge/wiring.py wires them."""
    db = open_state_db(path, MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=clock)
    publisher = task_publisher(outbox, ReportSink())
    tm = TaskManager(
        db=db,
        clock=clock,
        catalog=load_catalog(),
        publisher=publisher,
        unsent_cancels=publisher.owed_cancels,
        never_sent=publisher.never_sent,
    )
    tm.reload()
    return tm, outbox


def on_broker(broker: Mosquitto, tmp_path: Path, body: Any) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "state.db", clock)
    channel: MqttChannel = channel_for(broker.port)
    rig = Rig(tm, outbox, clock, [], [])

    def connected(kept: bool) -> None:
        rig.connects.append(kept)
        outbox.flush()

    async def main() -> None:
        outbox.attach(channel)
        channel.start(
            subscriptions=[],
            will=LastWill("t/will", b"{}"),
            handlers=ChannelHandlers(
                connected=connected, disconnected=rig.drops.append, published=outbox.on_published
            ),
        )
        try:
            await until(lambda: rig.connects)
            await body(rig)
        finally:
            channel.stop()

    asyncio.run(main())


def test_a_press_on_a_task_whose_command_never_left_starts_no_watch(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """On 703debf the runtime logged `dropped unsent`, yet re-sent the cancel, commanded the
    safe stop and raised `cancel_unconfirmed` for a task no agent ever had."""
    keeper = Keeper(broker.port, f"{ROOT}/task/#")

    async def body(rig: Rig) -> None:
        await asyncio.to_thread(broker.stop)  # the command waits in the outbox, unhanded
        await until(lambda: rig.drops)
        rig.tm.submit(MOVE_ONLY, source="planner")
        rig.outbox.flush()  # as after every commit
        assert [c["task_id"] for c in rig.commands()] == [MOVE]
        assert rig.tm.cancel(None, "pui").finished  # cancelled for the user at the press
        assert rig.commands() == []  # dropped in the press's unit
        assert rig.tm.watches.watches == {} and rig.tm.next_deadline() is None
        rig.escalate()
        assert rig.tm.alarms() == [] and rig.commands() == []  # no safe stop
        cancels = rig.outbox.rows_under(f"{ROOT}/task/cancel/")
        assert len(cancels) <= 1  # never re-sent
        kinds = [t["kind"] for t in rig.tm.store.timeline("wf-1")]
        assert "cancel_confirmed" in kinds and "cancel_unconfirmed" not in kinds
        rig.tm.submit({**MOVE_ONLY, "workflow_id": "wf-2"}, source="planner")
        assert [c["task_id"] for c in rig.commands()] == ["wf-2:step_move"]  # `base` is free
        await asyncio.to_thread(broker.start)
        await until(lambda: len(rig.connects) >= 2)
        await until(lambda: (rig.outbox.reap(), rig.outbox.pending() == 0)[1], 10)

    try:
        on_broker(broker, tmp_path, body)
        # the cancel goes after where the command was: once it is in, the command would be
        keeper.wait(lambda: MOVE in keeper.ids(f"{ROOT}/task/cancel/"))
        assert MOVE not in keeper.ids(f"{ROOT}/task/command/")  # never reached the broker
    finally:
        keeper.close()
    tm, _ = manager(tmp_path / "state.db", ManualClock(T0))  # nothing left half-done
    assert tm.watches.watches == {} and tm.alarms() == []


def test_a_press_on_a_task_whose_command_reached_the_broker_is_still_confirmed(
    broker: Mosquitto, tmp_path: Path
) -> None:
    async def body(rig: Rig) -> None:
        rig.tm.submit(MOVE_ONLY, source="planner")
        rig.outbox.flush()  # as after every commit
        await until(lambda: rig.outbox.acked)  # PUBACKed: the agent may have it
        rig.outbox.reap()
        assert rig.tm.cancel(None, "pui").finished
        assert list(rig.tm.watches.watches) == [MOVE]
        rig.escalate()
        assert rig.tm.alarms() == [MOVE]  # the 4.2 escalation, as before

    on_broker(broker, tmp_path, body)


def test_a_press_on_a_task_whose_command_is_handed_not_pubacked_is_watched(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    tm, outbox = manager(tmp_path / "state.db", clock)
    wire = RecordingWire()  # takes every row, never PUBACKs: handed, in flight
    outbox.attach(wire)
    tm.submit(MOVE_ONLY, source="planner")
    outbox.flush()
    assert f"{ROOT}/task/command/mobility" in [t for t, *_ in wire.sent]
    assert outbox.in_flight() > 0
    assert tm.cancel(None, "pui").finished
    assert list(tm.watches.watches) == [MOVE]  # it may have reached the agent

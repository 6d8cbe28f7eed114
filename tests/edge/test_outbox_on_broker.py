"""The durable outbox on the real channel (edge/channel/mqtt.py) and a real Mosquitto stopped and
started again (SPEC 4.2): while the broker is away commands wait in the outbox, not in paho's
memory; a command whose deadline passed meanwhile never reaches a subscriber; a `safe_stop`
queued after other waiting rows reaches the broker first."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from a2a_common.clock import SystemClock, iso
from a2a_common.sqlite import open_state_db
from edge.channel.mqtt import ChannelHandlers, LastWill, MqttChannel
from edge.store.outbound import DurableOutbox
from edge.store.schema import MIGRATIONS
from sim.broker import Mosquitto
from tests.edge.test_mqtt_loop import channel_for, until

COMMANDS = "t/task/command/"


class Keeper:
    """A subscriber with a session the broker keeps (clean_start off, a session expiry): what
    reaches the broker for it while it reconnects is queued, not missed. Records the order."""

    def __init__(self, port: int, *topics: str, client_id: str = "keeper") -> None:
        self.bodies: list[dict[str, Any]] = []
        self.topics: list[str] = []
        self.connects = 0
        self._cond = threading.Condition()
        self._topics = topics  # before the loop starts: its first connect subscribes to them
        client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5,
        )
        client.reconnect_delay_set(1, 1)
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 600
        client.connect_async("127.0.0.1", port, clean_start=False, properties=props)
        client.loop_start()
        self.client = client
        self.wait(lambda: self.connects >= 1)

    def _on_connect(self, client: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            return
        if not flags.session_present:  # connected once the broker has the subscription
            client.subscribe([(topic, 1) for topic in self._topics])
            return
        self._connected()

    def _on_subscribe(self, *_args: Any) -> None:
        self._connected()

    def _connected(self) -> None:
        with self._cond:
            self.connects += 1
            self._cond.notify_all()

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        with self._cond:
            self.bodies.append(json.loads(msg.payload))
            self.topics.append(msg.topic)
            self._cond.notify_all()

    def wait(self, condition: Callable[[], bool], timeout_s: float = 15.0) -> None:
        with self._cond:
            if not self._cond.wait_for(condition, timeout_s):
                raise AssertionError(f"keeper: condition not met in {timeout_s}s: {self.bodies}")

    def ids(self, under: str = "") -> list[str]:
        """The task ids of what came on topics under `under`, in order."""
        with self._cond:
            pairs = zip(self.topics, self.bodies, strict=True)
            return [str(b.get("task_id")) for t, b in pairs if t.startswith(under)]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@dataclass
class Events:
    connects: list[bool]
    drops: list[str]


def with_outbox(
    broker: Mosquitto,
    tmp_path: Path,
    body: Callable[[MqttChannel, DurableOutbox, Events], Awaitable[None]],
) -> None:
    """The channel wired to an outbox as the runtime wires them (edge/runtime/executor.py): a
    connect flushes, a PUBACK is handed to the outbox; `body` runs on the loop."""
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    outbox = DurableOutbox(db=db, clock=SystemClock())
    outbox.expire_under(COMMANDS)
    channel = channel_for(broker.port)
    connects: list[bool] = []
    drops: list[str] = []

    def connected(kept: bool) -> None:
        connects.append(kept)
        outbox.flush()

    async def main() -> None:
        outbox.attach(channel)
        channel.start(
            subscriptions=[],
            will=LastWill("t/will", b"{}"),
            handlers=ChannelHandlers(
                connected=connected,
                disconnected=drops.append,
                published=outbox.on_published,
            ),
        )
        try:
            await body(channel, outbox, Events(connects, drops))
        finally:
            channel.stop()

    try:
        asyncio.run(main())
    finally:
        db.close()


def command(outbox: DurableOutbox, task_id: str, deadline_s: float, **extra: Any) -> None:
    """A committed command row, then the commit's flush (`Commits(on_commit=outbox.flush)`)."""
    deadline = iso(SystemClock().now() + timedelta(seconds=deadline_s))
    with outbox._db.atomic():
        outbox.enqueue(COMMANDS + "mobility", {"task_id": task_id, "deadline": deadline, **extra})
    outbox.flush()


async def broker_away(broker: Mosquitto, seen: Events) -> None:
    await asyncio.to_thread(broker.stop)  # graceful: the keeper's session is kept
    await until(lambda: seen.drops, 10)


def test_a_command_whose_deadline_passed_while_the_broker_was_away_never_arrives(
    broker: Mosquitto, tmp_path: Path
) -> None:
    keeper = Keeper(broker.port, COMMANDS + "#")

    async def body(_channel: MqttChannel, outbox: DurableOutbox, seen: Events) -> None:
        await until(lambda: seen.connects)
        await broker_away(broker, seen)
        command(outbox, "stale", 2.0)  # dispatched while the broker is away: 2 s to its deadline
        handed = time.monotonic()
        await until(lambda: time.monotonic() - handed > 3.0, 10)  # its deadline passed
        await asyncio.to_thread(broker.start)
        await until(lambda: len(seen.connects) == 2, 15)
        await asyncio.to_thread(keeper.wait, lambda: keeper.connects >= 2)
        command(outbox, "fresh", 60.0)
        await asyncio.to_thread(keeper.wait, lambda: "fresh" in keeper.ids())
        assert keeper.ids() == ["fresh"]  # main: ['stale', 'fresh'], 3 s past its deadline
        assert [p["task_id"] for _, p in outbox.rows_under(COMMANDS)] in (["fresh"], [])

    try:
        with_outbox(broker, tmp_path, body)
    finally:
        keeper.close()


def test_a_safe_stop_queued_last_reaches_the_broker_first_after_a_reconnect(
    broker: Mosquitto, tmp_path: Path
) -> None:
    keeper = Keeper(broker.port, "t/task/#")

    async def body(_channel: MqttChannel, outbox: DurableOutbox, seen: Events) -> None:
        await until(lambda: seen.connects)
        await broker_away(broker, seen)
        for n in range(5):
            command(outbox, f"move-{n}", 60.0)
            with outbox._db.atomic():
                outbox.enqueue("t/task/cancel/mobility", {"task_id": f"event-{n}"})
            outbox.flush()
        command(outbox, "stop", 60.0, safe_stop=True)  # queued after ten waiting rows
        await asyncio.to_thread(broker.start)
        await until(lambda: len(seen.connects) == 2, 15)
        await asyncio.to_thread(keeper.wait, lambda: len(keeper.bodies) >= 11)
        ids = keeper.ids()
        assert ids[0] == "stop", ids  # main: the stop last, behind what paho held
        assert sorted(ids[1:]) == sorted(
            [f"move-{n}" for n in range(5)] + [f"event-{n}" for n in range(5)]
        )
        await until(lambda: outbox.in_flight() == 0 and outbox.acked == 11, 10)

    try:
        with_outbox(broker, tmp_path, body)
    finally:
        keeper.close()


def test_what_paho_held_over_an_outage_is_dropped_not_sent_late(
    broker: Mosquitto, tmp_path: Path
) -> None:
    """paho's memory is no queue across an outage: a QoS 1 publish made while the broker is away
    is dropped at the next connection (its expiry would be stale); a direct publish is refused
    while no connection is up, and goes at once on one."""
    keeper = Keeper(broker.port, "t/direct")

    async def body(channel: MqttChannel, _outbox: DurableOutbox, seen: Events) -> None:
        await until(lambda: seen.connects)
        await broker_away(broker, seen)
        channel.publish("t/direct", b'{"task_id": "held"}', expiry_s=1)  # paho keeps it
        await asyncio.to_thread(broker.start)
        await until(lambda: len(seen.connects) == 2, 15)
        await asyncio.to_thread(keeper.wait, lambda: keeper.connects >= 2)
        channel.publish("t/direct", b'{"task_id": "after"}')
        await asyncio.to_thread(keeper.wait, lambda: "after" in keeper.ids())
        assert keeper.ids() == ["after"]  # main: ['held', 'after']
        assert channel.publish_now("t/direct", b'{"task_id": "now"}') is not None
        await asyncio.to_thread(keeper.wait, lambda: "now" in keeper.ids())
        await broker_away(broker, seen)
        assert channel.connection is None
        assert channel.publish_now("t/direct", b'{"task_id": "never"}') is None

    try:
        with_outbox(broker, tmp_path, body)
    finally:
        keeper.close()

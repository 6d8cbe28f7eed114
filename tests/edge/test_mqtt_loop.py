"""MqttChannel driven by the asyncio loop (edge/channel/mqtt_loop.py), against a real Mosquitto: no
paho thread, messages both ways, reconnect (broker restarted, down at start, stopped answering),
publish_and_wait, a bounded stop, and a blackholed broker that must not block the loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from edge.channel.mqtt import ChannelHandlers, Inbound, LastWill, MqttChannel
from edge.config.settings import MqttSettings
from sim.broker import Mosquitto
from sim.probe import MqttProbe

IN, OUT, WILL = "t/in", "t/out", "t/will"


@dataclass
class Seen:
    """What the channel told, and what came in (acked as the runtime does after a commit)."""

    connects: list[bool] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)
    published: list[int] = field(default_factory=list)
    inbound: list[Inbound] = field(default_factory=list)
    fail_published: bool = False

    def on_published(self, mid: int) -> None:
        self.published.append(mid)
        if self.fail_published:
            raise RuntimeError("a hand-off bug")


def channel_for(port: int, keepalive_s: int = 5) -> MqttChannel:
    base = MqttSettings(port=port, reconnect_min_s=0.2, reconnect_max_s=0.5)
    # keepalive below the config's floor of 5 s: a dead broker found in 2-3 s, not 10
    settings = base.model_copy(update={"keepalive_s": keepalive_s})
    return MqttChannel(settings=settings, client_id="loop-test", connect_timeout_s=0.5)


async def until(condition: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(0.01)
    return value


def run(
    channel: MqttChannel, body: Callable[[MqttChannel, Seen], Awaitable[None]], seen: Seen
) -> None:
    async def main() -> None:
        channel.start(
            subscriptions=[IN],
            will=LastWill(WILL, b'{"will": 1}'),
            handlers=ChannelHandlers(
                connected=seen.connects.append,
                disconnected=seen.drops.append,
                published=seen.on_published,
            ),
        )

        async def take_in() -> None:
            async for batch in channel.batches(100):
                for msg in batch:
                    seen.inbound.append(msg)
                    channel.ack(msg)

        reader = asyncio.create_task(take_in())
        try:
            await body(channel, seen)
        finally:
            channel.stop()
            reader.cancel()

    asyncio.run(main())


async def send(probe: MqttProbe, payload: bytes) -> None:
    await asyncio.to_thread(probe.publish, IN, payload)


def got(seen: Seen, payload: bytes) -> bool:
    return any(m.payload == payload for m in seen.inbound)


def threads() -> set[threading.Thread]:
    """The process's threads but the loop's executor ones (this test's `to_thread` calls)."""
    return {t for t in threading.enumerate() if not t.name.startswith("asyncio_")}


def test_no_paho_thread_and_messages_both_ways(broker: Mosquitto) -> None:
    probe = MqttProbe(broker.port, [OUT])
    before = threads()  # the probe's paho thread is in here
    seen = Seen()

    async def body(channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects)
        await until(lambda: threads() <= before)  # the connect thread ended
        for n in range(50):
            await send(probe, b"in-%d" % n)
        await until(lambda: len(seen.inbound) == 50)
        assert [m.payload for m in seen.inbound] == [b"in-%d" % n for n in range(50)]
        mid = channel.publish(OUT, b'{"n": 1}')
        await asyncio.to_thread(probe.wait_for, OUT, lambda b: b == {"n": 1})
        await until(lambda: mid in seen.published)
        assert await channel.publish_and_wait(OUT, b"out-2", timeout_s=5.0)
        assert threads() <= before  # no thread of ours (one from before may have ended)

    try:
        run(channel_for(broker.port), body, seen)
    finally:
        probe.close()
    assert seen.connects == [False]


def test_a_hand_off_that_raises_does_not_stop_reading(broker: Mosquitto) -> None:
    probe = MqttProbe(broker.port, [OUT])
    seen = Seen(fail_published=True)

    async def body(channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects)
        channel.publish(OUT, b"one")
        await until(lambda: seen.published)
        await send(probe, b"after")
        await until(lambda: got(seen, b"after"))
        assert await channel.publish_and_wait(OUT, b"two", timeout_s=5.0)

    try:
        run(channel_for(broker.port), body, seen)
    finally:
        probe.close()


def test_reconnects_after_broker_restarts_keeping_or_renewing_the_session(
    broker: Mosquitto,
) -> None:
    seen = Seen()

    async def body(_channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects == [False])
        await asyncio.to_thread(broker.restart)  # graceful: its persistence keeps our session
        await until(lambda: seen.connects == [False, True], 15)
        probe = await asyncio.to_thread(MqttProbe, broker.port, [])
        try:
            await send(probe, b"kept")  # the subscription lives in the kept session
            await until(lambda: got(seen, b"kept"))
            await asyncio.to_thread(broker.kill)
            for leftover in broker.workdir.glob("*.db"):
                leftover.unlink()
            await asyncio.to_thread(broker.start)  # no session: the channel subscribes again
            await until(lambda: seen.connects == [False, True, False], 15)
            await asyncio.to_thread(probe.wait_connected, 2, 15)
            # retained: delivered whether it comes before the new SUBSCRIBE or after it
            await asyncio.to_thread(probe.publish, IN, b"renewed", retain=True)
            await until(lambda: got(seen, b"renewed"))
        finally:
            probe.close()

    run(channel_for(broker.port), body, seen)


def test_connects_once_a_broker_down_at_start_comes_up(broker: Mosquitto) -> None:
    broker.kill()
    seen = Seen()

    async def body(_channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: len(seen.drops) >= 2)  # attempts go on, each one told
        assert all(why.startswith("connect failed") for why in seen.drops)
        assert not seen.connects
        await asyncio.to_thread(broker.start)
        await until(lambda: seen.connects == [False], 10)

    run(channel_for(broker.port), body, seen)


def test_keepalive_drops_a_broker_that_stopped_answering(broker: Mosquitto) -> None:
    assert broker._proc is not None
    pid = broker._proc.pid
    seen = Seen()

    async def body(_channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects)
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(lambda: seen.drops, 10)  # keepalive 1 s: a PINGREQ, then no answer
        finally:
            os.kill(pid, signal.SIGCONT)
        await until(lambda: len(seen.connects) == 2, 10)

    run(channel_for(broker.port, keepalive_s=1), body, seen)
    assert seen.connects[1] is True


def test_publish_and_wait_false_without_a_broker(broker: Mosquitto) -> None:
    seen = Seen()

    async def body(channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects)
        await asyncio.to_thread(broker.kill)
        await until(lambda: seen.drops)
        started = time.monotonic()
        assert not await channel.publish_and_wait(OUT, b"nobody", timeout_s=0.3)
        assert time.monotonic() - started < 1.0

    run(channel_for(broker.port), body, seen)


def test_the_last_will_tells_a_lost_connection_not_a_stop(broker: Mosquitto) -> None:
    probe = MqttProbe(broker.port, [WILL])
    seen = Seen()

    async def body(channel: MqttChannel, seen: Seen) -> None:
        await until(lambda: seen.connects)
        assert channel._driver is not None
        channel._driver.drop()  # as a crash: no DISCONNECT
        await asyncio.to_thread(probe.wait_for, WILL, lambda _b: True, 5.0)
        await until(lambda: len(seen.connects) == 2)

    try:
        run(channel_for(broker.port), body, seen)  # ends with stop(): a DISCONNECT
        probe.publish(WILL, {"marker": 1})  # after it: a will from the stop would come first
        probe.wait_for(WILL, lambda b: b == {"marker": 1})
        assert probe.messages(WILL) == [{"will": 1}, {"marker": 1}]
    finally:
        probe.close()


@contextlib.contextmanager
def blackhole() -> Iterator[int]:
    """A port whose SYNs go unanswered, as a blackholed host's (10.255.255.1 is no blackhole in
    every sandbox): a listener that never accepts, its accept queue filled by one connection."""
    with socket.socket() as server, socket.socket() as filler:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        filler.connect(server.getsockname())
        yield int(server.getsockname()[1])


def test_stop_is_bounded_and_a_blackholed_broker_does_not_block_the_loop() -> None:
    seen = Seen()
    lags: list[float] = []

    async def body(channel: MqttChannel, seen: Seen) -> None:
        async def ticker() -> None:
            while True:
                t0 = time.monotonic()
                await asyncio.sleep(0.01)
                lags.append(time.monotonic() - t0 - 0.01)

        tick = asyncio.create_task(ticker())
        await until(lambda: len(seen.drops) >= 2, 10)  # connect timeouts (0.5 s each)
        tick.cancel()
        assert all("timed out" in why for why in seen.drops), seen.drops
        await asyncio.sleep(0.1)  # the next attempt is under way, in its thread
        t0 = time.monotonic()
        channel.stop()
        assert time.monotonic() - t0 < 0.1

    started = time.monotonic()
    with blackhole() as port:
        run(channel_for(port), body, seen)
    assert time.monotonic() - started < 5
    assert max(lags) < 0.2, f"the loop stalled {max(lags):.3f} s"
    assert not seen.connects

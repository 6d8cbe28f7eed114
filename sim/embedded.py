"""An embedded MQTT broker (amqtt, MQTT 3.1.1) for the demo when Mosquitto is not installed."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sim.broker import free_port, wait_port


@contextmanager
def embedded_broker() -> Iterator[int]:
    """Run amqtt's broker in a thread on a free loopback port; yields the port."""
    try:
        from amqtt.broker import Broker
    except ImportError as exc:  # neither Mosquitto nor the embedded broker
        raise RuntimeError(
            "no MQTT broker: install mosquitto (sudo apt-get install -y mosquitto) or "
            "`pip install amqtt` for the embedded one"
        ) from exc
    for name in ("amqtt", "transitions"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    port = free_port()
    config: dict[str, Any] = {
        "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
        "sys_interval": 0,
        "auth": {"allow-anonymous": True, "plugins": ["auth_anonymous"]},
        "topic-check": {"enabled": False},
    }
    loop = asyncio.new_event_loop()
    brokers: list[Broker] = []
    started = threading.Event()

    async def start() -> None:
        # made on its own loop: amqtt 0.12 binds its broadcast-shutdown future to the loop
        # current where Broker() runs; made in this thread, that future never woke on the
        # broker's loop, and every shutdown waited out amqtt's 5 s broadcast timeout
        broker = Broker(config, loop=loop)
        brokers.append(broker)
        await broker.start()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not started.wait(15) or not wait_port(port, up=True, timeout_s=10):
        raise RuntimeError("the embedded broker did not start")
    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(brokers[0].shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

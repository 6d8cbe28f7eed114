"""bench.floor's view of the wire: one MQTT client that keeps every message on its topics with
its arrival (monotonic, taken in paho's network thread as the message is read) and publishes
with the time it let go. Latencies are arrival minus publish, both in this process: ours and
the floor are timed by the same clock at the same place."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho

from sim.mqttc import start_client

Want = Callable[[str, Any], bool]  # (topic, body) -> a match?


class Wire:
    def __init__(self, port: int, topics: list[str]) -> None:
        self.seen: list[tuple[float, str, Any]] = []  # (arrival, topic, body)
        self._cond = threading.Condition()
        self._topics = topics
        self._subscribed = threading.Event()
        self.client = start_client("127.0.0.1", port, "", self._on_connect, self._on_message)
        if not self._subscribed.wait(10):
            raise TimeoutError("the bench's wire client never subscribed")

    def _on_connect(self, client: paho.Client, *_a: Any) -> None:
        client.on_subscribe = lambda *_a: self._subscribed.set()
        client.subscribe([(topic, 1) for topic in self._topics])

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        arrived = time.monotonic()
        try:
            body = json.loads(msg.payload)
        except ValueError:
            return
        with self._cond:
            self.seen.append((arrived, msg.topic, body))
            self._cond.notify_all()

    def publish(self, topic: str, body: dict[str, Any]) -> tuple[float, int]:
        """(when it was handed to paho, how many messages had arrived by then): an answer to it
        is looked for from that index on."""
        data = json.dumps(body, ensure_ascii=False)
        with self._cond:
            mark = len(self.seen)
        sent = time.monotonic()
        self.client.publish(topic, data, qos=1)
        return sent, mark

    def wait(self, want: Want, count: int = 1, since: int = 0, timeout_s: float = 30) -> float:
        """The arrival of the `count`-th message matching `want` from index `since` on."""
        hits: list[float] = []
        cursor = since

        def enough() -> bool:
            nonlocal cursor
            for arrived, topic, body in self.seen[cursor:]:
                cursor += 1
                if want(topic, body):
                    hits.append(arrived)
            return len(hits) >= count

        with self._cond:
            if not self._cond.wait_for(enough, timeout_s):
                raise TimeoutError(f"{len(hits)} of {count} awaited messages in {timeout_s} s")
        return hits[count - 1]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

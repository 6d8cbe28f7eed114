"""An MQTT client for tests and the demo: publish JSON, wait for a message with a deadline, say
a turn to the runtime and take its answer.

It reconnects by itself and subscribes again on every connect, so it outlives a broker restart.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho

from sim.mqttc import start_client

_UNPARSED = object()


@dataclass(frozen=True)
class Message:
    topic: str
    payload: bytes
    retain: bool
    body: Any = _UNPARSED  # parsed once on arrival; _UNPARSED when not JSON

    def json(self) -> Any:
        if self.body is _UNPARSED:
            raise ValueError("payload is not JSON")
        return self.body


def _parse(payload: bytes) -> Any:
    try:
        return json.loads(payload.decode("utf-8"))
    except ValueError:
        return _UNPARSED


class MqttProbe:
    def __init__(
        self,
        port: int,
        topics: list[str],
        *,
        client_id: str = "",
        host: str = "127.0.0.1",
        protocol: str = "5",
        tls: tuple[str, str, str] | None = None,
        auth: tuple[str, str] | None = None,
        root: str | None = None,
    ) -> None:
        self.root = root  # the device's topic root (`a2a/<device_id>`), for turn()
        self._topics = topics
        self._messages: list[Message] = []
        self._cond = threading.Condition()
        self._connects = 0
        self.client = start_client(
            host, port, client_id, self._on_connect, self._on_message, protocol, tls, auth
        )
        self.wait_connected(1)

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            return
        for topic in self._topics:
            client.subscribe(topic, qos=1)
        with self._cond:
            self._connects += 1
            self._cond.notify_all()

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        payload = bytes(msg.payload)
        item = Message(msg.topic, payload, bool(msg.retain), _parse(payload))
        with self._cond:
            self._messages.append(item)
            self._cond.notify_all()

    def wait_connected(self, count: int, timeout_s: float = 10.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._connects >= count, timeout_s):
                raise TimeoutError(f"probe did not reach {count} connects in {timeout_s}s")
        time.sleep(0.05)  # let the SUBACK land before the caller publishes

    @property
    def connects(self) -> int:
        with self._cond:
            return self._connects

    def publish(self, topic: str, payload: Any, *, qos: int = 1, retain: bool = False) -> None:
        data = (
            payload
            if isinstance(payload, bytes)
            else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        )
        self.client.publish(topic, data, qos=qos, retain=retain).wait_for_publish(5)

    def wait_for(
        self,
        topic: str,
        predicate: Callable[[Any], bool] = lambda _body: True,
        timeout_s: float = 10.0,
    ) -> Any:
        """The JSON body of the first message on `topic` that satisfies `predicate`."""

        checked = 0  # messages already looked at: each wake-up looks only at new ones

        def find() -> Any:
            nonlocal checked
            for msg in self._messages[checked:]:
                checked += 1
                if msg.topic == topic and msg.body is not _UNPARSED and predicate(msg.body):
                    return msg.body
            return None

        with self._cond:
            found: Any = None

            def ready() -> bool:
                nonlocal found
                found = find()
                return found is not None

            if not self._cond.wait_for(ready, timeout_s):
                seen = [m.topic for m in self._messages]
                raise TimeoutError(f"nothing matching on {topic} within {timeout_s}s; saw {seen}")
            return found

    def turn(self, turn_id: str, text: str, *, timeout_s: float = 10.0, **fields: Any) -> Any:
        """Publish `root/turn/request` and return the body of the `root/turn/response` that
        answers it (same turn_id). `fields` go into the request as they are (session_id,
        device_context, ...). The probe must be subscribed to the response topic."""
        if self.root is None:
            raise ValueError("turn() needs the device's topic root: MqttProbe(..., root=...)")
        self.publish(
            f"{self.root}/turn/request", {"turn_id": turn_id, "recognized_text": text, **fields}
        )
        return self.wait_for(
            f"{self.root}/turn/response",
            lambda body: body.get("turn_id") == turn_id,
            timeout_s=timeout_s,
        )

    def messages(self, topic: str) -> list[Any]:
        with self._cond:
            return [m.body for m in self._messages if m.topic == topic and m.body is not _UNPARSED]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

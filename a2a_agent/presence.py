"""An agent's presence (SPEC §4.8): the retained `P/agent/<capability_id>/status` of each
capability it serves — `online` with a `boot_id` new at every start of the process and the task
ids it still holds; `offline` as the MQTT will (a crash, a SIGKILL, a lost network) and on a
clean stop.

MQTT gives a connection one will, and an agent may serve several capabilities: each capability's
status rides a small connection of its own (clean session, no subscriptions), whose will is that
capability's `offline`. A killed process closes all of them at once, so every will fires.
`online` is sent only once the agent's own session holds its subscriptions (`announce`): a
runtime that sees it may send a command at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

log = logging.getLogger("a2a_agent")

STOP_WAIT_S = 2.0  # a clean stop waits this long at most for each `offline` to be acknowledged


def new_boot_id() -> str:
    return f"boot-{uuid.uuid4().hex[:16]}"


class Presence:
    def __init__(
        self,
        root: str,
        capabilities: Iterable[str],
        *,
        client_id: str,
        host: str,
        port: int,
        keepalive_s: int,
        protocol: str,
        tls: tuple[str, str | None, str | None] | None,
        auth: tuple[str, str | None] | None,
        held: Callable[[], list[str]],
        clock: Callable[[], datetime],
        boot_id: str | None = None,
    ) -> None:
        self.root = root
        self.boot_id = boot_id or new_boot_id()
        self.capabilities = sorted(set(capabilities))
        self._held, self._clock = held, clock
        self._announced = threading.Event()
        self._clients: dict[str, paho.Client] = {}
        for capability in self.capabilities:
            client = paho.Client(
                callback_api_version=CallbackAPIVersion.VERSION2,
                client_id=f"{client_id}-presence-{capability}"[:128],
                protocol=MQTTProtocolVersion.MQTTv5
                if protocol == "5"
                else MQTTProtocolVersion.MQTTv311,
            )
            client.suppress_exceptions = True
            if tls is not None:
                client.tls_set(ca_certs=tls[0], certfile=tls[1], keyfile=tls[2])
            if auth is not None:
                client.username_pw_set(*auth)
            client.reconnect_delay_set(1, 5)
            client.will_set(self.topic(capability), self._body("offline"), qos=1, retain=True)
            client.on_connect = partial_connect(self, capability)
            self._clients[capability] = client
            client.connect_async(host, port, keepalive_s)

    def topic(self, capability: str) -> str:
        return f"{self.root}/agent/{capability}/status"

    def _body(self, state: str, tasks: list[str] | None = None) -> bytes:
        body: dict[str, Any] = {"state": state, "boot_id": self.boot_id}
        if tasks is not None:
            body["tasks"] = tasks
        body["ts"] = self._clock().isoformat().replace("+00:00", "Z")
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def start(self) -> None:
        for client in self._clients.values():
            client.loop_start()

    def announce(self) -> None:
        """`online` on every capability (the agent's session holds its subscriptions); again
        whenever a presence connection comes back."""
        self._announced.set()
        for capability in self.capabilities:
            self._online(capability)

    def _online(self, capability: str) -> None:
        if not self._announced.is_set():
            return
        tasks = self._held()
        self._clients[capability].publish(
            self.topic(capability), self._body("online", tasks), qos=1, retain=True
        )

    def on_connect(self, capability: str, reason: Any) -> None:
        if reason.is_failure:
            log.error("device agent presence %s: broker refused: %s", capability, reason)
            return
        self._online(capability)

    def stop(self) -> None:
        """A clean stop: `offline` on every capability (acknowledged, within STOP_WAIT_S each),
        then a normal DISCONNECT, which discards the will."""
        for capability, client in self._clients.items():
            info = client.publish(self.topic(capability), self._body("offline"), qos=1, retain=True)
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(STOP_WAIT_S)
            client.disconnect()
            client.loop_stop()


def partial_connect(presence: Presence, capability: str) -> Callable[..., None]:
    return lambda _c, _u, _flags, reason, _p=None: presence.on_connect(capability, reason)

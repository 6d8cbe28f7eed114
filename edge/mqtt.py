"""The paho-mqtt 2.x adapter: a persistent-session client whose callbacks only hand off.

paho's network thread runs the callbacks; each one does nothing but schedule a plain function
on the asyncio loop (`call_soon_threadsafe`). `suppress_exceptions=True` keeps a bug in that
hand-off from silently killing the network thread. Inbound QoS 1 messages are acknowledged by
the loop (`manual_ack`) only after their transaction committed, so an unapplied message is
redelivered by the broker instead of lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge.config import MqttSettings

log = logging.getLogger(__name__)


def no_delay(_client: paho.Client, _userdata: Any, sock: Any) -> None:
    """paho's `on_socket_open`: turn Nagle off. MQTT exchanges small packets (a PUBACK then a
    PUBLISH); with Nagle on, the second waits for the peer's delayed ACK, about 40 ms a hop."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclass(frozen=True)
class Inbound:
    topic: str
    payload: bytes
    qos: int
    mid: int
    generation: int
    retained: bool
    received_at: float = field(default_factory=time.perf_counter)  # paho thread, on arrival


@dataclass(frozen=True)
class LastWill:
    topic: str
    payload: bytes


@dataclass(frozen=True)
class ChannelHandlers:
    """What the loop wants told. `message` runs on paho's network thread and must only hand
    the message over (a thread-safe queue, `call_soon_threadsafe`); the others run on the loop
    thread."""

    message: Callable[[Inbound], None]
    connected: Callable[[bool], None]
    disconnected: Callable[[str], None]
    published: Callable[[int], None]


class MqttChannel:
    def __init__(
        self,
        *,
        settings: MqttSettings,
        client_id: str,
        subscriptions: list[str],
        will: LastWill,
        loop: asyncio.AbstractEventLoop,
        handlers: ChannelHandlers,
        password: str | None = None,
    ) -> None:
        self._settings = settings
        self._subscriptions = subscriptions
        self._loop = loop
        self._handlers = handlers
        self._generation = 0
        self._v5 = settings.protocol == "5"
        client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=None if self._v5 else False,
            protocol=MQTTProtocolVersion.MQTTv5 if self._v5 else MQTTProtocolVersion.MQTTv311,
            manual_ack=True,
        )
        client.suppress_exceptions = True
        client.reconnect_delay_set(
            min_delay=max(1, int(settings.reconnect_min_s)),
            max_delay=max(1, int(settings.reconnect_max_s)),
        )
        client.max_inflight_messages_set(100)
        client.will_set(will.topic, will.payload, qos=1, retain=True)
        if settings.username:
            client.username_pw_set(settings.username, password)
        if settings.tls_ca_file:
            client.tls_set(
                ca_certs=settings.tls_ca_file,
                certfile=settings.tls_cert_file or None,
                keyfile=settings.tls_key_file or None,
                cert_reqs=ssl.CERT_REQUIRED,
            )
        client.on_socket_open = no_delay
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_connect_fail = self._on_connect_fail
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        self._client = client

    # --- paho thread: hand-off only -------------------------------------------------------
    def _hand_off(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed while shutting down
            self._loop.call_soon_threadsafe(fn, *args)

    def _on_connect(self, client: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            self._hand_off(self._handlers.disconnected, f"connect refused: {reason}")
            return
        self._generation += 1
        if not flags.session_present:
            client.subscribe([(topic, 1) for topic in self._subscriptions])
        self._hand_off(self._handlers.connected, bool(flags.session_present))

    def _on_connect_fail(self, _c: paho.Client, _u: Any) -> None:
        """paho calls this inside its `except OSError`: the exception says why (TLS, refused)."""
        exc = sys.exc_info()[1]
        self._hand_off(self._handlers.disconnected, f"connect failed: {exc}")

    def _on_disconnect(self, _c: paho.Client, _u: Any, _f: Any, reason: Any, _p: Any) -> None:
        self._hand_off(self._handlers.disconnected, str(reason))

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        item = Inbound(
            topic=msg.topic,
            payload=bytes(msg.payload),
            qos=msg.qos,
            mid=msg.mid,
            generation=self._generation,
            retained=bool(msg.retain),
        )
        self._handlers.message(item)  # a hand-off itself (see ChannelHandlers)

    def _on_publish(self, _c: paho.Client, _u: Any, mid: int, _rc: Any, _p: Any) -> None:
        self._hand_off(self._handlers.published, mid)

    # --- loop thread ----------------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background; paho retries with backoff until the broker answers."""
        props: Properties | None = None
        if self._v5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = self._settings.session_expiry_s
        self._client.connect_async(
            self._settings.host,
            self._settings.port,
            keepalive=self._settings.keepalive_s,
            clean_start=False if self._v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
            properties=props,
        )
        self._client.loop_start()

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False) -> int:
        """Queue a publish; returns its mid (PUBACK arrives via `published`)."""
        info = self._client.publish(topic, payload, qos=qos, retain=retain)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            log.warning("publish on %s not queued: %s", topic, paho.error_string(info.rc))
        return int(info.mid)

    async def publish_and_wait(
        self, topic: str, payload: bytes, *, retain: bool = False, timeout_s: float = 1.0
    ) -> bool:
        """Publish QoS 1 and wait (off the loop) up to `timeout_s` for its PUBACK."""
        info = self._client.publish(topic, payload, qos=1, retain=retain)
        try:
            await self._loop.run_in_executor(None, info.wait_for_publish, timeout_s)
        except (RuntimeError, ValueError):
            return False
        return info.is_published()

    def ack(self, message: Inbound) -> None:
        """PUBACK an inbound message, unless it came on an earlier connection."""
        if message.qos > 0 and message.generation == self._generation:
            self._client.ack(message.mid, message.qos)

    @property
    def generation(self) -> int:
        return self._generation

    def is_connected(self) -> bool:
        return self._client.is_connected()

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

"""The paho-mqtt 2.x adapter: a persistent-session client whose callbacks only hand off.

paho's network thread runs the callbacks; each one does nothing but hand over to the asyncio
loop. Inbound messages go to a deque the channel owns, with one wake-up scheduled per burst;
the loop takes them as batches (`async for batch in channel.batches(max=100)`), in the manner of
aiomqtt's message queue. Connection events are scheduled on the loop (`call_soon_threadsafe`).
`suppress_exceptions=True` keeps a bug in a hand-off from silently killing the network thread.
Inbound QoS 1 messages are acknowledged by the loop (`manual_ack`) only after their transaction
committed, so an unapplied message is redelivered by the broker instead of lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
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


def secure(client: paho.Client, settings: MqttSettings, password: str | None) -> None:
    """Credentials and TLS from the config, and Nagle off, on a client not yet connected."""
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


@dataclass(frozen=True)
class Inbound:
    topic: str
    payload: bytes
    qos: int
    mid: int
    generation: int
    retained: bool
    received_at: float = field(default_factory=time.perf_counter)  # paho thread, on arrival
    held: bool = False  # the DB could not take it; already refused once as storage_unavailable
    expiry_s: float | None = None  # MQTT 5 message-expiry interval left when it arrived

    def as_held(self) -> Inbound:
        return replace(self, held=True)


@dataclass(frozen=True)
class LastWill:
    topic: str
    payload: bytes


@dataclass(frozen=True)
class ChannelHandlers:
    """What the loop wants told of the connection; each runs on the loop thread."""

    connected: Callable[[bool], None]
    disconnected: Callable[[str], None]
    published: Callable[[int], None]


class Batch:
    """Inbound messages taken in one go: iterating pops from the channel's queue, so messages
    arriving while the batch is worked on join it, up to `limit`."""

    def __init__(self, queue: deque[Inbound], limit: int) -> None:
        self._queue = queue
        self._limit = limit

    def __iter__(self) -> Iterator[Inbound]:
        taken = 0
        while self._queue and taken < self._limit:
            taken += 1
            yield self._queue.popleft()


class MqttChannel:
    def __init__(
        self,
        *,
        settings: MqttSettings,
        client_id: str,
        password: str | None = None,
    ) -> None:
        self._settings = settings
        self._subscriptions: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handlers = ChannelHandlers(  # until `start` gives the loop's
            connected=lambda _kept: None,
            disconnected=lambda _why: None,
            published=lambda _mid: None,
        )
        self._inbound: deque[Inbound] = deque()  # paho's thread appends, the loop pops
        self._arrived: asyncio.Event | None = None
        self._wake_scheduled = False
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
        secure(client, settings, password)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_connect_fail = self._on_connect_fail
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        self._client = client

    # --- paho thread: hand-off only -------------------------------------------------------
    def _hand_off(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is None:
            return
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
            expiry_s=getattr(getattr(msg, "properties", None), "MessageExpiryInterval", None),
        )
        self._inbound.append(item)  # a deque is thread-safe
        if not self._wake_scheduled and self._arrived is not None:
            self._wake_scheduled = True  # one wake-up per burst; a batch at work takes the rest
            self._hand_off(self._arrived.set)

    def _on_publish(self, _c: paho.Client, _u: Any, mid: int, _rc: Any, _p: Any) -> None:
        self._hand_off(self._handlers.published, mid)

    # --- loop thread ----------------------------------------------------------------------
    def start(self, *, subscriptions: list[str], will: LastWill, handlers: ChannelHandlers) -> None:
        """Connect in the background; paho retries with backoff until the broker answers."""
        self._loop = asyncio.get_running_loop()
        self._arrived = asyncio.Event()
        self._subscriptions = subscriptions
        self._handlers = handlers
        self._client.will_set(will.topic, will.payload, qos=1, retain=True)
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

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:
        """Queue a publish; returns its mid (PUBACK arrives via `published`). `expiry_s`: the
        MQTT 5 message expiry interval (a broker drops the message once it has passed; on
        3.1.1 there is none and the receiver checks the payload's `deadline`)."""
        props: Properties | None = None
        if self._v5 and expiry_s is not None:
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.MessageExpiryInterval = expiry_s
        info = self._client.publish(topic, payload, qos=qos, retain=retain, properties=props)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            log.warning("publish on %s not queued: %s", topic, paho.error_string(info.rc))
        return int(info.mid)

    async def batches(self, limit: int) -> AsyncIterator[Batch]:
        """Inbound messages as they arrive, a batch at a time (at most `limit` each); the loop
        gets a turn between batches of a long burst."""
        assert self._arrived is not None, "start() first"
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            self._wake_scheduled = False
            while self._inbound:
                yield Batch(self._inbound, limit)
                await asyncio.sleep(0)

    async def publish_and_wait(
        self, topic: str, payload: bytes, *, retain: bool = False, timeout_s: float = 1.0
    ) -> bool:
        """Publish QoS 1 and wait (off the loop) up to `timeout_s` for its PUBACK."""
        info = self._client.publish(topic, payload, qos=1, retain=retain)
        try:
            await asyncio.to_thread(info.wait_for_publish, timeout_s)
        except (RuntimeError, ValueError):
            return False
        return info.is_published()

    def ack(self, message: Inbound) -> None:
        """PUBACK an inbound message, unless it came on an earlier connection."""
        if message.qos > 0 and message.generation == self._generation:
            self._client.ack(message.mid, message.qos)

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

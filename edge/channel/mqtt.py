"""The paho-mqtt 2.x adapter: a persistent-session client driven by the asyncio loop.

No paho network thread: edge/channel/mqtt_loop.py registers paho's socket with the loop, so paho's
callbacks run on the loop thread, and stay tiny. Inbound messages go to a deque the channel
owns and wake the loop once per burst; the loop takes them as batches (`async for batch in
channel.batches(max=100)`), in the manner of aiomqtt's message queue. Connection events are
scheduled on the loop (`call_soon`: after paho's callback returned, an exception logged by the
loop). `suppress_exceptions=True` keeps a bug in a callback from breaking paho's read.
The channel owns what `loop_start` did: connecting (the socket made in a thread), reconnecting
with backoff between `reconnect_min_s` and `reconnect_max_s`, keepalive (`loop_misc`).
Inbound QoS 1 messages are acknowledged by the loop (`manual_ack`) only after their transaction
committed, so an unapplied message is redelivered by the broker instead of lost.
Outbound, paho's own memory is never a queue across an outage: at each new connection the
channel drops every message paho still holds from before (`drop_out_messages`), so paho never
re-sends a copy whose MQTT 5 expiry was computed before the outage. What must go out after a
reconnect is the durable outbox's (edge/store/outbound.py), handed again from the DB only while
a connection is up (`connection`), with an expiry computed then (SPEC 4.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge.channel.mqtt_loop import LoopClient, LoopDriver, open_in_thread
from edge.config.settings import MqttSettings

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


# inbound messages taken off the socket and not yet handed to the intake, at most: in a flood
# the rest waits in the socket and at the broker, not in memory (each up to max_payload_bytes)
MAX_QUEUED = 200


def disconnect_reason(flags: Any, reason: Any) -> str:
    """What ended the connection, in words: paho names a socket closed without a DISCONNECT
    packet (the broker stopped, the network went) `Unspecified error`, which read as a fault of
    ours when the broker stopped together with the service (Ctrl-C of a stack run by hand)."""
    if getattr(flags, "is_disconnect_packet_from_server", False):
        return f"the broker sent DISCONNECT ({reason})"
    if getattr(reason, "is_failure", False) and getattr(reason, "value", None) == 128:
        return "connection closed without a DISCONNECT (the broker stopped or the network went)"
    return str(reason)


class ExpiryProperties(Properties):
    """PUBLISH properties holding only a message expiry, packed once. paho only reads the
    properties it is given (packs them at each send), so one object serves every publish with
    the same expiry: building and packing paho's `Properties` per publish cost about 20 µs."""

    def __init__(self, expiry_s: int) -> None:
        super().__init__(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        self.MessageExpiryInterval = expiry_s
        packed = super().pack()  # type: ignore[no-untyped-call]
        object.__setattr__(self, "packed", packed)  # paho's __setattr__ takes its names only

    def pack(self) -> bytes:
        packed: bytes = self.__dict__["packed"]
        return packed


_EXPIRIES: dict[int, ExpiryProperties] = {}
MAX_EXPIRIES = 512  # distinct expiry values kept (seconds left: a few hundred at most)


def expiry_properties(expiry_s: int) -> ExpiryProperties:
    props = _EXPIRIES.get(expiry_s)
    if props is None:
        if len(_EXPIRIES) >= MAX_EXPIRIES:
            _EXPIRIES.clear()
        props = _EXPIRIES[expiry_s] = ExpiryProperties(expiry_s)
    return props


@dataclass(frozen=True)
class Inbound:
    topic: str
    payload: bytes
    qos: int
    mid: int
    generation: int
    retained: bool
    received_at: float = field(default_factory=time.perf_counter)  # on arrival
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
        connect_timeout_s: float = 5.0,  # TCP connect, then TLS handshake (paho's default)
    ) -> None:
        self._settings = settings
        self._subscriptions: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handlers = ChannelHandlers(  # until `start` gives the loop's
            connected=lambda _kept: None,
            disconnected=lambda _why: None,
            published=lambda _mid: None,
        )
        self._inbound: deque[Inbound] = deque()
        self._arrived: asyncio.Event | None = None
        # the broker holds our subscriptions: a session it kept, or the SUBACK of ours
        self.receiving = asyncio.Event()
        self._subscribe_mid: int | None = None
        self._generation = 0
        self._accepted = False  # the current connection got a successful CONNACK
        self._up = False  # a CONNACK accepted us and the connection has not ended since
        self._in_callback = False  # a handler runs inside paho's callback: no direct write
        self._stopping = False
        self._waiters: dict[int, asyncio.Future[bool]] = {}  # publish_and_wait's, by mid
        self._driver: LoopDriver | None = None
        self._task: asyncio.Task[None] | None = None
        self._opening: asyncio.Future[Any] | None = None  # the first socket, begun by start()
        self._v5 = settings.protocol == "5"
        client = LoopClient(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=None if self._v5 else False,
            protocol=MQTTProtocolVersion.MQTTv5 if self._v5 else MQTTProtocolVersion.MQTTv311,
            manual_ack=True,
        )
        client.suppress_exceptions = True
        client.connect_timeout = connect_timeout_s
        client.max_inflight_messages_set(100)
        secure(client, settings, password)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_publish = self._on_publish
        self._client = client

    # --- paho's callbacks (on the loop thread, inside paho's read): tiny ---------------------
    def _tell(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon(fn, *args)

    def _on_connect(self, client: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            self._tell(self._handlers.disconnected, f"connect refused: {reason}")
            return
        self._generation += 1
        self._accepted = True
        self._up = True
        # a kept session is subscribed again once per process: one an older version left may
        # lack a topic this one takes (`P/task/callback/+`); SUBSCRIBE only replaces the same
        if self._subscriptions and (not flags.session_present or self._generation == 1):
            _rc, self._subscribe_mid = client.subscribe(
                [(topic, 1) for topic in self._subscriptions]
            )
        else:
            self.receiving.set()
        self._tell(self._handlers.connected, bool(flags.session_present))

    def _on_subscribe(self, _c: paho.Client, _u: Any, mid: int, _codes: Any, _p: Any) -> None:
        if mid == self._subscribe_mid:
            self.receiving.set()

    def _on_disconnect(self, _c: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        self._up = False
        self._tell(self._handlers.disconnected, disconnect_reason(flags, reason))

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        if self._driver is not None:
            self._driver.packets += 1
        self._inbound.append(
            Inbound(
                topic=msg.topic,
                payload=bytes(msg.payload),
                qos=msg.qos,
                mid=msg.mid,
                generation=self._generation,
                retained=bool(msg.retain),
                expiry_s=getattr(getattr(msg, "properties", None), "MessageExpiryInterval", None),
            )
        )
        if self._arrived is not None:
            self._arrived.set()  # one wake-up per burst: a batch at work takes the rest

    def _on_publish(self, _c: paho.Client, _u: Any, mid: int, reason: Any, _p: Any) -> None:
        if self._driver is not None:
            self._driver.packets += 1
        waiter = self._waiters.pop(mid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(not reason.is_failure)
        self._in_callback = True
        try:
            self._handlers.published(mid)
        except Exception:  # paho's suppress_exceptions would swallow it unlogged
            log.exception("PUBACK hand-off failed for mid %d", mid)
        finally:
            self._in_callback = False

    # --- connection: what loop_start did -----------------------------------------------------
    def start(self, *, subscriptions: list[str], will: LastWill, handlers: ChannelHandlers) -> None:
        """Connect in the background; retried with backoff until the broker answers."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._arrived = asyncio.Event()
        self._subscriptions = subscriptions
        self._handlers = handlers
        self._client.will_set(will.topic, will.payload, qos=1, retain=True)
        props: Properties | None = None
        if self._v5:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = self._settings.session_expiry_s
        self._client.connect_async(  # records where and how; connects nothing yet
            self._settings.host,
            self._settings.port,
            keepalive=self._settings.keepalive_s,
            clean_start=False if self._v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
            properties=props,
        )
        self._driver = LoopDriver(loop, self._client)
        self._driver.full = lambda: len(self._inbound) >= MAX_QUEUED
        # the first TCP connect starts now, beside the rest of the start-up, as loop_start's did
        self._opening = open_in_thread(loop, self._client)
        self._task = loop.create_task(self._keep_connected(), name="mqtt-connection")

    async def _keep_connected(self) -> None:
        """Connect; after a failed attempt or a lost connection, again after a wait that starts
        at reconnect_min_s and doubles up to reconnect_max_s (back to the minimum once a broker
        accepted us)."""
        low, high = self._settings.reconnect_min_s, self._settings.reconnect_max_s
        delay = low
        while not self._stopping:
            try:
                accepted = await self._connect_once()
            except Exception:  # a bug here must not end reconnecting
                log.exception("MQTT connect attempt failed")
                accepted = False
            delay = low if accepted else delay
            await asyncio.sleep(delay)
            delay = min(delay * 2, high)

    async def _connect_once(self) -> bool:
        """One attempt; returns once its connection is gone, telling whether it was accepted."""
        assert self._loop is not None and self._driver is not None
        client, driver = self._client, self._driver
        opening, self._opening = self._opening, None
        try:
            client.prepared = await (opening or open_in_thread(self._loop, client))
        except Exception as exc:  # refused, unreachable, timed out, TLS refused, DNS
            self._tell(self._handlers.disconnected, f"connect failed: {exc}")
            return False
        self._accepted = False
        self._up = False
        self._forget_unsent()
        try:
            with driver.writing_now():
                client.reconnect()  # on the loop: on_socket_open registers it; CONNECT sent
        except Exception as exc:
            if client.prepared is not None:
                client.prepared.close()
                client.prepared = None
            self._tell(self._handlers.disconnected, f"connect failed: {exc}")
        await driver.closed.wait()
        self._up = False  # a socket we gave up ourselves (`drop`) tells paho nothing
        return self._accepted

    def _forget_unsent(self) -> None:
        """Before a new connection: what paho still holds from before is dropped, not re-sent
        (paho would send it with the properties it was given, its MQTT 5 expiry computed before
        the outage). The outbox hands its rows again once the connection is up; a status is
        published on every connect; `publish_and_wait`'s waiters, if any, time out."""
        dropped = self._client.drop_out_messages()
        if dropped:
            log.info("%d unacknowledged publishes of the last connection dropped", len(dropped))

    @property
    def connection(self) -> int | None:
        """The number of the connection up now (one per successful CONNACK), None while none
        is: the outbox hands rows only while it is a number, and hands them all again when it
        changes (their paho copies were dropped, `_forget_unsent`)."""
        return self._generation if self._up else None

    # --- loop thread ----------------------------------------------------------------------
    def _send(
        self, topic: str, payload: bytes, qos: int, retain: bool, props: Properties | None
    ) -> paho.MQTTMessageInfo:
        if self._driver is None or self._in_callback:  # written on the loop's next turn
            return self._client.publish(topic, payload, qos=qos, retain=retain, properties=props)
        with self._driver.writing_now():
            return self._client.publish(topic, payload, qos=qos, retain=retain, properties=props)

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:
        """Send a publish (now, when connected); returns its mid (PUBACK arrives via
        `published`). `expiry_s`: the MQTT 5 message expiry interval (a broker drops the
        message once it has passed; on 3.1.1 there is none and the receiver checks the
        payload's `deadline`)."""
        props = expiry_properties(expiry_s) if self._v5 and expiry_s is not None else None
        info = self._send(topic, payload, qos, retain, props)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            log.warning("publish on %s not queued: %s", topic, paho.error_string(info.rc))
        return int(info.mid)

    def publish_now(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int | None:
        """Publish beside the outbox, nothing durable (e.g. a cancel or a `safe_stop` while the
        DB refuses writes): written to the socket now when a connection is up, returning its mid
        (its PUBACK arrives via `published`); None when none is, and then nothing is kept in
        paho to go later. A lost connection drops it like every unacknowledged publish
        (`_forget_unsent`): a caller that must be heard sends it again, or writes it to the
        outbox once the DB takes writes. `expiry_s` as `publish`'s, computed by the caller now."""
        if self.connection is None:
            return None
        return self.publish(topic, payload, qos=qos, retain=retain, expiry_s=expiry_s)

    async def batches(self, limit: int) -> AsyncIterator[Batch]:
        """Inbound messages as they arrive, a batch at a time (at most `limit` each); the loop
        gets a turn between batches of a long burst."""
        assert self._arrived is not None, "start() first"
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._inbound:
                yield Batch(self._inbound, limit)
                if self._driver is not None:
                    self._driver.resume()  # room again: what waited in the socket comes in
                await asyncio.sleep(0)

    async def publish_and_wait(
        self, topic: str, payload: bytes, *, retain: bool = False, timeout_s: float = 1.0
    ) -> bool:
        """Publish QoS 1 and wait up to `timeout_s` for its PUBACK (on_publish settles it)."""
        info = self._send(topic, payload, 1, retain, None)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            return False
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters[info.mid] = waiter
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return False
        finally:
            if self._waiters.get(info.mid) is waiter:
                del self._waiters[info.mid]

    def sending(self) -> AbstractContextManager[object]:
        """Publishes and acks made in it go to the socket in one send as it ends (outside
        paho's callbacks; inside them paho's packets go on the loop's next turn anyway)."""
        if self._driver is None or self._in_callback:
            return nullcontext()
        return self._driver.writing_now()

    def ack(self, message: Inbound) -> None:
        """PUBACK an inbound message, unless it came on an earlier connection."""
        if message.qos > 0 and message.generation == self._generation:
            if self._driver is None or self._in_callback:
                self._client.ack(message.mid, message.qos)
                return
            with self._driver.writing_now():
                self._client.ack(message.mid, message.qos)

    def stop(self) -> None:
        """Stop reconnecting and disconnect cleanly (DISCONNECT: the broker drops the last will;
        the runtime said `offline` itself). Bounded: nothing here waits on the network; a
        DISCONNECT the socket cannot take is dropped with the socket (the will then tells)."""
        self._stopping = True
        if self._opening is not None:
            self._opening.cancel()  # its socket, when it comes, is closed
        if self._task is not None:
            self._task.cancel()
        driver = self._driver
        if driver is None or self._client.socket() is None:
            return
        with driver.writing_now():
            self._client.disconnect()
        driver.drop()  # nothing left to drop once the DISCONNECT went out: paho closed it

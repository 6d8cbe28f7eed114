"""paho-mqtt driven by the asyncio loop instead of its network thread (`loop_start`).

As paho's examples/loop_asyncio.py and aiomqtt do: paho's socket callbacks register the socket
with the loop (`add_reader` -> `loop_read`), writes go out from the loop (`loop_write`), and a
timer calls `loop_misc` (keepalive PINGREQ; a broker that stops answering is dropped). Every
paho call and callback then runs on the loop thread: no thread hop, no GIL hand-off per message.

The one blocking part of paho's `reconnect()` is making the socket (TCP connect, TLS handshake;
up to `connect_timeout` each). `LoopClient` makes it in a short-lived daemon thread with paho's
own code (`open_socket`) and hands it to `reconnect()` on the loop, so paho's state is only ever
touched by the loop thread and a blackholed broker never freezes the loop. A daemon thread (not
the default executor) so that a stalled connect cannot hold the process at exit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal

import paho.mqtt.client as paho
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

log = logging.getLogger(__name__)

MISC_EVERY_S = 1.0  # paho's own loop calls loop_misc at least once a second
READ_ROUNDS = 100  # loop_read calls per readiness while they bring packets: a burst in one go
READ_CHUNK = 65536  # bytes one recv may bring; paho takes its packets from them
SocketLike = Any  # paho's SocketLike: here a socket.socket or an ssl.SSLSocket


# what follows the packet id of a PUBACK that says success and carries no properties (MQTT 5
# 3.4.2.1: the reason code and the property length may be left out); shared, never changed
_PLAIN_SUCCESS = (b"", b"\x00", b"\x00\x00")
_PUBACK_SUCCESS = ReasonCode(PacketTypes.PUBACK, identifier=0)
_PUBACK_NO_PROPS = Properties(PacketTypes.PUBACK)  # type: ignore[no-untyped-call]


class LoopClient(paho.Client):
    """A paho client whose `reconnect()` takes a socket made beforehand (`open_socket`, in a
    thread) instead of connecting, blocking, itself."""

    prepared: SocketLike | None = None

    def open_socket(self) -> SocketLike:
        """TCP connect and TLS handshake with paho's own code (its timeouts, SNI, hostname
        check); blocking: run it off the loop."""
        return paho.Client._create_socket(self)

    def _handle_pubackcomp(self, cmd: Literal["PUBACK", "PUBCOMP"]) -> MQTTErrorCode:
        """A successful MQTT 5 PUBACK without properties (what a broker sends for almost every
        publish) is told with one shared reason code and empty properties: paho's decoder builds
        a new `ReasonCode` and `Properties` (each filling its name tables) for every PUBACK,
        10-30 µs each. Anything else (a failure, properties, MQTT 3.1.1, PUBCOMP) is paho's."""
        packet = self._in_packet["packet"]
        if cmd != "PUBACK" or self._protocol != paho.MQTTv5 or packet[2:] not in _PLAIN_SUCCESS:
            return super()._handle_pubackcomp(cmd)
        (mid,) = struct.unpack("!H", packet[:2])
        with self._out_message_mutex:
            if mid in self._out_messages:
                rc: MQTTErrorCode = self._do_on_publish(mid, _PUBACK_SUCCESS, _PUBACK_NO_PROPS)
                return rc
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def _packet_write(self) -> MQTTErrorCode:
        """Packets queued together go to the socket in one send (`coalesce`): paho sends each
        apart, a syscall and a TCP segment each, the broker woken for each."""
        if len(self._out_packet) > 1:
            coalesce(self._out_packet)
        rc: MQTTErrorCode = super()._packet_write()
        return rc

    _read_from: SocketLike | None = None  # the socket `_read_buffer` came from
    _read_buffer = b""
    _read_at = 0

    def _sock_recv(self, bufsize: int) -> bytes:
        """paho reads a packet's first byte, its length bytes and its body apart, a syscall
        each (and one more that finds nothing): here they come from what one `recv` of up to
        READ_CHUNK bytes brought. What is left after a read is `buffered` (see `LoopDriver`)."""
        if self._read_from is not self._sock:  # a new connection: nothing of the old one
            self._read_from, self._read_buffer, self._read_at = self._sock, b"", 0
        buffer, at = self._read_buffer, self._read_at
        if at >= len(buffer):
            data = super()._sock_recv(READ_CHUNK)  # raises as paho's does: it handles that
            if len(data) <= bufsize:
                return data  # also b"": the end of the stream
            self._read_buffer = buffer = data
            at = 0
        self._read_at = at + bufsize
        return buffer[at : at + bufsize]

    def buffered(self) -> bool:
        """Bytes of the current connection were read and not yet taken by paho."""
        return self._read_from is self._sock and self._read_at < len(self._read_buffer)

    def _create_socket(self) -> SocketLike:
        sock, self.prepared = self.prepared, None
        if sock is None:  # paho reconnecting by itself (a v3.1 downgrade): not on the loop
            raise OSError("no connected socket prepared")
        return sock


def _quiet(packet: dict[str, Any]) -> bool:
    """Nothing happens once it is written (paho acts only after a QoS 0 PUBLISH, which tells
    on_publish, and after a DISCONNECT, which closes the socket)."""
    kind = packet["command"] & 0xF0
    return kind != paho.DISCONNECT and not (kind == paho.PUBLISH and packet["qos"] == 0)


def coalesce(out: collections.deque[Any]) -> None:
    """Runs of queued packets that need nothing after their write become one packet of their
    bytes, in order (a PUBACK-typed stand-in: paho does nothing after writing one). A QoS 1
    PUBLISH is settled by its PUBACK, not by its write, so nothing is lost in the join."""
    packets, run = list(out), list[Any]()
    out.clear()
    for packet in [*packets, None]:
        if packet is not None and _quiet(packet):
            run.append(packet)
            continue
        if len(run) == 1:
            out.append(run[0])
        elif run:
            data = b"".join(p["packet"][p["pos"] :] for p in run)
            out.append(
                {
                    "command": paho.PUBACK,
                    "mid": 0,
                    "qos": 0,
                    "pos": 0,
                    "to_process": len(data),
                    "packet": data,
                    "info": None,
                }
            )
        run = []
        if packet is not None:
            out.append(packet)


def open_in_thread(loop: asyncio.AbstractEventLoop, client: LoopClient) -> asyncio.Future[Any]:
    """`client.open_socket()` in a daemon thread; the future gets the socket or the error. A
    socket arriving after the future was cancelled (a stop) or the loop closed is closed."""
    future: asyncio.Future[Any] = loop.create_future()

    def settle(sock: SocketLike | None, exc: BaseException | None) -> None:
        if future.cancelled():
            if sock is not None:
                sock.close()
        elif exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(sock)

    def work() -> None:
        sock: SocketLike | None = None
        error: BaseException | None = None
        try:
            sock = client.open_socket()
        except Exception as exc:  # any failure is a failed attempt, told
            error = exc
        try:
            loop.call_soon_threadsafe(settle, sock, error)
        except RuntimeError:  # the loop closed meanwhile
            if sock is not None:
                sock.close()

    threading.Thread(target=work, name="mqtt-connect", daemon=True).start()
    return future


class LoopDriver:
    """Wires a paho client's socket to the running loop. `packets` is bumped by the owner's
    on_message/on_publish: reading goes on while a round brings packets, up to READ_ROUNDS."""

    def __init__(self, loop: asyncio.AbstractEventLoop, client: paho.Client) -> None:
        self._loop = loop
        self._client = client
        self._sock: socket.socket | None = None
        self._writer: socket.socket | None = None
        self._flush_scheduled = False
        self._direct = False  # a write of ours follows at once: no flush to schedule
        self._misc: asyncio.TimerHandle | None = None
        self.packets = 0
        # the owner's inbound queue is full: the socket is not read until `resume` (memory
        # stays bounded in a flood; the rest waits in the socket and at the broker)
        self.full: Callable[[], bool] = lambda: False
        self._held_up = False
        self._read_soon = False  # a read of what the client buffered is scheduled
        self.closed = asyncio.Event()  # the socket paho opened last is closed
        self.closed.set()
        client.on_socket_open = self._on_open
        client.on_socket_close = self._on_close
        client.on_socket_register_write = self._on_register_write
        client.on_socket_unregister_write = self._on_unregister_write

    # --- paho's socket callbacks (on the loop thread) ----------------------------------------
    def _on_open(self, _c: paho.Client, _u: Any, sock: SocketLike) -> None:
        # Nagle off: see edge.channel.mqtt.no_delay
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._held_up = False
        self.closed.clear()
        self._loop.add_reader(sock, self._read)
        self._misc = self._loop.call_later(MISC_EVERY_S, self._run_misc)

    def _on_close(self, _c: paho.Client, _u: Any, sock: SocketLike) -> None:
        mine = self._sock
        if mine is None or sock is not mine:  # already unhooked (`drop`)
            return
        self._loop.remove_reader(mine)
        if self._writer is not None:
            self._loop.remove_writer(self._writer)
            self._writer = None
        if self._misc is not None:
            self._misc.cancel()
            self._misc = None
        self._sock = None
        self.closed.set()

    def _on_register_write(self, _c: paho.Client, _u: Any, _sock: SocketLike) -> None:
        if not self._direct and not self._flush_scheduled:
            self._flush_scheduled = True  # paho queued a packet inside a callback: next turn
            self._loop.call_soon(self._flush)

    def _on_unregister_write(self, _c: paho.Client, _u: Any, _sock: SocketLike) -> None:
        if self._writer is not None:
            self._loop.remove_writer(self._writer)
            self._writer = None

    # --- the loop's side ---------------------------------------------------------------------
    def _read(self) -> None:
        client = self._client
        try:
            for _ in range(READ_ROUNDS):
                if self.full() and self._sock is not None:
                    self._held_up = True
                    self._loop.remove_reader(self._sock)
                    return
                seen = self.packets
                if client.loop_read() != MQTTErrorCode.MQTT_ERR_SUCCESS or seen == self.packets:
                    break
            sock = client.socket()  # TLS: records already decrypted raise no readiness
            while isinstance(sock, ssl.SSLSocket) and sock.pending():
                client.loop_read()
                sock = client.socket()
            if isinstance(client, LoopClient) and client.buffered() and not self._read_soon:
                self._read_soon = True  # read, raising no readiness either: the loop's next turn
                self._loop.call_soon(self._read_buffered)
        except Exception:  # a bug must not kill reading: the socket is given up, we reconnect
            log.exception("reading from the broker failed; dropping the connection")
            self.drop()

    def _read_buffered(self) -> None:
        self._read_soon = False
        if self._sock is not None and not self._held_up:
            self._read()

    def resume(self) -> None:
        """The owner's queue has room again: the socket is read again, now (a TLS record
        already decrypted makes it no more readable)."""
        if self._held_up and self._sock is not None and not self.full():
            self._held_up = False
            self._loop.add_reader(self._sock, self._read)
            self._read()

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.write()

    def write(self) -> None:
        """Write what paho queued, now; what the socket cannot take waits for writability."""
        client = self._client
        if not client.want_write():
            return
        client.loop_write()
        sock = self._sock
        if client.want_write() and sock is not None and self._writer is None:
            self._writer = sock
            self._loop.add_writer(sock, client.loop_write)

    @contextlib.contextmanager
    def writing_now(self) -> Iterator[None]:
        """Around paho calls made outside paho's callbacks: their packets go out at once, as
        the outermost of nested scopes ends (one send: `LoopClient._packet_write`)."""
        outer = not self._direct
        self._direct = True
        try:
            yield
        finally:
            if outer:
                self._direct = False
        if outer:  # nested: the outermost writes what they all queued, in one go
            self.write()

    def _run_misc(self) -> None:
        self._misc = None
        if self._sock is None:
            return
        self._client.loop_misc()  # keepalive; may close the socket (and call _on_close)
        if self._sock is not None:
            self._misc = self._loop.call_later(MISC_EVERY_S, self._run_misc)

    def drop(self) -> None:
        """Give the socket up now: paho then sees it closed (on_socket_close, on_disconnect)."""
        sock: socket.socket | None = self._sock
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        for _ in range(READ_ROUNDS):  # reads what was left, then the end of the stream
            if self._sock is not sock or self._client.loop_read() != MQTTErrorCode.MQTT_ERR_SUCCESS:
                break
        if self._sock is not None:  # paho never saw the end: unhook and close it ourselves
            self._on_close(self._client, None, self._sock)
            sock.close()

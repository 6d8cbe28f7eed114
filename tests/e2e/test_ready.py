"""READY=1 comes once the broker holds the runtime's subscriptions (its SUBACK, or a session it
kept): a sender that waits for READY and then publishes on a fresh broker is not dropped for
want of a subscriber. A broker that never answers delays READY by a second at most.

The broker here is a stand-in that speaks just enough MQTT 5 to hold the SUBACK back."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any, cast

from sim.broker import Mosquitto
from sim.processes import RuntimeProcess
from tests.conftest import runtime_config

CONNACK = bytes([0x20, 0x03, 0x00, 0x00, 0x00])  # v5, no session, success, no properties


def _read_packet(conn: socket.socket) -> tuple[int, bytes]:
    head = conn.recv(1)
    if not head:
        raise ConnectionError
    length, shift = 0, 0
    while True:
        byte = conn.recv(1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ConnectionError
        body += chunk
    return head[0] >> 4, body


class HeldSuback:
    """Accepts one client, answers CONNACK (no session), and holds the SUBACK until
    `release()`; answers PINGREQ; ignores the rest."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.subscribed = threading.Event()
        self._release = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def release(self) -> None:
        self._release.set()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
            while True:
                kind, body = _read_packet(conn)
                if kind == 1:  # CONNECT
                    conn.sendall(CONNACK)
                elif kind == 8:  # SUBSCRIBE: packet id, properties, filters
                    self.subscribed.set()
                    self._release.wait(30)
                    filters = body.count(b"a2a/")  # one reason code per filter
                    suback = body[:2] + b"\x00" + b"\x01" * filters
                    conn.sendall(bytes([0x90, len(suback)]) + suback)
                elif kind == 12:  # PINGREQ
                    conn.sendall(b"\xd0\x00")
        except (ConnectionError, OSError, IndexError):
            return

    def close(self) -> None:
        self.sock.close()


def test_ready_waits_for_the_suback_of_a_fresh_session(tmp_path: Path) -> None:
    broker = HeldSuback()
    fake = cast(Mosquitto, cast(Any, type("Port", (), {"port": broker.port})))
    runtime = RuntimeProcess(runtime_config(tmp_path, fake, "http://127.0.0.1:1"), tmp_path)
    try:
        runtime.start(wait_ready=False)
        assert broker.subscribed.wait(15)
        # before: READY=1 was sent before the connection was even made
        assert runtime.notify is not None
        assert "READY=1" not in runtime.notify.lines
        held_at = time.monotonic()
        broker.release()
        assert runtime.wait_line("READY=1", 15)
        assert time.monotonic() - held_at < 5
    finally:
        runtime.close()
        broker.close()


def test_ready_comes_without_a_broker(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there
    fake = cast(Mosquitto, cast(Any, type("Port", (), {"port": port})))
    runtime = RuntimeProcess(runtime_config(tmp_path, fake, "http://127.0.0.1:1"), tmp_path)
    try:
        started = time.monotonic()
        runtime.start(wait_ready=True, timeout_s=15)
        assert time.monotonic() - started < 10  # a second's wait at most for the broker
    finally:
        runtime.close()

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from edge.host.notify import Notifier


def _listener(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(2)
    return sock


def test_ready_reaches_a_path_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "n.sock")
    sock = _listener(path)
    try:
        notifier = Notifier({"NOTIFY_SOCKET": path})
        assert notifier.ready("broker connected")
        assert sock.recv(1024).decode() == "READY=1\nSTATUS=broker connected"
        assert notifier.stopping()
        assert sock.recv(1024) == b"STOPPING=1"
    finally:
        sock.close()


def test_abstract_socket_with_at_sign() -> None:
    name = f"a2a-test-{uuid.uuid4().hex}"
    sock = _listener("\0" + name)
    try:
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).watchdog()
        assert sock.recv(1024) == b"WATCHDOG=1"
    finally:
        sock.close()


def test_without_socket_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.ready() is False


def test_watchdog_interval_is_half_the_window_and_respects_pid() -> None:
    assert Notifier({"WATCHDOG_USEC": "4000000"}).watchdog_interval_s == 2.0
    mine = {"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier(mine).watchdog_interval_s == 2.0
    other = {"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}
    assert Notifier(other).watchdog_interval_s is None
    assert Notifier({"WATCHDOG_USEC": "junk"}).watchdog_interval_s is None


def test_reloading_carries_the_monotonic_time(tmp_path: Path) -> None:
    path = str(tmp_path / "n.sock")
    sock = _listener(path)
    try:
        assert Notifier({"NOTIFY_SOCKET": path}).reloading(123456)
        assert sock.recv(1024) == b"RELOADING=1\nMONOTONIC_USEC=123456"
    finally:
        sock.close()

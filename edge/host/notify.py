"""sd_notify in pure Python: READY/RELOADING/WATCHDOG/STATUS/STOPPING to `$NOTIFY_SOCKET`.

A path starting with `@` is an abstract socket (leading NUL). Without a socket it does nothing,
so the same code runs under systemd, in tests and by hand.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        path = env.get("NOTIFY_SOCKET", "")
        self._address = ("\0" + path[1:]) if path.startswith("@") else path
        self._watchdog_s = self._watchdog_interval(env)

    @staticmethod
    def _watchdog_interval(env: Mapping[str, str]) -> float | None:
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if not usec.isdigit() or int(usec) <= 0 or (pid and pid != str(os.getpid())):
            return None
        return int(usec) / 1_000_000 / 2  # ping twice per window

    @property
    def watchdog_interval_s(self) -> float | None:
        return self._watchdog_s

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, *lines: str) -> bool:
        if not self._address:
            return False
        data = "\n".join(lines).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self._address)
                sock.sendall(data)
        except OSError as exc:
            log.warning("sd_notify to %r failed: %s", self._address, exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self, monotonic_usec: int) -> bool:
        """sd_notify(3): a reload begins; READY=1 (`ready()`) says it is done."""
        return self.send("RELOADING=1", f"MONOTONIC_USEC={monotonic_usec}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

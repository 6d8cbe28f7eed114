"""The broker session's subscriptions, as a `DeviceAgent` keeps them (SPEC §2): which topics
the session is known to hold, the SUBSCRIBEs still awaiting their SUBACK, whether the agent is
connected, and — once every wanted topic is acknowledged — ready. Driven from paho's network
thread (CONNACK, SUBACK, disconnect) and from `DeviceAgent.handle()`, under one lock; no team
code runs here.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import paho.mqtt.client as paho

log = logging.getLogger("a2a_agent")


class Subscriptions:
    def __init__(self, root: str) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._session: set[str] = set()  # topics the broker's session is known to hold
        self._pending: dict[int, list[str]] = {}  # SUBSCRIBE mid -> its topics
        self.ready = threading.Event()
        self.refused: str | None = None  # why the broker refused the connect or a SUBSCRIBE
        self.connected = False

    def on_connect(self, flags: Any, reason: Any) -> bool:
        """A CONNACK; True when the broker accepted (the caller then subscribes)."""
        if reason.is_failure:
            self.refused = f"broker refused the connection: {reason}"
            self.ready.set()
            log.error("device agent %s: %s", self._root, self.refused)
            return False
        with self._lock:
            self.connected = True
            self.refused = None  # accepted now: an earlier refusal is over
            if not flags.session_present:  # a new or lost session: no subscriptions
                self._session.clear()
        return True

    def on_disconnect(self) -> None:
        with self._lock:
            self.connected = False
            self.ready.clear()
            self._pending.clear()  # SUBACKs of a lost connection never come

    def subscribe(self, client: paho.Client, wanted: list[str]) -> None:
        """Ask for the wanted topics the session neither holds nor has been asked for."""
        with self._lock:
            asked = {topic for topics in self._pending.values() for topic in topics}
            missing = [t for t in wanted if t not in self._session and t not in asked]
            if missing:
                self.ready.clear()
                _rc, mid = client.subscribe([(topic, 1) for topic in missing])
                if mid is not None:  # None: not connected; the next connect asks again
                    self._pending[mid] = missing
            elif not self._pending:
                self.ready.set()

    def on_suback(self, mid: int, codes: list[Any]) -> None:
        with self._lock:
            self._take_suback(mid, codes)

    def _take_suback(self, mid: int, codes: list[Any]) -> None:
        topics = self._pending.pop(mid, [])
        for topic, code in zip(topics, codes, strict=False):
            if not code.is_failure:
                self._session.add(topic)
            elif topic.endswith("/runtime/error"):  # the agent works without; it is told less
                log.warning("device agent: %s denied (%s): refusals go unseen", topic, code)
                self._session.add(topic)  # not asked again on every reconnect
            else:
                self.refused = f"broker refused the subscription to {topic}: {code}"
                log.error("device agent %s: %s", self._root, self.refused)
        if not self._pending:
            self.ready.set()

"""The broker as the device sees it: publishes in (recorded, delivered to the peers at once while
a connection is up), inbound messages out (held at the broker while none is, redelivered when
unacknowledged), PUBACKs on the simulator's say."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from a2a_common.clock import Clock
from edge.channel.mqtt import Inbound


@dataclass
class Sent:
    step: int
    topic: str
    body: Any
    mid: int
    generation: int
    expiry_s: int | None
    direct: bool = False  # publish_now (the safety lane), beside the outbox
    at: datetime | None = None  # the simulated wall clock when it reached the broker


@dataclass
class SimWire:
    root: str
    clock: Clock
    up: bool = True
    generation: int = 1
    step: int = 0
    sent: list[Sent] = field(default_factory=list)  # delivered to the broker, in order
    unpubacked: list[int] = field(default_factory=list)  # mids of this generation
    acked: set[int] = field(default_factory=set)  # inbound mids the device acknowledged
    acked_at: dict[int, int] = field(default_factory=dict)  # mid -> wire index at its first ack
    mid: int = 0
    in_mid: int = 0
    queued: list[Inbound] = field(default_factory=list)  # at the broker, for the device
    unacked: dict[int, Inbound] = field(default_factory=dict)  # delivered, not acknowledged
    # delivered, not acknowledged, and the broker lost the session: only the device has them
    orphans: dict[int, Inbound] = field(default_factory=dict)
    # the process's first SUBACK came (the runtime's start waits on it; devicesim/agents.py)
    receiving: asyncio.Event = field(default_factory=asyncio.Event)

    # --- what the device's code calls (MqttChannel's surface) --------------------------------
    @property
    def connection(self) -> int | None:
        return self.generation if self.up else None

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
        direct: bool = False,
    ) -> int:
        self.mid += 1
        if self.up:  # while down paho keeps it in memory; it is dropped at the next connect
            body = json.loads(payload)
            self.sent.append(
                Sent(
                    self.step,
                    topic,
                    body,
                    self.mid,
                    self.generation,
                    expiry_s,
                    direct,
                    self.clock.now(),
                )
            )
            if qos:
                self.unpubacked.append(self.mid)
        return self.mid

    def publish_now(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int | None:
        if not self.up:
            return None
        return self.publish(topic, payload, qos=qos, retain=retain, expiry_s=expiry_s, direct=True)

    async def publish_and_wait(self, topic: str, payload: bytes, **_kw: Any) -> bool:
        self.publish(topic, payload)
        return self.up

    def ack(self, message: Inbound) -> None:
        self.acked.add(message.mid)
        self.orphans.pop(message.mid, None)
        self.acked_at.setdefault(message.mid, len(self.sent))
        self.unacked.pop(message.mid, None)

    # --- the broker's side --------------------------------------------------------------------
    def inbound(self, kind: str, payload: bytes) -> Inbound:
        self.in_mid += 1
        return Inbound(f"{self.root}/{kind}", payload, 1, self.in_mid, self.generation, False)

    def drop(self) -> None:
        """The connection is gone: what paho held is lost, PUBACKs of it never come."""
        self.up = False
        self.unpubacked.clear()

    def connect(self, *, session_kept: bool) -> list[Inbound]:
        """A new connection; returns what the broker delivers on it first: unacknowledged
        messages again (kept session), then what queued meanwhile."""
        self.up = True
        self.generation += 1
        again = list(self.unacked.values()) if session_kept else []
        if not session_kept:
            self.queued.clear()
            self.orphans.update(self.unacked)
        self.unacked.clear()
        waiting, self.queued = self.queued, []
        return [*again, *waiting]

    def topics(self, suffix: str, since: int = 0) -> list[Sent]:
        full = f"{self.root}/{suffix}"
        return [s for s in self.sent[since:] if s.topic == full]

"""A simulated perception agent (SPEC §4.6): semantic observations of the robot's surroundings —
air quality and noise in a room — on `P/observation`, built on `a2a_agent.DeviceAgent` like the
device agents (it only publishes; refusals come back on `P/runtime/error` with the
`observation_id` in `ref`).

Faults on purpose: `stale` (observed an hour ago), `out_of_scope` (in another room than asked),
`future` (a minute ahead of the clock), `flood` (many observations of one kind at once, each
with its own id). `clock_offset_s` follows a runtime whose clock is moved (the demo's days).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from a2a_agent import DeviceAgent
from a2a_common.clock import iso

FAULTS = ("stale", "out_of_scope", "future", "flood")
FLOOD = 40
OTHER_ROOM = {"현관": "안방"}


class PerceptionAgent:
    def __init__(
        self,
        port: int,
        root: str,
        *,
        host: str = "127.0.0.1",
        protocol: str = "5",
        room: str = "거실",
        clock_offset_s: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.room = room
        self._offset = clock_offset_s
        self.sent: list[dict[str, Any]] = []
        self.agent = DeviceAgent(
            root,
            client_id=f"sim-perception-{root.replace('/', '-')}",
            host=host,
            port=port,
            protocol=protocol,
            reconnect_max_s=1,
        )
        try:
            self.agent.start(10)
        except ConnectionError as exc:
            self.agent.close()
            raise TimeoutError("perception agent could not connect") from exc

    def _now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self._offset())

    def body(
        self,
        kind: str,
        value: dict[str, Any],
        *,
        room: str | None = None,
        fault: str | None = None,
        requires_cloud_decision: bool = False,
    ) -> dict[str, Any]:
        """One observation as it goes on the wire (a fault bends its time or its room)."""
        at = self._now()
        if fault == "stale":
            at -= timedelta(hours=1)
        elif fault == "future":
            at += timedelta(minutes=1)
        where = room or self.room
        if fault == "out_of_scope":
            where = OTHER_ROOM.get(where, "현관")
        return {
            "observation_id": f"obs-{uuid.uuid4().hex[:12]}",
            "kind": kind,
            "observed_at": iso(at),
            "scope": {"room": where},
            "value": value,
            "requires_cloud_decision": requires_cloud_decision,
        }

    def observe(
        self,
        kind: str,
        value: dict[str, Any],
        *,
        room: str | None = None,
        fault: str | None = None,
        requires_cloud_decision: bool = False,
    ) -> list[str]:
        """Publish it (a `flood`: FLOOD of them); the ids sent."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault}; one of {', '.join(FAULTS)}")
        ids = []
        for _ in range(FLOOD if fault == "flood" else 1):
            body = self.body(
                kind,
                value,
                room=room,
                fault=fault,
                requires_cloud_decision=requires_cloud_decision,
            )
            self.agent.publish("observation", body)
            self.sent.append(body)
            ids.append(body["observation_id"])
        return ids

    def noise(self, db: float, **options: Any) -> list[str]:
        return self.observe(
            "noise", {"level_db": db, "label": "loud" if db >= 55 else "calm"}, **options
        )

    def air_quality(self, pm25: float, **options: Any) -> list[str]:
        return self.observe("air_quality", {"pm25": pm25}, **options)

    def close(self) -> None:
        self.agent.close()

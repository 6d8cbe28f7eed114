"""The service's health as others see it: the retained `P/runtime/status` body, systemd's
`STATUS=` line, the heartbeat `a2a-edge status` reads, and what makes the service degraded."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from edge import __version__
from edge.app.device import DeviceApp
from edge.config.service_view import service_settings
from edge.host.beatfile import BeatFile
from edge.runtime.alarm import alarm_body, alarm_line
from edge.store.door import Door


@dataclass
class Health:
    app: DeviceApp
    door: Door
    started_at: str
    intake_held: Callable[[], int]
    intake_stopped: Callable[[], bool]  # the intake task ended while not stopping
    storage: Callable[[], str] = lambda: ""  # the disk full, the reserve given back (or "")
    broker_up: bool = False
    loop_lag: float = 0.0
    heartbeat_error: str = ""
    warnings: list[str] = field(default_factory=list)
    published_problems: list[str] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)  # unconfirmed cancels (edge/runtime/alarm.py)
    beat_file: BeatFile | None = None  # made at the first beat
    ready: bool = False  # READY=1 sent: the broker holds our subscriptions (`status --wait-ready`)

    def status(self, state: str) -> bytes:
        body: dict[str, Any] = {
            "state": state,
            "version": __version__,
            "started_at": self.started_at,
        }
        if state == "online" and self.warnings:
            body["warnings"] = self.warnings
        if state == "online" and self.alarms:
            body["alarm"] = alarm_body(self.alarms)
        if state == "online" and self.problems():
            body["health"] = "degraded"
            body["problems"] = self.problems()
        return jsonx.dumps(body).encode("utf-8")

    def _state(self) -> dict[str, Any]:
        """The app's health; a state DB that cannot be read (damaged, gone) says so instead
        of raising out of a status line or a channel callback."""
        try:
            return self.app.health()
        except Exception as exc:
            unread = f"? (state DB unreadable: {type(exc).__name__})"
            return {
                "cloud": "unknown",
                "mqtt_outbox": unread,
                "sync_outbox": unread,
                "sync_in_flight": 0,
                "active_workflows": 0,
                "experience_mode": "unknown",
                "wal": {},
                "wal_note": "",
            }

    def line(self) -> str:
        state = self._state()
        broker = "connected" if self.broker_up else "disconnected"
        line = (
            f"broker {broker}; cloud {state['cloud']}; mqtt outbox {state['mqtt_outbox']};"
            f" sync outbox {state['sync_outbox']}{state['wal_note']}"
        )
        problems = self.problems()
        line = f"degraded: {'; '.join(problems)}; {line}" if problems else line
        return alarm_line(self.alarms) + line

    def beat(self) -> dict[str, Any]:
        """What `a2a-edge status` reads to tell the service's health. Also written here, in
        place, into `<state_dir>/heartbeat` (edge/host/beatfile.py), which a full disk does not
        stop: the DB's row cannot be written then, and `status` said `unknown`."""
        beat = self._beat()
        if self.beat_file is None:
            self.beat_file = BeatFile(self.app.settings.state_db_path.parent)
        self.beat_file.write(beat)
        return beat

    def _beat(self) -> dict[str, Any]:
        state = self._state()
        now = self.app.clock.now()
        return {
            "ts": iso(now),
            # the service's clock less the host's (a demo's offset clock, a wall clock stepped
            # since start): `status` ages the beat on the host's clock with it, not as a skew
            "clock_offset_s": round((now - datetime.now(UTC)).total_seconds(), 1),
            "pid": os.getpid(),
            "ready": self.ready,
            "broker": "connected" if self.broker_up else "disconnected",
            "cloud": state["cloud"],
            "loop_lag_ms": round(self.loop_lag * 1000, 1),
            "active_workflows": state["active_workflows"],
            "sync_in_flight": state["sync_in_flight"],  # writes in the request being sent
            "experience_mode": state["experience_mode"],
            # SPEC 4.2: a standing cancel alarm degrades the service until an agent confirms
            "health": "degraded" if self.problems() or self.alarms else "ok",
            "problems": self.problems(),
            "alarm": alarm_body(self.alarms) if self.alarms else None,
            **state["wal"],  # wal_bytes, wal_residue, wal_blocked_s
            # the service's own view (its environment's overrides, a reload's), not the CLI's
            "settings": service_settings(self.app.settings),
        }

    def problems(self) -> list[str]:
        """What makes the service degraded now (empty: healthy)."""
        problems = []
        storage = self.storage()
        if storage:
            problems.append(storage)
        if self.intake_stopped():
            problems.append("inbound intake stopped: nothing more is taken in")
        failed = {k: n for k, n in sorted(self.door.failures.items()) if k != "inbound message"}
        for kind, count in failed.items():
            problems.append(f"{count} {kind} inputs failed (see the log)")
        held = self.intake_held()
        if held:
            problems.append(f"state DB refuses writes: {held} inbound messages held")
        others = [k for k in self.door.held_kinds() if k != "inbound message"]
        if others:
            problems.append(f"state DB refuses writes: {', '.join(others)} held")
        if self.heartbeat_error:
            problems.append(f"heartbeat not written: {self.heartbeat_error}")
        pinned = self.app.checkpointer.problem()  # SPEC §6: a reader outside pins the WAL
        if pinned:
            problems.append(pinned)
        stalled = self.app.sync_stalled_since()
        if stalled is not None:
            problems.append(f"sync makes no progress since {stalled}")
        return problems

"""The simulated robot the device agents act on: rooms on a floor plan, travel time, battery,
docking, the purifier's mode, and timed content/vital sessions. `time_scale` shrinks every
duration (tests and the demo run the same world faster)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROOM_POSITIONS: dict[str, tuple[float, float]] = {
    "거실": (0.0, 0.0),
    "안방": (6.0, 2.0),
    "작은방": (6.0, -3.0),
    "주방": (-4.0, 2.0),
    "서재": (-5.0, -3.0),
    "아이방": (8.0, 0.0),
    "현관": (-2.0, -6.0),
}
DOCK = (1.0, -1.0)
SPEED_M_S = 0.5
DRAIN_PER_M = 0.4  # battery % per metre
LOW_BATTERY = 5.0


@dataclass(frozen=True)
class TaskPlan:
    duration_s: float
    evidence: dict[str, Any]
    apply: Callable[[], None]
    fail_reason: str | None = None


def _distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    return math.dist(a, b)


class World:
    def __init__(
        self, *, current_room: str = "거실", battery: float = 82.0, time_scale: float = 1.0
    ) -> None:
        self._lock = threading.Lock()
        self.current_room = current_room
        self.position = ROOM_POSITIONS.get(current_room, (0.0, 0.0))
        self.battery = battery
        self.docked = False
        self.purifier_mode = "off"
        self.time_scale = time_scale

    def context(self) -> dict[str, Any]:
        with self._lock:
            return {
                "current_room": self.current_room,
                "battery": round(self.battery, 1),
                "docked": self.docked,
                "purifier_mode": self.purifier_mode,
            }

    def _scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def _travel(self, target: tuple[float, float], room: str | None) -> TaskPlan:
        distance = _distance(self.position, target)
        drain = distance * DRAIN_PER_M
        if self.battery - drain < LOW_BATTERY:
            return TaskPlan(0.0, {}, lambda: None, "battery_low")

        def arrive() -> None:
            with self._lock:
                self.position = target
                self.battery = max(0.0, self.battery - drain)
                self.docked = room is None
                if room is not None:
                    self.current_room = room
                else:
                    self.battery = 100.0  # charged at the dock (quickly, for the simulation)

        evidence = {"arrived_room": room} if room else {"docked": True}
        return TaskPlan(self._scaled(distance / SPEED_M_S), evidence, arrive)

    def plan(self, command: dict[str, Any]) -> TaskPlan:
        """What carrying out `command` takes and does (not yet applied)."""
        op = f"{command.get('capability_id')}.{command.get('operation_id')}"
        args = command.get("args") or {}
        if op == "mobility.move_to_room":
            room = args.get("room")
            if room not in ROOM_POSITIONS:
                return TaskPlan(0.0, {}, lambda: None, "unknown_room")
            return self._travel(ROOM_POSITIONS[room], room)
        if op == "mobility.return_to_dock":
            return self._travel(DOCK, None)
        if op.startswith("air_purifier."):
            mode = "off" if op == "air_purifier.stop" else str(args.get("mode", "auto"))

            def set_mode() -> None:
                with self._lock:
                    self.purifier_mode = mode

            return TaskPlan(self._scaled(1.0), {"purifier_mode": mode}, set_mode)
        minutes = float(args.get("minutes", 0) or 0)
        durations = {
            "display.show_content": 10.0,
            "content.play_guidance": 10.0,
            "speaker.say": 1.0,
            "vital_app.start_session": 30.0,
        }
        evidence: dict[str, dict[str, Any]] = {
            "vital_app.start_session": {"vital_interaction_ended": "completed"},
            "content.play_guidance": {"guidance_played": True},
            "display.show_content": {"content_shown": True},
            "speaker.say": {"spoken": True},
        }
        if op in durations:
            seconds = minutes * 60 if minutes else durations[op]
            return TaskPlan(self._scaled(seconds), evidence[op], lambda: None)
        return TaskPlan(0.0, {}, lambda: None, "unsupported_operation")

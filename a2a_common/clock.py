"""The one place that reads time; everything else is handed a Clock."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall-clock time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 6, 24, 20, 0, 0, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


_ISO: dict[datetime, str] = {}  # the instants written last: a workflow's are written at each save
MAX_ISO = 4096


def iso(ts: datetime) -> str:
    """RFC 3339 UTC with milliseconds and a `Z`, the form every payload uses."""
    if ts.tzinfo is not UTC:
        ts = ts.astimezone(UTC)
    text = _ISO.get(ts)
    if text is None:
        if len(_ISO) >= MAX_ISO:
            _ISO.clear()
        # isoformat's text in half its time (0.75 vs 1.5 us; an f-string with specs, 1.2)
        text = _ISO[ts] = "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031
            ts.year,
            ts.month,
            ts.day,
            ts.hour,
            ts.minute,
            ts.second,
            ts.microsecond // 1000,
        )
    return text


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def seconds_between(later: str, earlier: str) -> float:
    """The seconds from one RFC 3339 time to another (negative when `later` is earlier)."""
    return (parse_iso(later) - parse_iso(earlier)).total_seconds()


class OffsetClock:
    """The system clock shifted by the number of seconds written in a file (re-read when the
    file changes). For demos and tests only: `A2A_CLOCK_OFFSET_FILE` makes time pass (wall and
    monotonic both move: days go by), `A2A_WALL_SKEW_FILE` makes only the wall clock jump (what
    a bad RTC or an NTP step does)."""

    def __init__(self, path: str, *, wall_only: bool = False) -> None:
        self._path = path
        self._wall_only = wall_only
        self._stamp: float | None = None
        self._offset = timedelta(0)
        self._system = SystemClock()

    def _current_offset(self) -> timedelta:
        try:
            stamp: float = os.stat(self._path).st_mtime_ns
            if stamp != self._stamp:
                with open(self._path, encoding="utf-8") as fh:
                    self._offset = timedelta(seconds=float(fh.read().strip() or 0))
                self._stamp = stamp
        except (OSError, ValueError):
            pass
        return self._offset

    def now(self) -> datetime:
        return self._system.now() + self._current_offset()

    def monotonic(self) -> float:
        shift = 0.0 if self._wall_only else self._current_offset().total_seconds()
        return self._system.monotonic() + shift


class SteadyClock:
    """Wall time read once at start, then advanced by the monotonic clock: a wall-clock jump
    while the runtime runs moves no deadline and no wait (durations are monotonic); deadlines
    are stored as wall instants, so after a restart the new wall time applies and late ones
    fire at once."""

    def __init__(self, base: Clock) -> None:
        self._base = base
        self._anchor_wall = base.now()
        self._anchor_mono = base.monotonic()

    def now(self) -> datetime:
        return self._anchor_wall + timedelta(seconds=self._base.monotonic() - self._anchor_mono)

    def monotonic(self) -> float:
        return self._base.monotonic()

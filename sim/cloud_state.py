"""What the sim cloud remembers: faults, scripts, the request log, per-device bookkeeping."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Faults:
    latency_s: float = 0.0
    status: int | None = None
    malformed: bool = False
    drop: bool = False
    times: int | None = None
    path: str | None = None  # only requests to this path (None: every path)


@dataclass
class CloudState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    faults: Faults = field(default_factory=Faults)
    requests: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)  # write_id -> times applied (1)
    applied_log: list[dict[str, Any]] = field(default_factory=list)  # in application order
    duplicates: int = 0  # writes received again and acked without applying
    posts: list[dict[str, Any]] = field(default_factory=list)  # every HTTP request, as sent
    reports: dict[str, int] = field(default_factory=dict)  # report request_id -> times taken
    report_duplicates: int = 0  # reports received again, by either road, not applied again
    refuse_batch: int | None = None  # a batch of reports is answered this (404, 400): SPEC 3.3
    accept_max: int | None = None  # a batch of reports: at most this many taken (the first)
    hold: str | None = None  # answers held ("events": every event's, "batch": a batch's)
    held: int = 0  # answers waiting on `hold` now
    let_go: int = 0  # held answers that may go all the same (the next ones to wait)
    sync_script: list[dict[str, Any]] = field(default_factory=list)
    reject_marker: str | None = None
    reject_mode: str = "rejected"  # or "http422": the whole batch is refused
    turn_script: list[dict[str, Any]] = field(default_factory=list)
    decision_script: list[dict[str, Any] | None] = field(default_factory=list)
    suggestions: dict[str, str] = field(default_factory=dict)  # device -> room to propose
    consent_asks: dict[str, str] = field(default_factory=dict)  # device -> scope it asked for
    planned: dict[str, dict[str, Any]] = field(default_factory=dict)  # workflow_id -> request
    normalized: list[dict[str, Any]] = field(default_factory=list)  # planner memory contexts
    counter: int = 0

    def next_id(self, prefix: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{prefix}-{self.counter:05d}"

    def next_scripted(self, queue: list[Any]) -> tuple[bool, Any]:
        with self.lock:
            return (True, queue.pop(0)) if queue else (False, None)

    def take_fault(self, path: str) -> Faults:
        with self.lock:
            current = self.faults
            if current.path is not None and current.path != path:
                return Faults()
            if current.times is not None:
                current.times -= 1
                if current.times <= 0:
                    self.faults = Faults()
            return current

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)  # `hold` changed

    def take_report(self, request_id: object) -> None:
        """A workflow report taken (an event, an entry of a batch, a `task_terminal` write):
        applied once per `request_id`, whichever road it came by (call under `lock`)."""
        key = str(request_id)
        if key in self.reports:
            self.reports[key] += 1
            self.report_duplicates += 1
        else:
            self.reports[key] = 1

    def next_sync(self, device_id: str) -> dict[str, str]:
        with self.lock:
            n = self.versions.get(device_id, 0) + 1
            self.versions[device_id] = n
        return {"cursor": f"cur-{n}", "version": f"v{n}"}

"""Workflow reports to the cloud (SPEC §3.3): decision and terminal events, after the commit
that caused them, through one worker (one request in flight, in order). A terminal report the
cloud does not take goes through the sync outbox as a `task_terminal` write. Without a worker
(the CLI while no service runs) it goes there at once, in the unit of work that caused it, so
the service sends it when it next starts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.writes import SyncWrite
from cloud_client.client import CloudClient
from cloud_client.errors import CloudError
from sync.outbox import SyncOutbox
from taskmanager.events import Report

log = logging.getLogger(__name__)
EVENTS_PATH = "/v1/a2a/workflow/events"
Unit = Callable[[], AbstractContextManager[Any]]


class Reports:
    def __init__(
        self,
        *,
        cloud: CloudClient,
        clock: Clock,
        sync_outbox: SyncOutbox,
        device_id: str,
        deadline_s: float,
        live: bool,
    ) -> None:
        self._cloud = cloud
        self._clock = clock
        self._sync = sync_outbox
        self._device_id = device_id
        self._deadline_s = deadline_s
        self._live = live
        self._queue: asyncio.Queue[Report] = asyncio.Queue()
        self._sending: tuple[Report, dict[str, Any]] | None = None  # left set if cancelled

    def settle(self, reports: list[Report]) -> None:
        """Inside the unit of work that caused them."""
        if not self._live:
            for report in reports:
                self._undelivered(report, "no service runs")

    def committed(self, reports: list[Report]) -> None:
        if self._live:
            for report in reports:
                self._queue.put_nowait(report)

    async def run(self, *, unit: Unit, decide: Callable[[str, Any], None]) -> None:
        """The worker: `decide(workflow_id, decision)` applies a supervisor's answer."""
        while True:
            report = await self._queue.get()
            try:
                await self._send(report, unit, decide)
            except Exception:  # never let one report stop the worker
                log.exception("reporting workflow %s failed", report.workflow_id)

    def keep_left(self, unit: Unit) -> int:
        """At a stop: the terminal reports not delivered yet (queued, or the one in flight) go
        through the sync outbox, in one unit (SPEC §6: a clean stop loses no write). The one in
        flight may have reached the cloud: it keeps its request_id, so the cloud can tell."""
        left = [self._sending] if self._sending is not None else []
        while not self._queue.empty():
            report = self._queue.get_nowait()
            left.append((report, self._body(report)))
        kept = [(report, body) for report, body in left if report.terminal]
        if kept:
            with unit():
                for report, body in kept:
                    self._undelivered(report, "the service stopped", body)
        return len(kept)

    def _body(self, report: Report) -> dict[str, Any]:
        return {"request_id": new_ulid(self._clock), "device_id": self._device_id, **report.body}

    async def _send(self, report: Report, unit: Unit, decide: Callable[[str, Any], None]) -> None:
        body = self._body(report)
        self._sending = (report, body)
        try:
            status, answer = await self._cloud.post_json(
                EVENTS_PATH, body, deadline_s=self._deadline_s
            )
        except CloudError as exc:
            self._sending = None
            log.warning("workflow %s event not delivered: %s", report.workflow_id, exc)
            if report.decision_requested:
                decide(report.workflow_id, None)
            with unit():
                self._undelivered(report, str(exc), body)
            return
        self._sending = None
        if report.decision_requested:
            ok = isinstance(answer, dict) and status == 200
            decide(report.workflow_id, answer.get("decision") if ok else None)

    def _undelivered(self, report: Report, why: str, body: dict[str, Any] | None = None) -> None:
        if report.terminal:
            self._sync.enqueue([SyncWrite("task_terminal", body or self._body(report))])
            log.info("workflow %s report kept for the replay: %s", report.workflow_id, why)

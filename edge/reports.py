"""Workflow reports to the cloud (SPEC §3.3): decision and terminal events, after the commit
that caused them, through one worker (one request in flight, in order). A terminal report the
cloud does not take goes through the sync outbox as a `task_terminal` write. Without a worker
(the CLI while no service runs) it goes there at once, in the unit of work that caused it, so
the service sends it when it next starts.

A burst batches: once BACKLOG reports wait for the worker (a slow or distant cloud, a burst of
workflows ending), a terminal report that asks no decision goes into the sync outbox as a
`task_terminal` write in the unit of work that caused it — on disk with the change, sent by the
replayer up to `sync.batch_size` a request — instead of one request each behind the queue; the
worker finding a backlog moves those waiting there too, in one unit of work. The
cloud takes both paths (SPEC §3.3); the report's `workflow.etag` orders them. Decision reports
always go through the worker, which answers them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.sqlite import StorageUnavailable
from a2a_common.writes import SyncWrite
from cloud_client.client import CloudClient
from cloud_client.errors import CloudError
from sync.outbox import SyncOutbox
from taskmanager.events import Report

log = logging.getLogger(__name__)
EVENTS_PATH = "/v1/a2a/workflow/events"
BACKLOG = 16  # reports waiting for the worker past which terminal ones go batched
GATHER_S = 0.05  # the replayer is told this long after a batched report
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
        self.on_batched: Callable[[], object] = lambda: None  # the replayer's `notify`
        self.batched = 0  # terminal reports sent through the sync outbox, this process
        self._gathering: asyncio.TimerHandle | None = None

    def settle(self, reports: list[Report]) -> list[Report]:
        """Inside the unit of work that caused them; returns those the worker sends (the
        caller hands them to `committed` after the commit)."""
        if not self._live:
            for report in reports:
                self._undelivered(report, "no service runs")
            return []
        for_worker: list[Report] = []
        for report in reports:
            waiting = self._queue.qsize() + len(for_worker)
            if _batchable(report) and waiting >= BACKLOG:
                self._batch([report])
            else:
                for_worker.append(report)
        return for_worker

    def _batch(self, reports: list[Report]) -> None:
        """Inside a unit of work: as `task_terminal` writes, the replayer's to send."""
        self._sync.enqueue([SyncWrite("task_terminal", self._body(r)) for r in reports])
        self.batched += len(reports)

    def committed(self, reports: list[Report], batched: bool = False) -> None:
        """After the commit: the worker's reports are queued, the replayer told of the
        batched ones."""
        for report in reports:
            self._queue.put_nowait(report)
        if batched:
            self._tell()

    async def run(self, *, unit: Unit, decide: Callable[[str, Any], None]) -> None:
        """The worker: `decide(workflow_id, decision)` applies a supervisor's answer."""
        while True:
            report = await self._queue.get()
            try:
                if self._queue.qsize() + 1 >= BACKLOG and self._spill(report, unit):
                    continue
                await self._send(report, unit, decide)
            except Exception:  # never let one report stop the worker
                log.exception("reporting workflow %s failed", report.workflow_id)

    def _spill(self, first: Report, unit: Unit) -> bool:
        """A backlog: every waiting terminal report that asks no decision goes batched, in
        one unit of work; decision reports stay queued, in order. False when the DB refused
        (all stay queued)."""
        waiting = [first]
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait())
        spilled = [r for r in waiting if _batchable(r)]
        try:
            if spilled:
                with unit():
                    self._batch(spilled)
        except StorageUnavailable as exc:
            log.warning("reports not batched (sent one by one): %s", exc)
            spilled = []
        gone = {id(r) for r in spilled}
        for report in waiting[1:]:
            if id(report) not in gone:
                self._queue.put_nowait(report)
        if spilled:
            self._tell()
        return id(first) in gone

    def _tell(self) -> None:
        """The replayer hears of batched reports GATHER_S after the first: what a burst
        writes meanwhile goes in the same request."""
        if self._gathering is not None:
            return
        try:
            self._gathering = asyncio.get_running_loop().call_later(GATHER_S, self._told)
        except RuntimeError:  # no loop (a test's app): at once
            self.on_batched()

    def _told(self) -> None:
        self._gathering = None
        self.on_batched()

    def _body(self, report: Report) -> dict[str, Any]:
        return {"request_id": new_ulid(self._clock), "device_id": self._device_id, **report.body}

    async def _send(self, report: Report, unit: Unit, decide: Callable[[str, Any], None]) -> None:
        body = self._body(report)
        try:
            status, answer = await self._cloud.post_json(
                EVENTS_PATH, body, deadline_s=self._deadline_s
            )
        except CloudError as exc:
            log.warning("workflow %s event not delivered: %s", report.workflow_id, exc)
            if report.decision_requested:
                decide(report.workflow_id, None)
            with unit():
                self._undelivered(report, str(exc), body)
            return
        if report.decision_requested:
            ok = isinstance(answer, dict) and status == 200
            decide(report.workflow_id, answer.get("decision") if ok else None)

    def _undelivered(self, report: Report, why: str, body: dict[str, Any] | None = None) -> None:
        if report.terminal:
            self._sync.enqueue([SyncWrite("task_terminal", body or self._body(report))])
            log.info("workflow %s report kept for the replay: %s", report.workflow_id, why)


def _batchable(report: Report) -> bool:
    return report.terminal and not report.decision_requested

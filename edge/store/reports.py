"""Workflow reports to the cloud (SPEC §3.3): decision and terminal events, after the commit
that caused them, through one worker (one request in flight, in order). A terminal report is on
disk from that commit until the cloud took it (`edge/store/reports_owed.py`): one the cloud does not
take, and every one a stop or a power cut left, goes through the sync outbox as a
`task_terminal` write. Without a worker (the CLI while no service runs) it goes there at once,
in the unit of work that caused it, so the service sends it when it next starts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.writes import SyncWrite
from cloud_client import CloudClient, CloudError
from edge.store.reports_owed import OwedReports
from sync import SyncOutbox
from taskmanager import Report

log = logging.getLogger(__name__)
EVENTS_PATH = "/v1/a2a/workflow/events"
Unit = Callable[[], AbstractContextManager[Any]]
Apply = Callable[[str, Callable[[], object]], object]
STASH_MAX = 10_000  # bodies of reports in uncommitted units (a rolled-back one leaves its own)


class Reports:
    def __init__(
        self,
        *,
        cloud: CloudClient,
        clock: Clock,
        sync_outbox: SyncOutbox,
        owed: OwedReports,
        device_id: str,
        deadline_s: float,
        live: bool,
    ) -> None:
        self._cloud = cloud
        self._clock = clock
        self._sync = sync_outbox
        self.owed = owed
        self._device_id = device_id
        self._deadline_s = deadline_s
        self._live = live
        self._queue: asyncio.Queue[tuple[Report, dict[str, Any]]] = asyncio.Queue()
        # bodies made (and terminal ones owed) in a unit of work, until it commits; what a
        # rolled-back unit left is dropped with the next settle past STASH_MAX
        self._made: dict[int, tuple[Report, dict[str, Any]]] = {}
        self._sending: tuple[str, asyncio.Task[None]] | None = None  # workflow_id, its send
        # workflows whose report asked the supervisor and went to the replay at start without
        # its question: told "no answer" by the worker first (or they would wait forever)
        self._unanswered: set[str] = set()
        self._told: set[str] = set()

    def settle(self, reports: list[Report]) -> None:
        """Inside the unit of work that caused them."""
        if not self._live:
            for report in reports:
                self._undelivered(report, "no service runs")
            return
        if len(self._made) > STASH_MAX:
            self._made.clear()
        for report in reports:
            body = self._body(report)
            if report.terminal:
                self.owed.owe(body)
            self._made[id(report)] = (report, body)

    def committed(self, reports: list[Report]) -> None:
        if self._live:
            for report in reports:
                made = self._made.pop(id(report), None)
                self._queue.put_nowait(made or (report, self._body(report)))

    def recover(self, unit: Unit) -> int:
        """At start: what a power cut left owed goes through the replay. A report among them
        that asked the supervisor gets no answer that way: its workflow is told none came,
        the worker's first act (tests/devicesim seeds 3 and 17)."""
        self._unanswered |= {
            str(owed.item.get("workflow_id"))
            for owed in self.owed.hand_out(STASH_MAX)
            if owed.item.get("decision_requested") is True
        }
        return self._replay_owed(unit, "a previous run left them owed")

    def _replay_owed(self, unit: Unit, why: str) -> int:
        with unit():
            moved = self.owed.to_replay()
        if moved:
            log.info("%d workflow reports kept for the replay: %s", moved, why)
        return moved

    async def run(self, *, apply: Apply, decide: Callable[[str, Any], None]) -> None:
        """The worker: `decide(workflow_id, decision)` applies a supervisor's answer, and
        `apply(kind, fn)` what the cloud's answer changes (the executor's door: held while the
        DB refuses writes)."""
        for workflow_id in sorted(self._unanswered):
            self._told.add(workflow_id)
            decide(workflow_id, None)
        self._unanswered.clear()
        while True:
            report, body = await self._queue.get()
            send = asyncio.create_task(self._send(report, body, apply, decide))
            self._sending = (report.workflow_id, send)
            try:
                await asyncio.wait({send})  # a cancel of the worker is not the send's own
            except asyncio.CancelledError:
                send.cancel()
                raise
            finally:
                self._sending = None
            if not send.cancelled() and send.exception() is not None:  # never stop the worker
                log.error(
                    "reporting workflow %s failed",
                    report.workflow_id,
                    exc_info=send.exception(),
                )

    def forgotten(self, workflow_ids: set[str]) -> None:
        """After the commit of a forget that removed these workflows (and their owed reports):
        the report being sent for one of them, retries and all, is given up (SPEC §5.5)."""
        if self._sending is not None and self._sending[0] in workflow_ids:
            log.info("workflow %s was forgotten: its report is not sent", self._sending[0])
            self._sending[1].cancel()

    def keep_left(self, unit: Unit) -> int:
        """At a stop: the terminal reports not delivered yet (queued, or the one in flight) go
        through the sync outbox, in one unit (SPEC §6: a clean stop loses no write). The one in
        flight may have reached the cloud: it keeps its request_id, so the cloud can tell."""
        while not self._queue.empty():
            self._queue.get_nowait()
        return self._replay_owed(unit, "the service stopped")

    def _body(self, report: Report) -> dict[str, Any]:
        return {"request_id": new_ulid(self._clock), "device_id": self._device_id, **report.body}

    async def _send(
        self,
        report: Report,
        body: dict[str, Any],
        apply: Apply,
        decide: Callable[[str, Any], None],
    ) -> None:
        request_id = body["request_id"]
        if report.terminal and not self.owed.still_owed(request_id):
            # forgotten meanwhile (forget --all), or already moved to the replay (a start-up's
            # recovery moves what its own late deadlines made too): no answer will come, and a
            # workflow waiting on one must not wait forever (told once, `run`)
            if report.decision_requested and report.workflow_id not in self._told:
                decide(report.workflow_id, None)
            return
        try:
            status, answer = await self._cloud.post_json(
                EVENTS_PATH, body, deadline_s=self._deadline_s
            )
        except CloudError as exc:
            log.warning("workflow %s event not delivered: %s", report.workflow_id, exc)
            if report.decision_requested:
                decide(report.workflow_id, None)
            if report.terminal:
                apply("report answer", partial(self.owed.to_replay, [request_id]))
                log.info("workflow %s report kept for the replay", report.workflow_id)
            return
        if report.terminal:
            self.owed.delivered(request_id)
        if report.decision_requested:
            ok = isinstance(answer, dict) and status == 200
            decide(report.workflow_id, answer.get("decision") if ok else None)

    def _undelivered(self, report: Report, why: str) -> None:
        if report.terminal:
            self._sync.enqueue([SyncWrite("task_terminal", self._body(report))])
            log.info("workflow %s report kept for the replay: %s", report.workflow_id, why)

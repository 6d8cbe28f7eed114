"""Workflow reports to the cloud (SPEC §3.3): decision and terminal events, after the commit
that caused them, through one worker (one request in flight, in order); the terminal reports
waiting when a send starts go in one request (SPEC §3.3's batch form,
`edge/store/report_batches.py`) until a cloud refuses that form. A terminal report is on disk
from that commit until the cloud took it (`edge/store/reports_owed.py`): one the cloud does not
take, and every one a stop or a power cut left, goes through the sync outbox as a
`task_terminal` write. Without a worker (the CLI while no service runs) it goes there at once,
in the unit of work that caused it, so the service sends it when it next starts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.writes import SyncWrite
from cloud_client import CloudClient, CloudError
from edge.store.report_batches import BATCH_MAX, Waiting, batch_body, batchable, take
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
        batch: bool = True,
        linger_s: float = 0.0,
    ) -> None:
        """`batch`: False sends one report per request, as before issue 36 (bench/reports.py
        compares the two). `linger_s`: terminal reports wait up to this long for more to share
        their request (`_linger`)."""
        self._cloud = cloud
        self._clock = clock
        self._sync = sync_outbox
        self.owed = owed
        self._device_id = device_id
        self._deadline_s = deadline_s
        self._live = live
        self._waiting: deque[Waiting] = deque()  # committed, not taken by a send yet
        self._ready: asyncio.Event | None = None  # the worker's (made on its loop)
        self._linger_s = linger_s
        self._batches = batch  # till the cloud refuses the batch form (SPEC §3.3: till restart)
        # bodies made (and terminal ones owed) in a unit of work, until it commits; what a
        # rolled-back unit left is dropped with the next settle past STASH_MAX
        self._made: dict[int, tuple[Report, dict[str, Any]]] = {}
        self._sending: tuple[set[str], asyncio.Task[None]] | None = None  # workflows, their send
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
                self._waiting.append(made or (report, self._body(report)))
            if self._ready is not None:
                self._ready.set()

    @property
    def waiting(self) -> int:
        """Reports committed and not taken by a send yet."""
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing being sent."""
        return not self._waiting and self._sending is None

    @property
    def batches(self) -> bool:
        """Terminal reports still go several in one request (False once the cloud refused)."""
        return self._batches

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
        self._ready = ready = asyncio.Event()
        while True:
            while not self._waiting:
                ready.clear()
                await ready.wait()
            await self._linger(ready)
            group = take(self._waiting, batches=self._batches)
            send = asyncio.create_task(self._send_group(group, apply, decide))
            self._sending = ({report.workflow_id for report, _ in group}, send)
            try:
                await asyncio.wait({send})  # a cancel of the worker is not the send's own
            except asyncio.CancelledError:
                send.cancel()
                raise
            finally:
                self._sending = None
            if send.cancelled():  # a forget: the batch's other reports go again
                if len(group) > 1:
                    self._waiting.extendleft(reversed(group))
            elif send.exception() is not None:  # never stop the worker
                log.error(
                    "reporting workflow %s failed",
                    group[0][0].workflow_id,
                    exc_info=send.exception(),
                )

    async def _linger(self, ready: asyncio.Event) -> None:
        """While only terminal reports that ask nothing wait (fewer than a batch), wait up to
        `linger_s` for more: a run of workflows ending one after another is one request, not
        one each (issue 36). A decision report ends the wait at once (a workflow waits on its
        answer); what waits is on disk (`reports_owed`) all along."""
        if not self._linger_s or not self._batches:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._linger_s
        while len(self._waiting) < BATCH_MAX and all(batchable(r) for r, _ in self._waiting):
            left = deadline - loop.time()
            if left <= 0:
                return
            ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), left)

    def forgotten(self, workflow_ids: set[str]) -> None:
        """After the commit of a forget that removed these workflows (and their owed reports):
        the report being sent for one of them, retries and all, is given up (SPEC §5.5); the
        other reports of its batch are sent again (the cloud dedupes them by `request_id`)."""
        if self._sending is not None and self._sending[0] & workflow_ids:
            gone = sorted(self._sending[0] & workflow_ids)
            log.info("workflow %s was forgotten: its report is not sent", ", ".join(gone))
            self._sending[1].cancel()

    def keep_left(self, unit: Unit) -> int:
        """At a stop: the terminal reports not delivered yet (queued, or the one in flight) go
        through the sync outbox, in one unit (SPEC §6: a clean stop loses no write). The one in
        flight may have reached the cloud: it keeps its request_id, so the cloud can tell."""
        self._waiting.clear()
        return self._replay_owed(unit, "the service stopped")

    def _body(self, report: Report) -> dict[str, Any]:
        return {"request_id": new_ulid(self._clock), "device_id": self._device_id, **report.body}

    async def _send_group(
        self, group: list[Waiting], apply: Apply, decide: Callable[[str, Any], None]
    ) -> None:
        if len(group) == 1:
            await self._send(*group[0], apply, decide)
            return
        owed = self.owed.owed_among([body["request_id"] for _, body in group])
        group = [(report, body) for report, body in group if body["request_id"] in owed]
        if len(group) <= 1:  # forgotten or moved meanwhile (terminal, no decision asked)
            for report, body in group:
                await self._send(report, body, apply, decide)
            return
        await self._send_batch(group, apply, decide)

    async def _send_batch(
        self, group: list[Waiting], apply: Apply, decide: Callable[[str, Any], None]
    ) -> None:
        """Terminal reports in one request. Taken: delivered. The first `accepted` of a
        partial answer are taken, the rest go to the replay, as a single report the cloud did
        not take. Refused (404, 400, no count): single events from now on, these first."""
        ids = [body["request_id"] for _, body in group]
        request = batch_body(new_ulid(self._clock), self._device_id, [b for _, b in group])
        try:
            accepted = await self._cloud.post_batch(
                EVENTS_PATH, request, deadline_s=self._deadline_s
            )
        except CloudError as exc:
            log.warning("%d workflow reports not delivered: %s", len(group), exc)
            apply("report answer", partial(self.owed.to_replay, ids))
            log.info("%d workflow reports kept for the replay", len(group))
            return
        if accepted is None:
            self._batches = False
            log.warning(
                "the cloud does not take workflow reports in batches: one per request from"
                " now on (until the service restarts)"
            )
            for report, body in group:
                await self._send(report, body, apply, decide)
            return
        for request_id in ids[:accepted]:
            self.owed.delivered(request_id)
        if accepted < len(ids):
            log.warning(
                "the cloud took %d of %d workflow reports: the rest kept for the replay",
                accepted,
                len(ids),
            )
            apply("report answer", partial(self.owed.to_replay, ids[accepted:]))

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

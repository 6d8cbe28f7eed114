"""Drives the TaskManager from the loop: one transaction per input, deadlines as a timer task,
cloud reports through one worker (one request in flight, in order), and what a finished
workflow means for memory and device state."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.writes import SyncWrite
from cache.memory import Memory
from cache.promotion import StepOutcome, observed_candidates
from cloud_client.client import CloudClient
from cloud_client.errors import CloudError
from edge.commits import Commits
from edge.outbound import DurableOutbox
from sync.outbox import SyncOutbox
from taskmanager.events import Report
from taskmanager.model import Workflow
from taskmanager.service import Result, TaskManager

log = logging.getLogger(__name__)
EVENTS_PATH = "/v1/a2a/workflow/events"


class WorkflowDriver:
    def __init__(
        self,
        *,
        commits: Commits,
        tm: TaskManager,
        memory: Memory,
        sync_outbox: SyncOutbox,
        outbox: DurableOutbox,
        cloud: CloudClient,
        clock: Clock,
        device_id: str,
        events_deadline_s: float,
    ) -> None:
        self._commits = commits
        self.tm = tm
        self._memory = memory
        self._sync = sync_outbox
        self._outbox = outbox
        self._cloud = cloud
        self._clock = clock
        self._device_id = device_id
        self._deadline_s = events_deadline_s
        self._wake = asyncio.Event()
        self._reports: asyncio.Queue[Report] = asyncio.Queue()

    # --- one transaction (or savepoint of a group commit) per input --------------------------
    def apply(self, action: Callable[[], Result]) -> Result:
        """Run `action` (TaskManager calls plus whatever else the input changes) and settle
        finished workflows in one transaction; once it commits, send what it owes."""
        try:
            with self._commits.atomic():
                result = action()
                self._settle(result)
        except Exception:
            self.tm.reload()  # the board must match what is on disk
            raise
        self._commits.after_commit(lambda: self._after_commit(result))
        return result

    def _settle(self, result: Result) -> None:
        if result.accepted:
            self._memory.store.set_state("active_workflow_id", result.accepted[-1])
        for wf in result.finished:
            self._sync.enqueue(self._observe(wf))
            if self._memory.state("active_workflow_id") == wf.workflow_id:
                active = self.tm.active_ids()
                self._memory.store.set_state("active_workflow_id", active[-1] if active else "")

    def _observe(self, wf: Workflow) -> list[SyncWrite]:
        """Personalization from what the robot did (SPEC §5.4), tied to the turn's pair."""
        if wf.status != "completed" or not wf.pair_id or not wf.session_id:
            return []
        outcomes = [
            StepOutcome(s.capability_id, s.operation_id, s.status, s.args) for s in wf.steps
        ]
        return self._memory.observe(
            observed_candidates(outcomes), pair_id=wf.pair_id, session_id=wf.session_id
        )

    def _after_commit(self, result: Result) -> None:
        self._outbox.flush()
        for report in result.reports:
            self._reports.put_nowait(report)
        for ignored in result.ignored:
            log.info("taskmanager ignored an input: %s (%s)", ignored.reason, ignored.detail)
        self._wake.set()

    # --- start-up ---------------------------------------------------------------------------
    def recover(self) -> dict[str, int]:
        """Load active workflows, re-send commands never PUBACKed (attempt + 1), fire late
        deadlines. Returns figures for the start-up summary."""
        active = self.tm.reload()
        prefix = f"{self.tm.topic_root}/task/command/"
        resent = 0
        with self._commits.atomic():
            for row_id, payload in self._outbox.rows_under(prefix):
                fresh = self.tm.redispatch(str(payload.get("task_id", "")))
                if fresh is None:
                    self._outbox.drop(row_id)
                else:
                    self._outbox.replace(row_id, fresh)
                    resent += 1
        self.apply(self.tm.tick)
        return {"active_workflows": active, "commands_resent": resent}

    # --- tasks on the loop -----------------------------------------------------------------
    async def run_timer(self) -> None:
        while True:
            self._wake.clear()
            due = self.tm.next_deadline()
            if due is not None:
                delay = (due - self._clock.now()).total_seconds()
                if delay <= 0:
                    self.apply(self.tm.tick)
                    continue
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)
                except TimeoutError:
                    self.apply(self.tm.tick)
            else:
                await self._wake.wait()

    async def run_reporter(self) -> None:
        while True:
            report = await self._reports.get()
            try:
                await self._send(report)
            except Exception:  # never let one report stop the worker
                log.exception("reporting workflow %s failed", report.workflow_id)

    async def _send(self, report: Report) -> None:
        body: dict[str, Any] = {
            "request_id": new_ulid(self._clock),
            "device_id": self._device_id,
            **report.body,
        }
        try:
            status, answer = await self._cloud.post_json(
                EVENTS_PATH, body, deadline_s=self._deadline_s
            )
        except CloudError as exc:
            log.warning("workflow %s event not delivered: %s", report.workflow_id, exc)
            if report.decision_requested:
                self.apply(lambda: self.tm.decision(report.workflow_id, None))
            if report.terminal:
                self.apply(lambda: self._queue_terminal(body))
            return
        if report.decision_requested:
            decision = (
                answer.get("decision") if isinstance(answer, dict) and status == 200 else None
            )
            self.apply(lambda: self.tm.decision(report.workflow_id, decision))

    def _queue_terminal(self, body: dict[str, Any]) -> Result:
        self._sync.enqueue([SyncWrite("task_terminal", body)])
        return Result()

    def pending_reports(self) -> int:
        return self._reports.qsize()

"""What each inbound MQTT message does, once it is valid: one method per kind, called by the
runtime's drain inside the message's savepoint. Effects outside the DB (turns started, metrics of
what was committed, the in-memory device context) wait for the commit."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from a2a_common.stopwatch import Stopwatch
from cache.memory import Memory
from edge.commits import Commits
from edge.memory_ops import MemoryOps
from edge.metrics import Metrics
from edge.mqtt import Inbound
from edge.outbound import DurableOutbox, InboxDedupe
from edge.topics import (
    AdminRequestMsg,
    DeviceContextMsg,
    ForgetMsg,
    PuiEventMsg,
    Refusal,
    TaskCallbackMsg,
    Topics,
    TurnRequestMsg,
    WorkflowRequestMsg,
)
from edge.turns import Received, TurnHandler
from edge.workflows import WorkflowDriver
from sync.outbox import SyncOutbox
from sync.replay import Replayer
from taskmanager.events import Callback
from taskmanager.service import Result

log = logging.getLogger(__name__)


class InboundHandlers:
    def __init__(
        self,
        *,
        commits: Commits,
        topics: Topics,
        memory: Memory,
        outbox: DurableOutbox,
        turns: TurnHandler,
        workflows: WorkflowDriver,
        replayer: Replayer,
        sync_outbox: SyncOutbox,
        memory_ops: MemoryOps,
        dedupe: InboxDedupe,
        metrics: Metrics,
        refuse: Callable[[str, Refusal], None],
    ) -> None:
        self._commits = commits
        self._topics = topics
        self._memory = memory
        self._outbox = outbox
        self._turns = turns
        self._workflows = workflows
        self._replayer = replayer
        self._sync = sync_outbox
        self._memory_ops = memory_ops
        self._dedupe = dedupe
        self.metrics = metrics
        self._refuse = refuse
        self._turn_lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()  # turns waiting on the cloud
        self._device_context: dict[str, Any] = memory.state("device_context", {}) or {}
        self._by_kind: dict[str, Callable[[Inbound, Any], None]] = {
            "turn/request": self._on_turn,
            "device/context": self._on_device_context,
            "task/callback": self._on_callback,
            "pui/event": self._on_pui,
            "workflow/request": self._on_workflow_request,
            "admin/request": self._on_admin,
            "memory/forget": self._on_forget,
        }

    def handle(self, kind: str, msg: Inbound, parsed: Any) -> None:
        """Apply one valid message (inside the caller's savepoint)."""
        self._by_kind[kind](msg, parsed)

    def _on_turn(self, msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, TurnRequestMsg)
        received = self._turns.receive(parsed, self._device_context, Stopwatch(msg.received_at))
        if received is not None:
            self._commits.after_commit(partial(self._start_answer, received))

    def _start_answer(self, received: Received) -> None:
        task = asyncio.create_task(self._answer(received))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, received: Received) -> None:
        async with self._turn_lock:
            try:
                status = await self._turns.answer(received)
                self.metrics.inc("a2a_turns_total", "turns answered", status=status)
                if status == "ok":
                    self._observe_turn(received.watch)
                self._replayer.notify()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("turn %s failed inside the runtime", received.turn_id)
                try:
                    self._turns.close_unanswered(
                        received.turn_id, received.pair_id, "error", "internal_error"
                    )
                except sqlite3.Error as exc:  # the DB is full: answered after a restart
                    log.error("turn %s left pending: %s", received.turn_id, exc)

    def _observe_turn(self, watch: Stopwatch) -> None:
        """The device's own share of an answered turn: all but the time on the wire."""
        for phase, took in watch.laps.items():
            self.metrics.observe(
                "a2a_turn_phase_seconds", "an answered turn's time by phase", took, phase=phase
            )
        self.metrics.observe(
            "a2a_turn_device_seconds",
            "an answered turn on the device: arrival to answer and first command handed to"
            " the broker, less the time waiting on the cloud",
            watch.total() - watch.laps.get("cloud", 0.0),
        )

    def _on_callback(self, msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, TaskCallbackMsg)
        tm = self._workflows.tm
        if not tm.is_active(parsed.task_id):
            if tm.is_late(parsed.task_id):
                log.info("late callback for ended task %s ignored", parsed.task_id)
            else:  # refused, and nothing written: not even a dedupe mark
                self._refuse(
                    msg.topic, Refusal("unknown_task", f"no task {parsed.task_id} on this robot")
                )
            return
        key = f"callback:{parsed.task_id}:{parsed.seq}"
        if self._dedupe.seen(key):
            return
        self.metrics.inc("a2a_callbacks_total", "task callbacks taken in", status=parsed.status)
        event = Callback(
            parsed.task_id,
            parsed.seq,
            parsed.status,
            parsed.progress,
            parsed.reason,
            parsed.evidence,
        )

        def apply() -> Result:
            self._dedupe.mark(key, msg.topic)
            return tm.callback(event)

        self._workflows.apply(apply)
        self._commits.after_commit(partial(self._observe_callback, msg.received_at))

    def _observe_callback(self, received_at: float) -> None:
        self.metrics.observe(
            "a2a_callback_device_seconds",
            "a task callback from arrival to applied, committed and what it caused handed to"
            " the broker",
            time.perf_counter() - received_at,
        )

    def _on_pui(self, msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, PuiEventMsg)
        key = f"pui:{parsed.event_id}"
        if self._dedupe.seen(key):
            return

        def apply() -> Result:
            self._dedupe.mark(key, msg.topic)
            return self._workflows.tm.cancel(parsed.workflow_id, "pui")

        result = self._workflows.apply(apply)
        log.info("PUI cancel %s: %d workflows ended", parsed.event_id, len(result.finished))

    def _on_workflow_request(self, msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, WorkflowRequestMsg)
        raw = parsed.model_dump(mode="json")
        result = self._workflows.apply(lambda: self._workflows.tm.submit(raw, source="push"))
        for workflow_id, reason in result.rejected:
            log.warning("pushed workflow %s rejected: %s", workflow_id, reason)

    def _on_admin(self, msg: Inbound, parsed: Any) -> None:
        """Mutating CLI commands while the service runs (it stays the one writer)."""
        assert isinstance(parsed, AdminRequestMsg)
        key = f"admin:{parsed.request_id}"
        if self._dedupe.seen(key):
            return
        answer: dict[str, Any] = {"request_id": parsed.request_id, "ok": False}

        def apply() -> Result:
            self._dedupe.mark(key, msg.topic)
            result = Result()
            workflow_id = parsed.args.get("workflow_id")
            if parsed.command == "memory.forget":
                scope, target = parsed.args.get("scope"), parsed.args.get("id")
                if scope not in ("pair", "session", "profile_key", "all") or (
                    (scope == "all") != (target is None)
                ):
                    answer["error"] = "args: scope pair|session|profile_key (with id) or all"
                else:
                    answer.update(
                        ok=True, result={"removed": self._memory_ops.forget(scope, target)}
                    )
            elif parsed.command == "memory.revoke":
                key_arg = parsed.args.get("key")
                if not isinstance(key_arg, str) or not key_arg:
                    answer["error"] = "args.key is required"
                else:
                    answer.update(ok=True, result=self._memory_ops.revoke(key_arg))
            elif parsed.command == "sync.replay":
                requeued = self._sync.requeue_dead() if parsed.args.get("requeue_dead") else 0
                answer.update(
                    ok=True,
                    result={
                        "pending": self._sync.pending(),
                        "requeued": requeued,
                        "dead": self._sync.dead_count(),
                    },
                )
                self._replayer.kick()
            elif parsed.command != "workflow.cancel":
                answer["error"] = f"{parsed.command} is not supported by this build yet"
            elif not isinstance(workflow_id, str) or not workflow_id:
                answer["error"] = "args.workflow_id is required"
            else:
                result = self._workflows.tm.cancel(workflow_id, "user")
                if result.ignored:
                    answer["error"] = f"no active workflow {workflow_id}"
                else:
                    answer.update(
                        ok=True, result={"cancelled": [w.workflow_id for w in result.finished]}
                    )
            self._outbox.enqueue(self._topics.admin_response, answer)
            return result

        self._workflows.apply(apply)
        if parsed.command == "memory.forget":
            self._commits.after_commit(self._memory_ops.checkpoint)

    def _on_forget(self, msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, ForgetMsg)
        key = f"forget:{parsed.request_id}"
        if self._dedupe.seen(key):
            return
        with self._commits.atomic():
            self._dedupe.mark(key, msg.topic)
            removed = self._memory_ops.forget(parsed.scope, parsed.id)
            self._outbox.enqueue(
                self._topics.forget_result, {"request_id": parsed.request_id, "removed": removed}
            )
        self._commits.after_commit(self._memory_ops.checkpoint)
        self._commits.after_commit(self._outbox.flush)

    def _on_device_context(self, _msg: Inbound, parsed: Any) -> None:
        assert isinstance(parsed, DeviceContextMsg)
        context = parsed.model_dump(mode="json", exclude_none=True)
        with self._commits.atomic():
            self._memory.store.set_state("device_context", context)

        def take() -> None:
            self._device_context = context

        self._commits.after_commit(take)

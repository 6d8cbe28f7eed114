"""The device's application layer: one method per input, each one unit of work.

Every input — an inbound message (`take_*`), a turn's answer (`close_turn`), a deadline
(`tick`), a supervisor decision, an admin command from the service or from the CLI when no
service runs (`admin`) — runs in ONE unit of work (`unit()`): it calls the TaskManager, the
memory cache and the outboxes, settles finished workflows (memory observations, the active
workflow), and what it causes outside the DB (MQTT sends, cloud reports, turn starts, the
timer's wake-up) happens once, after the outermost commit, and never for a part that rolled
back. The executor (`edge/runtime.py`) owns the loop, the channel and the life cycle; this class
owns what inputs mean.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from a2a_common import jsonx
from a2a_common.clock import Clock, iso
from a2a_common.ids import new_ulid
from a2a_common.sqlite import StorageUnavailable
from a2a_common.stopwatch import Stopwatch
from cache.memory import Memory
from cache.update import plan_update
from cloud_client.client import CloudClient
from cloud_client.errors import CloudError, CloudUnavailable
from cloud_client.models import TurnResponse
from edge import timings
from edge.checkpointer import Checkpointer
from edge.config import Settings
from edge.inbox import InboxDeadLetters, InboxDedupe
from edge.memory_ops import MemoryOps
from edge.metrics import Metrics
from edge.offline import match_intent
from edge.outbound import DurableOutbox, Wire
from edge.publisher import TaskPublisher
from edge.reports import Reports
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
from edge.turns import (
    ERROR_TEXT,
    LOCAL_ROUTE,
    OFFLINE_TEXT,
    Received,
    response_body,
    turn_request,
    update_input_of,
)
from edge.work import Work
from sync.outbox import SyncOutbox
from sync.replay import Replayer
from taskmanager.events import Callback
from taskmanager.model import ACTIVE_STEP
from taskmanager.service import TaskManager, TurnRef

log = logging.getLogger(__name__)
T = TypeVar("T")
FORGET_SCOPES = ("pair", "session", "profile_key", "all")


@dataclass(frozen=True)
class Arrival:
    """What the executor knows of an inbound message besides its body."""

    topic: str
    received_at: float  # perf_counter on paho's thread, when the message arrived


class DeviceApp:
    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        work: Work,
        topics: Topics,
        memory: Memory,
        publisher: TaskPublisher,
        outbox: DurableOutbox,
        sync_outbox: SyncOutbox,
        dedupe: InboxDedupe,
        dead_letters: InboxDeadLetters,
        memory_ops: MemoryOps,
        checkpointer: Checkpointer,
        cloud: CloudClient,
        replayer: Replayer,
        reports: Reports,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.work = work
        self.unit = work.unit
        self.after_commit = work.after_commit
        self.tm: TaskManager = work.tm
        self.topics = topics
        self.memory = memory
        self._publisher = publisher
        self.outbox = outbox
        self.sync = sync_outbox
        self.dedupe = dedupe
        self.dead_letters = dead_letters
        self.memory_ops = memory_ops
        self.checkpointer = checkpointer
        self.cloud = cloud
        self.replayer = replayer
        self.reports = reports
        self.metrics = metrics
        self._wire: Wire | None = None
        self._turn_lock = asyncio.Lock()
        self.turns_in_flight: set[asyncio.Task[None]] = set()  # turns waiting on the cloud
        self._device_context: dict[str, Any] = memory.state("device_context", {}) or {}

    def attach(self, wire: Wire) -> None:
        """The broker connection: owed MQTT messages and refusals go out on it from now."""
        self._wire = wire
        self.outbox.attach(wire)

    def ping(self) -> None:
        """Raises when the state DB does not answer."""
        self.memory.db.execute("SELECT 1").fetchone()

    def reap(self) -> None:
        """Delete the MQTT outbox rows the broker has PUBACKed (kept for later when the DB
        refuses: a row left is sent again at the next start, and receivers dedupe)."""
        try:
            with self.work.commits.atomic():
                self.outbox.reap()
        except StorageUnavailable as exc:
            log.debug("PUBACKed rows not deleted yet: %s", exc)

    def sweep(self) -> bool:
        """One bounded batch of memory retention; True when it removed something."""
        with self.unit():
            return any(self.memory_ops.sweep().values())

    async def close(self, timeout_s: float = 2.0) -> None:
        """Bounded: a cloud connection that hangs (TLS) does not hold the process."""
        self.outbox.reap()
        try:
            await asyncio.wait_for(self.cloud.aclose(), timeout_s)
        except (TimeoutError, OSError) as exc:
            log.warning("closing the cloud client: %r", exc)
        self.checkpointer.close()
        self.memory.db.close()

    def dead_letter(self, topic: str, payload: bytes, error: str) -> None:
        """A message a handler failed on (SPEC §2.4): kept for the operator, then refused."""
        with self.unit():
            self.dead_letters.add(topic, payload, error)
        self.refuse(topic, Refusal("internal_error", "the runtime could not apply it"))

    def refuse(self, topic: str, refusal: Refusal) -> None:
        """SPEC §2: a refusal on `P/runtime/error` (QoS 0: it reports, it changes nothing)."""
        log.warning("refused message on %s: %s (%s)", topic, refusal.error, refusal.detail)
        body = {
            "topic": topic,
            "error": refusal.error,
            "detail": refusal.detail,
            "ts": iso(self.clock.now()),
        }
        if self._wire is not None:
            self._wire.publish(self.topics.runtime_error, jsonx.dumps(body).encode(), qos=0)

    # --- start-up and the broker's session ------------------------------------------------
    def recover(self) -> dict[str, int]:
        """Answer turns a previous run took in but never answered, load active workflows,
        send again commands never PUBACKed (attempt + 1), fire late deadlines."""
        pending = self.memory.store.pending_turns()
        for turn_id, pair_id in pending:
            self.close_unanswered(
                turn_id, pair_id, "error", "interrupted: the runtime restarted mid-turn"
            )
        active = self.tm.reload()
        with self.unit() as result:
            owed = self._publisher.owed_commands()
            for row_id, _payload in owed:
                self.outbox.drop(row_id)
            task_ids = dict.fromkeys(str(p.get("task_id", "")) for _, p in owed)
            result.merge(self.tm.redispatch(task_ids))
        self.tick()
        return {
            "interrupted_turns": len(pending),
            "active_workflows": active,
            "commands_resent": result.commands,
        }

    def session_lost(self) -> None:
        """The broker has no session of ours: callbacks sent while it had none are gone. Each
        active task's command goes again (same task_id, attempt + 1); the agent dedupes and
        answers with its latest callback."""
        with self.unit() as result:
            result.merge(self.tm.redispatch(None, ACTIVE_STEP))

    # --- turns ------------------------------------------------------------------------------
    def take_turn(self, msg: TurnRequestMsg, arrival: Arrival) -> None:
        """Commit the utterance (with its dedupe mark) before the cloud is asked, so it is kept
        whatever the cloud does; the answer starts after the commit."""
        watch = Stopwatch(arrival.received_at)
        watch.lap("take_in")
        key = f"turn:{msg.turn_id}"
        if self.dedupe.seen(key):
            log.info("turn %s is a redelivery; already taken in", msg.turn_id)
            return
        with self.unit():
            pair_id, session_id = self.memory.record_utterance(
                turn_id=msg.turn_id, requested_session=msg.session_id, text=msg.recognized_text
            )
            self.dedupe.mark(key, arrival.topic)
        log.info("turn %s recorded in %s", msg.turn_id, session_id)
        context = {**self._device_context, **(msg.device_context or {})}
        watch.lap("record")
        turn = Received(msg.turn_id, pair_id, session_id, msg.recognized_text, context, watch)
        self.after_commit(partial(self._start_answer, turn))

    def _start_answer(self, turn: Received) -> None:
        task = asyncio.create_task(self.answer(turn))
        self.turns_in_flight.add(task)
        task.add_done_callback(self.turns_in_flight.discard)

    async def answer(self, turn: Received) -> None:
        """Ask the planner (one turn at a time) and close the turn with what it said."""
        async with self._turn_lock:
            try:
                answer = await self._ask(turn)
                status = await self._retrying(turn, partial(self.close_turn, turn, answer))
                turn.watch.lap("apply")
            except asyncio.CancelledError:
                raise  # stopping: the turn is answered `interrupted` at the next start
            except Exception:
                log.exception("turn %s failed inside the runtime", turn.turn_id)
                close = partial(
                    self.close_unanswered, turn.turn_id, turn.pair_id, "error", "internal_error"
                )
                await self._retrying(turn, close)
                return
        self.metrics.inc("a2a_turns_total", "turns answered", status=status)
        if status == "ok":
            timings.turn_answered(self.metrics, turn.watch)
        if status == "offline":
            self.replayer.notify()
        else:  # the cloud answered: the replay need not wait for its backoff
            self.replayer.kick()

    async def _retrying(self, turn: Received, close: Callable[[], T]) -> T:
        """Close the turn; while the DB refuses writes, try again with backoff: the answer
        waits in memory and goes out once storage is back (SPEC §2.4)."""
        delay = 0.1
        while True:
            try:
                return close()
            except StorageUnavailable as exc:
                if delay == 0.1:
                    log.error(
                        "turn %s waits for the state DB to take writes: %s", turn.turn_id, exc
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _ask(self, turn: Received) -> TurnResponse | CloudError:
        turn.watch.lap("queue")
        request = turn_request(
            turn, self.memory, device_id=self.settings.device_id, clock=self.clock
        )
        turn.watch.lap("snapshot")
        cloud = self.settings.cloud
        away = self.cloud.unreachable  # known away: one quick try, the user is waiting
        try:
            response = await self.cloud.turn(
                request,
                deadline_s=min(cloud.turn_deadline_s, cloud.offline_probe_s)
                if away
                else cloud.turn_deadline_s,
                max_attempts=1 if away else 2,
                watch=turn.watch,
            )
        except CloudError as exc:
            return exc
        return response

    def close_turn(self, turn: Received, answer: TurnResponse | CloudError) -> str:
        """Close the turn with the planner's answer, or with why there is none: the answer,
        the pair, the memory update and the workflows it asks for in one unit of work, with
        the `P/turn/response` they cause. Returns the response's status."""
        if isinstance(answer, CloudUnavailable):
            log.warning("turn %s: cloud unavailable: %s", turn.turn_id, answer)
            return self._answer_offline(turn, f"cloud_unavailable: {answer}")
        if isinstance(answer, CloudError):  # rejected or not the contract
            log.warning("turn %s: cloud answer refused: %s", turn.turn_id, answer)
            self.close_unanswered(turn.turn_id, turn.pair_id, "error", f"cloud_error: {answer}")
            return "error"
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id)
        requested = len(answer.device_workflow_requests) + len(answer.device_task_requests)
        with self.unit() as result:
            for raw in answer.device_workflow_requests:
                result.merge(self.tm.submit(raw, source="planner", turn=ref))
            for raw in answer.device_task_requests:
                fallback = f"task-{new_ulid(self.clock).lower()}"
                result.merge(self.tm.submit_task(raw, fallback_id=fallback, turn=ref))
            changes = plan_update(
                update_input_of(answer), self.memory.sync_position(), frozenset(result.accepted)
            )
            self.sync.enqueue(self.memory.apply_turn(turn.pair_id, turn.session_id, changes))
            error = None
            if requested and not result.accepted:
                error = "; ".join(reason for _, reason in result.rejected) or (
                    "every workflow request was a duplicate"
                )
            status = "rejected" if error else "ok"
            self._respond(
                response_body(
                    turn.turn_id,
                    status,
                    answer.assistant_text,
                    route_family=answer.route_family,
                    workflow_ids=result.accepted,
                    error=error,
                )
            )
        log.info(
            "turn %s answered: route %s, status %s, workflows %s",
            turn.turn_id,
            answer.route_family,
            status,
            result.accepted,
        )
        return status

    def _answer_offline(self, turn: Received, reason: str) -> str:
        """`offline`, and the robot's own small set of intents so it stays safe meanwhile."""
        intent = match_intent(turn.text, self.settings.offline.intents)
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id)
        with self.unit() as result:
            if intent is not None and intent.action == "cancel":
                result.merge(self.tm.cancel(None, "user"))
                result.ignored.clear()
            elif intent is not None:
                task = {
                    "capability_id": intent.capability_id,
                    "operation_id": intent.operation_id,
                    "args": intent.args,
                }
                fallback = f"local-{new_ulid(self.clock).lower()}"
                result.merge(self.tm.submit_task(task, fallback_id=fallback, turn=ref))
            self.sync.enqueue(self.memory.close_unanswered(turn.pair_id, "offline"))
            self._respond(
                response_body(
                    turn.turn_id,
                    "offline",
                    intent.reply if intent else OFFLINE_TEXT,
                    route_family=LOCAL_ROUTE if intent else "",
                    workflow_ids=result.accepted,
                    error=reason,
                )
            )
        if intent is not None:
            log.info(
                "turn %s handled on the device: intent %s, %d workflows ended, %s started",
                turn.turn_id,
                intent.name,
                len(result.finished),
                result.accepted,
            )
        return "offline"

    def close_unanswered(self, turn_id: str, pair_id: str, status: str, reason: str) -> None:
        """Answer `offline`/`error`; the utterance stays recorded as a pair without reply."""
        text = OFFLINE_TEXT if status == "offline" else ERROR_TEXT
        with self.unit():
            self.sync.enqueue(self.memory.close_unanswered(pair_id, status))
            self._respond(response_body(turn_id, status, text, error=reason))

    def _respond(self, body: dict[str, Any]) -> None:
        self.outbox.enqueue(self.topics.turn_response, body)

    # --- workflows --------------------------------------------------------------------------
    def take_callback(self, msg: TaskCallbackMsg, arrival: Arrival) -> None:
        if not self.tm.is_active(msg.task_id):
            if self.tm.is_late(msg.task_id):
                log.info("late callback for ended task %s ignored", msg.task_id)
            else:  # refused, and nothing written: not even a dedupe mark
                self.refuse(
                    arrival.topic, Refusal("unknown_task", f"no task {msg.task_id} on this robot")
                )
            return
        key = f"callback:{msg.task_id}:{msg.seq}"
        if self.dedupe.seen(key):
            return
        self.metrics.inc("a2a_callbacks_total", "task callbacks taken in", status=msg.status)
        event = Callback(msg.task_id, msg.seq, msg.status, msg.progress, msg.reason, msg.evidence)
        with self.unit() as result:
            self.dedupe.mark(key, arrival.topic)
            result.merge(self.tm.callback(event))
        self.after_commit(partial(timings.callback_applied, self.metrics, arrival.received_at))

    def take_pui(self, msg: PuiEventMsg, arrival: Arrival) -> None:
        key = f"pui:{msg.event_id}"
        if self.dedupe.seen(key):
            return
        with self.unit() as result:
            self.dedupe.mark(key, arrival.topic)
            result.merge(self.tm.cancel(msg.workflow_id, "pui"))
        log.info("PUI cancel %s: %d workflows ended", msg.event_id, len(result.finished))

    def take_workflow(self, msg: WorkflowRequestMsg, _arrival: Arrival) -> None:
        with self.unit() as result:
            result.merge(self.tm.submit(msg.model_dump(mode="json"), source="push"))
        for workflow_id, reason in result.rejected:
            log.warning("pushed workflow %s rejected: %s", workflow_id, reason)

    def take_device_context(self, msg: DeviceContextMsg, _arrival: Arrival) -> None:
        context = msg.model_dump(mode="json", exclude_none=True)
        with self.unit():
            self.memory.store.set_state("device_context", context)
        self.after_commit(partial(setattr, self, "_device_context", context))

    def tick(self) -> None:
        """Deadlines that have passed fire."""
        with self.unit() as result:
            result.merge(self.tm.tick())

    async def run_timer(self) -> None:
        while True:
            self.work.wake.clear()
            due = self.tm.next_deadline()
            if due is None:
                await self.work.wake.wait()
                continue
            delay = (due - self.clock.now()).total_seconds()
            if delay > 0:
                try:
                    await asyncio.wait_for(self.work.wake.wait(), timeout=delay)
                    continue
                except TimeoutError:
                    pass
            self.tick()

    async def run_reporter(self) -> None:
        await self.reports.run(unit=self.unit, decide=self.work.decision)

    # --- admin: the one path for the service and for the CLI when no service runs ------------
    def take_admin(self, msg: AdminRequestMsg, arrival: Arrival) -> None:
        key = f"admin:{msg.request_id}"
        if self.dedupe.seen(key):
            return
        with self.unit():
            self.dedupe.mark(key, arrival.topic)
            answer = {"request_id": msg.request_id, **self.admin(msg.command, msg.args)}
            self.outbox.enqueue(self.topics.admin_response, answer)

    def admin(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        """A mutating CLI command in one unit of work: `{"ok": True, "result": …}` or
        `{"ok": False, "error": …}`."""
        if command == "workflow.cancel":
            return self._cancel(args.get("workflow_id"))
        if command == "memory.forget":
            return self._forget(args.get("scope"), args.get("id"))
        if command == "memory.revoke":
            return self._revoke(args.get("key"))
        if command == "sync.replay":
            return self._sync_replay(bool(args.get("requeue_dead")))
        return {"ok": False, "error": f"{command} is not supported by this build yet"}

    def _cancel(self, workflow_id: Any) -> dict[str, Any]:
        if not isinstance(workflow_id, str) or not workflow_id:
            return {"ok": False, "error": "args.workflow_id is required"}
        with self.unit() as result:
            result.merge(self.tm.cancel(workflow_id, "user"))
        if result.ignored:
            return {"ok": False, "error": f"no active workflow {workflow_id}"}
        return {"ok": True, "result": {"cancelled": [w.workflow_id for w in result.finished]}}

    def _forget(self, scope: Any, target: Any) -> dict[str, Any]:
        if scope not in FORGET_SCOPES:
            return {"ok": False, "error": "args.scope: pair|session|profile_key (with id) or all"}
        if scope == "all" and target is not None:
            return {"ok": False, "error": "args.id must be absent for scope all"}
        if scope != "all" and not (isinstance(target, str) and 0 < len(target) <= 128):
            return {"ok": False, "error": "args.id must be a string of 1 to 128 characters"}
        with self.unit():
            removed = self._forget_in_unit(scope, target)
        return {"ok": True, "result": {"removed": removed}}

    def _forget_in_unit(self, scope: str, target: str | None) -> dict[str, int]:
        removed = self.memory_ops.forget(scope, target)
        if scope == "all":  # a dead-lettered turn holds the user's words too
            log.info("forget all: %d inbound dead letters wiped", self.dead_letters.wipe())
        self.after_commit(self.checkpointer.truncate)
        return removed

    def _revoke(self, key: Any) -> dict[str, Any]:
        if not isinstance(key, str) or not key:
            return {"ok": False, "error": "args.key is required"}
        with self.unit():
            revoked = self.memory_ops.revoke(key)
        return {"ok": True, "result": revoked}

    def _sync_replay(self, requeue_dead: bool) -> dict[str, Any]:
        with self.unit():
            requeued = self.sync.requeue_dead() if requeue_dead else 0
        self.replayer.kick()
        pending, dead = self.sync.pending(), self.sync.dead_count()
        return {"ok": True, "result": {"pending": pending, "requeued": requeued, "dead": dead}}

    def take_forget(self, msg: ForgetMsg, arrival: Arrival) -> None:
        key = f"forget:{msg.request_id}"
        if self.dedupe.seen(key):
            return
        with self.unit():
            self.dedupe.mark(key, arrival.topic)
            removed = self._forget_in_unit(msg.scope, msg.id)
            body = {"request_id": msg.request_id, "removed": removed}
            self.outbox.enqueue(self.topics.forget_result, body)

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
from functools import partial
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso
from a2a_common.sqlite import StorageError, StorageUnavailable
from edge import timings
from edge.app_consent import ConsentInputs
from edge.app_turns import TurnInputs, fingerprint
from edge.checkpointer import Checkpointer
from edge.consent_ops import ConsentOps
from edge.inbox import InboxDeadLetters
from edge.log import fields
from edge.memory_ops import MemoryOps
from edge.observations import STATE_KEY as OBSERVATIONS_KEY
from edge.observations import ObservationGate
from edge.outbound import Wire
from edge.publisher import TaskPublisher
from edge.repeats import EXPIRED, REUSED, answered_before, expired
from edge.reports import Reports
from edge.topics import (
    AdminRequestMsg,
    Arrival,
    DeviceContextMsg,
    ForgetMsg,
    ObservationMsg,
    PuiEventMsg,
    Refusal,
    TaskCallbackMsg,
    WorkflowRequestMsg,
    ref_of,
)
from edge.work import Work
from taskmanager import ACTIVE_STEP, Callback, Observe, TaskManager

log = logging.getLogger(__name__)
FORGET_SCOPES = ("pair", "session", "profile_key", "all")


class DeviceApp:
    def __init__(
        self,
        *,
        work: Work,
        turns: TurnInputs,
        publisher: TaskPublisher,
        dead_letters: InboxDeadLetters,
        memory_ops: MemoryOps,
        checkpointer: Checkpointer,
        reports: Reports,
        consent: ConsentOps,
    ) -> None:
        self.work = work
        self.consent = consent
        self.unit = work.unit
        self.after_commit = work.after_commit
        self.tm: TaskManager = work.tm
        self.turns = turns
        self.settings = turns.settings
        self.clock = turns.clock
        self.topics = turns.topics
        self.memory = turns.memory
        self.outbox = turns.outbox
        self.sync = turns.sync
        self.dedupe = turns.dedupe
        self.cloud = turns.cloud
        self.replayer = turns.replayer
        self.metrics = turns.metrics
        self._publisher = publisher
        self.dead_letters = dead_letters
        self.memory_ops = memory_ops
        self.checkpointer = checkpointer
        self.reports = reports
        self._wire: Wire | None = None
        self._closed = False
        self.take_turn = turns.take_turn
        self.close_turn = turns.close_turn
        self.close_unanswered = turns.close_unanswered
        self.turns_in_flight = turns.in_flight
        experience = self.settings.experience
        self.observations = ObservationGate(
            clock=self.clock,
            per_s=experience.observations_per_s,
            kinds=experience.observation_kinds,
            latest=self.memory.state(OBSERVATIONS_KEY, {}) or {},
            privacy=lambda: self.memory.policy.privacy,  # the current one (a reload swaps it)
        )
        turns.observations = self.observations.for_turn
        consent_inputs = ConsentInputs(self)
        self.take_consent = consent_inputs.take_consent
        self.reject_consent = consent_inputs.reject_consent
        self.reload_consent = consent_inputs.reload_consent
        self._consent = consent_inputs.admin

    def attach(self, wire: Wire) -> None:
        """The broker connection: owed MQTT messages and refusals go out on it from now."""
        self._wire = wire
        self.outbox.attach(wire)

    def ping(self) -> None:
        """Raises when the state DB does not answer."""
        self.memory.db.execute("SELECT 1").fetchone()

    def reap(self) -> None:
        """Delete the MQTT outbox rows the broker has PUBACKed (kept for later when the DB
        refuses: a row left is sent again at the next start, and receivers dedupe). Nothing
        when a group commit or the heartbeat took them, or after `close` (a PUBACK's reap timer
        firing while asyncio.run winds down: the rows left are sent again at the next start)."""
        if self._closed or not (self.outbox.acked or self.reports.owed.reapable):
            return
        try:
            with self.work.commits.atomic():
                self.reap_rows()
        except StorageUnavailable as exc:
            log.debug("PUBACKed rows not deleted yet: %s", exc)

    def reap_rows(self) -> None:
        """Inside the caller's commit: the MQTT outbox rows the broker PUBACKed, the owed
        workflow reports the cloud took."""
        self.outbox.reap()
        self.reports.owed.reap()

    def sweep(self) -> bool:
        """One bounded batch of memory retention; True when it removed something."""
        with self.unit():
            return any(self.memory_ops.sweep().values())

    async def close(self, timeout_s: float = 2.0) -> None:
        """Bounded: a cloud connection that hangs (TLS) does not hold the process."""
        try:
            self.reports.keep_left(self.unit)
        except StorageError as exc:  # they are lost with the process, as at a power cut
            log.warning("undelivered workflow reports not kept: %s", exc)
        self.outbox.reap()
        try:
            await asyncio.wait_for(self.cloud.aclose(), timeout_s)
        except (TimeoutError, OSError) as exc:
            log.warning("closing the cloud client: %r", exc)
        self.checkpointer.close()
        self._closed = True
        self.memory.db.close()

    def dead_letter(self, topic: str, payload: bytes, error: str) -> None:
        """A message a handler failed on (SPEC §2.4): kept for the operator, then refused."""
        with self.unit():
            self.dead_letters.add(topic, payload, error)
        refusal = Refusal("internal_error", "the runtime could not apply it")
        self.refuse(topic, refusal, payload=payload, logged=True)  # the intake's ERROR said it

    def refuse(
        self,
        topic: str,
        refusal: Refusal,
        *,
        payload: bytes | None = None,
        ref: dict[str, Any] | None = None,
        logged: bool = False,
    ) -> None:
        """SPEC §2: a refusal on `P/runtime/error` (QoS 0: it reports, it changes nothing),
        with `ref`, the ids the refused payload carried (SPEC §2.4)."""
        if ref is None and payload is not None:
            ref = ref_of(payload, self.settings.mqtt.max_payload_bytes)
        self.metrics.inc(
            "a2a_refusals_total",
            "inbound messages refused on P/runtime/error, by topic (under P/) and error",
            topic=self.topics.kind_of(topic) or "other",
            error=refusal.error,
        )
        log.log(
            logging.DEBUG if logged else logging.WARNING,
            "refused message on %s: %s (%s)",
            topic,
            refusal.error,
            refusal.detail,
            extra=fields(topic=topic, error=refusal.error, **(ref or {})),
        )
        body: dict[str, Any] = {
            "topic": topic,
            "error": refusal.error,
            "detail": refusal.detail,
            "ts": iso(self.clock.now()),
        }
        if ref:
            body["ref"] = ref
        wire = self._wire
        if wire is None:
            return

        def publish() -> None:
            try:  # a refusal must never fail in its turn: the intake would stop
                wire.publish(self.topics.runtime_error, jsonx.dumps(body).encode(), qos=0)
            except Exception:
                log.exception("refusal on %s could not be published", topic)

        # after the commit of the unit it belongs to: a unit the DB could not take rolls back,
        # its message is held and applied later (SPEC §2.4), and must not look refused too
        self.after_commit(publish)

    def reject_turn(self, payload: bytes, refusal: Refusal) -> None:
        """A refused `P/turn/request` whose `turn_id` can be read is answered all the same."""
        turn_id = ref_of(payload, self.settings.mqtt.max_payload_bytes).get("turn_id")
        if isinstance(turn_id, str):
            self.turns.reject(turn_id, refusal)

    def reject_pui(self, payload: bytes, refusal: Refusal) -> None:
        """A refused press whose `event_id` can be read gets `P/pui/result` all the same:
        `rejected` with the refusal's `error`, nothing cancelled — the button gets feedback."""
        event_id = ref_of(payload, self.settings.mqtt.max_payload_bytes).get("event_id")
        if not isinstance(event_id, str):
            return
        body = {"event_id": event_id, "status": "rejected", "workflow_ids": []}
        with self.unit():
            self.outbox.enqueue(self.topics.pui_result, {**body, "error": refusal.error})

    # --- start-up and the broker's session ------------------------------------------------
    def recover(self) -> dict[str, int]:
        """Answer turns a previous run took in but never answered, load active workflows,
        send again commands never PUBACKed (attempt + 1), fire late deadlines."""
        pending = self.turns.answer_interrupted(self.settings.state_db_path.parent)
        active = self.tm.reload()
        with self.unit() as result:
            owed = self._publisher.owed_commands()
            for row_id, _payload in owed:
                self.outbox.drop(row_id)
            task_ids = dict.fromkeys(str(p.get("task_id", "")) for _, p in owed)
            result.merge(self.tm.redispatch(task_ids))
        self.tick()
        return {
            "reports_kept": self.reports.recover(self.unit),
            "interrupted_turns": pending,
            "active_workflows": active,
            "commands_resent": result.commands,
        }

    def session_lost(self) -> None:
        """The broker has no session of ours: callbacks sent while it had none are gone. Each
        active task's command goes again (same task_id, attempt + 1); the agent dedupes and
        answers with its latest callback."""
        with self.unit() as result:
            result.merge(self.tm.redispatch(None, ACTIVE_STEP))

    # --- workflows --------------------------------------------------------------------------
    def take_callback(self, msg: TaskCallbackMsg, arrival: Arrival) -> None:
        verdict = self.tm.verdict(msg.task_id, msg.seq, msg.status)
        ref = {"task_id": msg.task_id, "seq": msg.seq}
        if verdict == "unknown":  # refused, and nothing written: not even a dedupe mark
            refusal = Refusal("unknown_task", f"no task {msg.task_id} on this robot")
            self.refuse(arrival.topic, refusal, ref=ref)
            return
        if verdict == "terminal":
            refusal = Refusal("task_terminal", f"{msg.task_id} has ended; seq {msg.seq} is new")
            self.refuse(arrival.topic, refusal, ref=ref)
            return
        key = f"callback:{msg.task_id}:{msg.seq}"
        if verdict == "duplicate" or self.dedupe.seen(key):
            return  # a repeat of an applied seq, or a stale one: silently a duplicate
        self.metrics.inc("a2a_callbacks_total", "task callbacks taken in", status=msg.status)
        event = Callback(msg.task_id, msg.seq, msg.status, msg.progress, msg.reason, msg.evidence)
        with self.unit() as result:
            self.dedupe.mark(key, arrival.topic)
            result.merge(self.tm.callback(event))
        self.after_commit(partial(timings.callback_applied, self.metrics, arrival.received_at))

    def take_pui(self, msg: PuiEventMsg, arrival: Arrival) -> None:
        """A press always gets `P/pui/result` (SPEC §2): the same one again for a repeat."""
        key = f"pui:{msg.event_id}"
        seen = self.dedupe.seen(key)
        if seen is not None:
            if seen.answer is not None:
                with self.unit():
                    self.outbox.enqueue(self.topics.pui_result, seen.answer)
            return
        with self.unit() as result:
            self.dedupe.mark(key, arrival.topic)
            result.merge(self.tm.cancel(msg.workflow_id, "pui"))
            ended = [wf.workflow_id for wf in result.finished]
            status = "cancelled" if ended else "nothing_active"
            if not ended and msg.workflow_id and not self.tm.store.accepted(msg.workflow_id):
                status = "unknown_workflow"
            answer = {"event_id": msg.event_id, "status": status, "workflow_ids": ended}
            self.outbox.enqueue(self.topics.pui_result, answer)
            self.dedupe.answered(key, answer)
        log.info(
            "PUI cancel %s: %s %s",
            msg.event_id,
            status,
            " ".join(ended) or "(none)",
            extra=fields(event_id=msg.event_id, status=status, workflow_ids=ended),
        )

    def take_workflow(self, msg: WorkflowRequestMsg, arrival: Arrival) -> None:
        with self.unit() as result:
            result.merge(self.tm.submit(msg.model_dump(mode="json"), source="push"))
        if any(ignored.reason == "duplicate" for ignored in result.ignored):
            refusal = Refusal("duplicate_workflow_id", f"{msg.workflow_id} was accepted before")
            self.refuse(arrival.topic, refusal, ref={"workflow_id": msg.workflow_id})

    # --- the Experience layer (SPEC §4.6, §4.7) ------------------------------------------------
    def take_observation(self, msg: ObservationMsg, arrival: Arrival) -> None:
        """A repeat is applied once; a flood is refused per kind; the latest value of its kind
        is kept for the next turn; the workflows subscribing to its kind see it."""
        gate = self.observations
        if gate.repeat(msg.kind, msg.observation_id):
            return
        if not gate.allow(msg.kind):
            refusal = Refusal("rate_limited", f"too many observations of kind {msg.kind} a second")
            self.refuse(arrival.topic, refusal, ref={"observation_id": msg.observation_id})
            return
        scope, value = msg.scope.model_dump(exclude_none=True), dict(msg.value)
        entry = {"scope": scope, "value": value}
        latest = gate.newer(msg.kind, msg.observation_id, msg.observed_at, entry)
        event = Observe(
            msg.observation_id,
            msg.kind,
            msg.observed_at,
            scope,
            value,
            msg.requires_cloud_decision,
        )
        with self.unit() as result:
            if latest is not None:
                self.memory.store.set_state(OBSERVATIONS_KEY, latest)
            result.merge(self.tm.observe(event))
        gate.remember(msg.observation_id)
        if latest is not None:
            gate.latest = latest

    def set_experience_mode(self, mode: str) -> None:
        """SIGHUP: `[experience] mode` again; active contracts step down to it at once."""
        with self.unit() as result:
            result.merge(self.tm.set_mode(mode))

    def take_device_context(self, msg: DeviceContextMsg, _arrival: Arrival) -> None:
        context = msg.model_dump(mode="json", exclude_none=True)
        with self.unit():
            self.memory.store.set_state("device_context", context)
        self.after_commit(partial(setattr, self.turns, "device_context", context))

    def tick(self) -> None:
        """Deadlines that have passed fire; consent grants that have expired end."""
        with self.unit() as result:
            expired, ended = self.consent.expire()
            result.merge(expired)
            result.merge(self.tm.tick())
            if ended:  # the cloud is told soon, not at the replay's next idle check
                self.after_commit(self.replayer.notify)
            if self.consent.recheck:  # a reload's cancels are done once this commits
                self.after_commit(partial(setattr, self.consent, "recheck", False))

    async def run_timer(self) -> None:
        while True:
            self.work.wake.clear()
            due = min(
                (d for d in (self.tm.next_deadline(), self.consent.register.next_expiry()) if d),
                default=None,
            )
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
        """A CLI command: applied once; a repeat gets the same answer, a reused id or a
        request past its `expires_at` (the CLI gave up) is refused and answered ok:false."""
        key = f"admin:{msg.request_id}"
        ref = {"request_id": msg.request_id}
        content = fingerprint(jsonx.dumps([msg.command, msg.args]))
        refused = {"request_id": msg.request_id, "ok": False, "error": REUSED.error}
        topic, answers = arrival.topic, self.topics.admin_response
        if answered_before(self, key, content, topic=topic, answer_topic=answers, refused=refused):
            return
        if expired(msg.expires_at, self.clock.now()):
            with self.unit():
                self.outbox.enqueue(answers, {**refused, "error": EXPIRED.error})
            self.refuse(topic, EXPIRED, ref=ref)
            return
        with self.unit():
            self.dedupe.mark(key, topic, content)
            answer = {"request_id": msg.request_id, **self.admin(msg.command, msg.args)}
            self.outbox.enqueue(answers, answer)
            self.dedupe.answered(key, answer)

    def admin(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        """A mutating CLI command in one unit of work: `{"ok": True, "result": …}` or
        `{"ok": False, "error": …}`."""
        if command == "workflow.cancel":
            return self._cancel(args.get("workflow_id"))
        if command == "memory.forget":
            return self._forget(args.get("scope"), args.get("id"), args.get("with_sources", True))
        if command == "memory.revoke":
            return self._revoke(args.get("key"))
        if command in ("consent.grant", "consent.revoke"):
            return self._consent(command.partition(".")[2], args)
        if command == "sync.replay":
            requeue = args.get("requeue_dead", False)
            if not isinstance(requeue, bool):
                return {"ok": False, "error": "args.requeue_dead must be true or false"}
            return self._sync_replay(requeue)
        return {"ok": False, "error": f"{command} is not supported by this build yet"}

    def _cancel(self, workflow_id: Any) -> dict[str, Any]:
        if not isinstance(workflow_id, str) or not workflow_id:
            return {"ok": False, "error": "args.workflow_id is required"}
        with self.unit() as result:
            result.merge(self.tm.cancel(workflow_id, "user"))
        if result.ignored:
            return {"ok": False, "error": f"no active workflow {workflow_id}"}
        return {"ok": True, "result": {"cancelled": [w.workflow_id for w in result.finished]}}

    def _forget(self, scope: Any, target: Any, with_sources: Any = True) -> dict[str, Any]:
        if not isinstance(with_sources, bool):
            return {"ok": False, "error": "args.with_sources must be true or false"}
        if scope not in FORGET_SCOPES:
            return {"ok": False, "error": "args.scope: pair|session|profile_key (with id) or all"}
        if scope == "all" and target is not None:
            return {"ok": False, "error": "args.id must be absent for scope all"}
        if scope != "all" and not (isinstance(target, str) and 0 < len(target) <= 128):
            return {"ok": False, "error": "args.id must be a string of 1 to 128 characters"}
        with self.unit():
            removed = self._forget_in_unit(scope, target, with_sources)
        return {"ok": True, "result": {"removed": removed}}

    def _forget_in_unit(
        self, scope: str, target: str | None, with_sources: bool = True
    ) -> dict[str, int]:
        turns = self.memory.store.turn_ids(scope, target, with_sources=with_sources)
        removed = self.memory_ops.forget(scope, target, with_sources=with_sources)
        self.dedupe.forget_answers(None if turns is None else [f"turn:{t}" for t in turns])
        if scope == "all":  # a dead-lettered turn holds the user's words too
            log.info("forget all: %d inbound dead letters wiped", self.dead_letters.wipe())
            removed["workflows"] = self.tm.forget_all(self._drop_reports)["workflows"]
        self.after_commit(self.checkpointer.truncate)
        return removed

    def _drop_reports(self, workflow_ids: list[str]) -> int:
        self.after_commit(partial(self.reports.forgotten, set(workflow_ids)))
        return self.sync.drop_reports(workflow_ids) + self.reports.owed.drop(workflow_ids)

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
        content = fingerprint(jsonx.dumps([msg.scope, msg.id, msg.with_sources]))
        refused = {"request_id": msg.request_id, "removed": {}, "ok": False}
        refused["error"] = REUSED.error
        topic, answers = arrival.topic, self.topics.forget_result
        if answered_before(self, key, content, topic=topic, answer_topic=answers, refused=refused):
            return
        with self.unit():
            self.dedupe.mark(key, topic, content)
            removed = self._forget_in_unit(msg.scope, msg.id, msg.with_sources)
            body = {"request_id": msg.request_id, "removed": removed}
            self.outbox.enqueue(answers, body)
            self.dedupe.answered(key, body)

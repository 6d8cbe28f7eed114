"""The device's application layer: one method per input, each one unit of work.

Every input — an inbound message (`take_*`), a turn's answer (`close_turn`), a deadline
(`tick`), a supervisor decision, an admin command from the service or from the CLI when no
service runs (`admin`) — runs in ONE unit of work (`unit()`): it calls the TaskManager, the
memory cache and the outboxes, settles finished workflows (memory observations, the active
workflow), and what it causes outside the DB (MQTT sends, cloud reports, turn starts, the
timer's wake-up) happens once, after the outermost commit, and never for a part that rolled
back. The executor (`edge/runtime/executor.py`) owns the loop, the channel and the life cycle; this
class owns what inputs mean.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from a2a_common.clock import iso
from a2a_common.sqlite import StorageError, schema_version
from cache import relabel_if_changed
from edge.app import timings
from edge.app.admin_inputs import AdminInputs
from edge.app.consent_inputs import ConsentInputs
from edge.app.consent_ops import ConsentOps
from edge.app.memory_ops import MemoryOps
from edge.app.observations import STATE_KEY as OBSERVATIONS_KEY
from edge.app.observations import ObservationGate
from edge.app.presence_inputs import PresenceInputs
from edge.app.publisher import TaskPublisher
from edge.app.refusals import Refusals
from edge.app.turn_inputs import TurnInputs
from edge.channel.topics import (
    Arrival,
    DeviceContextMsg,
    ObservationMsg,
    PuiEventMsg,
    Refusal,
    TaskCallbackMsg,
    WorkflowRequestMsg,
)
from edge.config.policies import privacy_policy
from edge.config.settings import Settings
from edge.host.checkpointer import Checkpointer
from edge.host.log import fields
from edge.store.door import Door
from edge.store.inbox import InboxDeadLetters
from edge.store.outbound import Wire
from edge.store.reports import Reports
from edge.store.work import Work
from taskmanager import ACTIVE_STEP, Callback, Observe, TaskManager

log = logging.getLogger(__name__)


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
        door: Door,
    ) -> None:
        self.work = work
        self.door = door  # the executor's too (edge/wiring.py hands it over)
        self.wake = work.wake  # set after every unit's commit: the deadline loop looks again
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
        self.wire: Wire | None = None
        self.owed_at_start: list[str] = []  # commands held until the agents' statuses (4.8)
        self.left_at_start: list[str] = []  # tasks in flight when this run started
        # dedupe key -> the answer a held press got at once (edge/runtime/safety.py)
        self.early_answers: dict[str, dict[str, Any]] = {}
        # (topic, received_at) of a workflow request held before a PUI press -> its event_id:
        # recorded rejected when applied, never started (edge/runtime/safety.py, SPEC 2.4)
        self.covered_requests: dict[tuple[str, float], str] = {}
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
        self.consent_admin = consent_inputs.admin
        refusals = Refusals(self)
        self.dead_letter = refusals.dead_letter
        self.refuse = refusals.refuse
        self.reject_turn = refusals.reject_turn
        self.reject_pui = refusals.reject_pui
        self.take_agent_status = PresenceInputs(self).take_agent_status  # SPEC 4.8
        admin = AdminInputs(self)
        self.take_admin = admin.take_admin
        self.take_forget = admin.take_forget
        self.admin = admin.admin

    def attach(self, wire: Wire) -> None:
        """The broker connection: owed MQTT messages and refusals go out on it from now."""
        self.wire = wire
        self.outbox.attach(wire)

    def ping(self) -> None:
        """Raises when the state DB does not answer."""
        self.memory.db.execute("SELECT 1").fetchone()

    def reapable(self) -> bool:
        """PUBACKed MQTT rows or delivered reports to delete (none after `close`)."""
        return not self._closed and bool(self.outbox.acked or self.reports.owed.reapable)

    def reap_rows(self) -> None:
        """Inside the caller's commit: the MQTT outbox rows the broker PUBACKed, the owed
        workflow reports the cloud took."""
        self.outbox.reap()
        self.reports.owed.reap()

    def sweep(self) -> bool:
        """One bounded batch of memory retention and of the prune; True when either removed
        something."""
        with self.unit():
            swept = any(self.memory_ops.sweep().values())
            removed = self._prune() or swept
            self.memory_ops.copies_after_retention(removed)
            return removed

    def _prune(self, limit: int = 500) -> bool:
        """One batch: ended workflows (with their traces), inbound dedupe marks and dead
        letters past their keep. True when it removed something."""
        now, settings = self.clock.now(), self.settings
        keep_ended = timedelta(days=settings.taskmanager.keep_ended_days)
        keep_marks = timedelta(days=settings.mqtt.dedupe_keep_days)
        keep_dead = timedelta(days=settings.mqtt.dead_letters_keep_days)
        workflows = self.tm.store.prune_ended(iso(now - keep_ended), limit)
        marks = self.dedupe.prune(iso(now - keep_marks), limit)
        dead = self.dead_letters.prune(iso(now - keep_dead), limit)
        if workflows or marks:
            log.info("pruned %d ended workflows and %d dedupe marks", workflows, marks)
        if dead:
            log.info("pruned %d inbound dead letters", dead)
        return bool(workflows or marks or dead)

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

    # --- what the executor asks of the app (edge/runtime/executor.py)
    # -------------------------------
    def warmups(self) -> tuple[Callable[[], object], ...]:
        return (self.cloud.prepare, self.memory.policy.privacy.lexicon.prepare)

    def background(self) -> list[Coroutine[Any, Any, None]]:
        """The app's own loops: the sync replay and the WAL's checkpoints."""
        return [self.replayer.run(), self.checkpointer.run()]

    def when_state_lost(self, lost: Callable[[str], object]) -> None:
        files = self.checkpointer.files  # SPEC §6: DB or WAL removed/replaced
        if files is not None:
            files.when_lost(lost)

    def answer_lost(self, publish: Callable[..., object]) -> None:
        """The state DB went: the turns already acknowledged are answered straight to the
        broker (a removed WAL is copied back: its answers are kept)."""
        files = self.checkpointer.files
        if files is not None and files.db_gone:
            self.turns.answer_lost(publish, self.settings.state_db_path.parent)

    def health(self) -> dict[str, Any]:
        return {
            "cloud": "unreachable" if self.cloud.unreachable else "reachable",
            "mqtt_outbox": self.outbox.pending(),
            "sync_outbox": self.sync.pending(),
            "sync_in_flight": self.replayer.in_flight,
            "active_workflows": len(self.tm.active_ids()),
            "experience_mode": self.tm.mode,
            "wal": self.checkpointer.health(),
            "wal_note": self.checkpointer.note(),
            "schema_version": schema_version(self.memory.db),
        }

    def gauges(self) -> dict[str, Any]:
        """What `/metrics` reads when it is scraped."""
        return {
            "workflows": self.tm.store.counts_by_status(),
            "mqtt_outbox": self.outbox.pending(),
            "sync_outbox": self.sync.pending(),
            "sync_dead": self.sync.dead_count(),
            "inbound_dead": self.dead_letters.count(),
            "sync_acked": self.replayer.acked_total,
            "cloud_reachable": not self.cloud.unreachable,
        }

    def load(self) -> None:
        """The board from the DB, without the recovery's sends (the CLI while no service runs)."""
        self.tm.reload()

    async def drain_sync(self, progress: Callable[[int, int], None] | None) -> int:
        """Replay what the sync outbox holds now (the CLI while no service runs)."""
        return await self.replayer.drain(attempts=3, progress=progress)

    def sync_stalled_since(self) -> str | None:
        return self.replayer.stalled_since

    def sync_warnings(
        self, *, warn_pending: int, warn_age_s: int, age_of: Callable[[str, str], float]
    ) -> list[str]:
        now = iso(self.clock.now())
        return self.sync.warnings(
            now, warn_pending=warn_pending, warn_age_s=warn_age_s, age_of=age_of
        )

    def unconfirmed_cancels(self) -> list[str]:
        return self.tm.alarms()

    def outbox_in_flight(self) -> int:
        return self.outbox.in_flight()

    def flush(self) -> None:
        """Hand what is owed to the broker (a new connection)."""
        self.outbox.flush()

    def on_published(self, mid: int) -> None:
        self.outbox.on_published(mid)

    def heartbeat(self, beat: dict[str, Any]) -> None:
        self.memory.store.set_state("runtime_heartbeat", beat)
        self.reap_rows()  # the PUBACKed rows, delivered reports, go in the same commit

    def relabel(self) -> None:
        """Stored texts labelled with the current lexicon (an upgrade, a lexicon_file)."""
        relabel_if_changed(self.memory)

    def reload_steps(self, fresh: Settings) -> list[Callable[[], object]]:
        """SIGHUP: what a fresh config changes, each step an input of its own."""
        privacy = privacy_policy(fresh)  # reads privacy.lexicon_file again
        self.memory.set_privacy(privacy)
        mode = fresh.experience.mode
        categories = fresh.privacy.consented_categories
        capabilities = fresh.privacy.consented_capabilities
        return [
            self.relabel,  # a term added: what is stored has it too
            partial(self._reload_mode, mode),
            partial(self.reload_consent, categories, capabilities),
        ]

    # --- start-up and the broker's session ------------------------------------------------
    def recover(self, presence_first: bool = False) -> dict[str, int]:
        """Answer turns a previous run took in but never answered, load active workflows,
        send again commands never PUBACKed (attempt + 1), fire late deadlines.
        `presence_first` (the service's start, SPEC 4.8): the commands are taken out of the
        outbox but sent only by `rearm()`, once the agents' retained statuses were read — a
        command to an agent that restarted meanwhile must meet its policy, not go blindly — and
        the late deadlines fire then too, so an answer given in time and redelivered counts."""
        pending = self.turns.answer_interrupted(self.settings.state_db_path.parent)
        active = self.tm.reload()
        with self.unit() as result:
            owed = self._publisher.owed_commands()
            for row_id, _payload in owed:
                self.outbox.drop(row_id)
            task_ids = dict.fromkeys(str(p.get("task_id", "")) for _, p in owed)
            if presence_first:
                self.owed_at_start = list(task_ids)
                self.left_at_start = [
                    step.task_id(wf.workflow_id)
                    for wf in self.tm.board.workflows.values()
                    for step in wf.steps
                    if step.kind == "task" and step.status in ACTIVE_STEP
                ]
            else:
                result.merge(self.tm.redispatch(task_ids, at_start=True))
        if not presence_first:  # else the late deadlines fire once the statuses were read:
            self.tick()  # after what the broker redelivers (edge/runtime/executor.py)
        return {
            "reports_kept": self.reports.recover(self.unit),
            "interrupted_turns": pending,
            "active_workflows": active,
            "commands_resent": result.commands,
        }

    def rearm(self, session_lost: bool) -> int:
        """After the agents' statuses were read at start (SPEC 4.8): the commands the last run
        owed go (those whose task a status ended do not), and every active one again when the
        broker kept no session of ours. The number of commands sent."""
        with self.unit() as result:
            owed, self.owed_at_start = self.owed_at_start, []
            result.merge(self.tm.redispatch(owed, at_start=True))
            if session_lost:  # those left in flight (a new one was sent to this session)
                left, self.left_at_start = self.left_at_start, []
                result.merge(self.tm.redispatch(left, ACTIVE_STEP, at_start=True))
        return result.commands

    def session_lost(self) -> None:
        """The broker has no session of ours: callbacks sent while it had none are gone. Each
        active task's command goes again (same task_id, attempt + 1); the agent dedupes and
        answers with its latest callback."""
        with self.unit() as result:
            result.merge(self.tm.redispatch(None, ACTIVE_STEP))

    # --- workflows --------------------------------------------------------------------------
    def take_callback(self, msg: TaskCallbackMsg, arrival: Arrival) -> None:
        capability = self.topics.callback_capability(arrival.topic)
        verdict = self.tm.verdict(
            msg.task_id, msg.seq, msg.status, capability_id=capability, attempt=msg.attempt
        )
        refused = {  # refused, and nothing written: not even a dedupe mark (SPEC 2.4, 4.5)
            "unknown": ("unknown_task", f"no task {msg.task_id} on this robot"),
            "terminal": ("task_terminal", f"{msg.task_id} has ended; seq {msg.seq} is new"),
            "wrong_capability": ("wrong_capability", f"{msg.task_id} is no task of {capability}"),
            "not_dispatched": ("not_dispatched", f"{msg.task_id} not dispatched (attempt)"),
        }.get(verdict)
        if refused is not None:
            ref = {"task_id": msg.task_id, "seq": msg.seq}
            self.refuse(arrival.topic, Refusal(*refused), ref=ref)
            return
        if verdict == "duplicate":  # the task's last applied seq, in its workflow's row, says
            return  # a repeat of an applied seq, or a stale one: silently a duplicate
        self.metrics.inc("a2a_callbacks_total", "task callbacks taken in", status=msg.status)
        via = self.topics.kind_of(arrival.topic) or "task/callback"  # who answered: traced
        by = (("via", via),) + ((("agent", msg.agent),) if msg.agent else ())
        event = Callback(
            msg.task_id,
            msg.seq,
            msg.status,
            msg.progress,
            msg.reason,
            msg.evidence,
            answered_by=by,
        )
        with self.unit() as result:  # no dedupe mark: the seq it commits is the mark (issue 36)
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
        early = self.early_answers.get(key)  # given while the DB refused writes (SPEC 2.4)
        with self.unit() as result:
            self.dedupe.mark(key, arrival.topic)
            result.merge(self.tm.cancel(msg.workflow_id, "pui"))
            ended = [wf.workflow_id for wf in result.finished]
            unknown = any(i.reason == "unknown_workflow" for i in result.ignored)
            status = "cancelled" if ended else "unknown_workflow" if unknown else "nothing_active"
            answer = early or {"event_id": msg.event_id, "status": status, "workflow_ids": ended}
            status, ended = answer["status"], answer["workflow_ids"]
            self.outbox.enqueue(self.topics.pui_result, answer)  # the same answer, if again
            self.dedupe.answered(key, answer)
        self.after_commit(partial(self.early_answers.pop, key, None))
        self.after_commit(
            partial(
                log.info,
                "PUI cancel %s: %s %s",
                msg.event_id,
                status,
                " ".join(ended) or "(none)",
                extra=fields(event_id=msg.event_id, status=status, workflow_ids=ended),
            )
        )

    def take_workflow(self, msg: WorkflowRequestMsg, arrival: Arrival) -> None:
        press = self.covered_requests.get((arrival.topic, arrival.received_at))
        with self.unit() as result:
            raw = msg.model_dump(mode="json")
            if press is not None and not self.tm.store.accepted(msg.workflow_id):
                result.merge(self.tm.reject(raw, "cancelled_by_pui", source="push"))
                self.after_commit(
                    partial(
                        log.warning,
                        "workflow %s rejected: PUI cancel %s was pressed after it arrived",
                        msg.workflow_id,
                        press,
                    )
                )
            else:
                result.merge(self.tm.submit(raw, source="push"))
        self.covered_requests.pop((arrival.topic, arrival.received_at), None)
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

    def _reload_mode(self, mode: str) -> None:
        was = self.tm.mode
        self.set_experience_mode(mode)
        self.after_commit(partial(log.info, "reloaded: experience mode %s (was %s)", mode, was))

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

    def next_due(self) -> datetime | None:
        """The next deadline or consent expiry (None: nothing to wait for)."""
        due = (self.tm.next_deadline(), self.consent.register.next_expiry())
        return min((d for d in due if d), default=None)

    async def run_reporter(self, door: Door) -> None:
        """The report worker; a report's answer is an input through the door."""

        def decide(workflow_id: str, decision: object) -> None:
            door.run("report answer", partial(self.work.decision, workflow_id, decision))

        await self.reports.run(apply=door.run, decide=decide)

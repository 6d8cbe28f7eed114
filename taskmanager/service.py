"""The TaskManager shell: feeds events to the pure core, persists what changed, hands the
messages it causes (`Command`, `CancelTask`, `Emit`) to a `Publisher` in the same transaction,
and hands cloud reports and finished workflows back to the caller. It knows no MQTT topic: the
publisher the caller gives it does (edge maps effects to topics and its durable outbox).

Every method writes inside `db.atomic()` (a savepoint when the caller already holds the
transaction, as the runtime does so that an inbound message's dedupe mark commits with its
effects). The in-memory board is replaced only after the writes succeeded; a caller whose
outer transaction failed calls `reload()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

from a2a_common.clock import Clock
from a2a_common.db import Database
from a2a_common.people import HOUSEHOLD
from taskmanager.agents import Agent, Agents
from taskmanager.board import Board, next_deadline
from taskmanager.catalog import Catalog
from taskmanager.confirm import STOP_SUFFIX
from taskmanager.core import decide
from taskmanager.droplog import DropWarnings
from taskmanager.effects import EffectCatalog, load_effects
from taskmanager.errors import EffectsError
from taskmanager.events import (
    Callback,
    Cancel,
    CancelTask,
    Command,
    Decide,
    Emit,
    Event,
    Ignored,
    Observe,
    Presence,
    Redispatch,
    Report,
    SetMode,
    Submit,
    Tick,
    Trace,
)
from taskmanager.evidence import ReasonWarnings, screen_evidence, screen_reason
from taskmanager.model import Workflow
from taskmanager.presence import still_held
from taskmanager.redact import Classify, bounded, without_words
from taskmanager.shell_io import Message as Message  # importable from here, as it was
from taskmanager.shell_io import Publisher, Result, TurnRef, rejected_event
from taskmanager.store import WorkflowStore
from taskmanager.validate import Rejected, validate_replan, validate_task, validate_workflow
from taskmanager.watch import CancelWatches
from taskmanager.watch import Outcome as WatchOutcome

log = logging.getLogger(__name__)


def _default_effects(catalog: Catalog) -> EffectCatalog:
    """The shipped effect catalog; none when it does not fit this capability catalog (a test's
    own): every contract naming an effect is then refused, the plans run."""
    try:
        return load_effects(catalog)
    except EffectsError as exc:
        log.warning("no effect catalog: %s", exc)
        return EffectCatalog({})


def _none_held(_person: str) -> frozenset[str]:
    return frozenset()


def _whose(turn: TurnRef | None) -> str:
    """A request's person: its turn's; one without a turn (pushed) is the household's."""
    return turn.person_id if turn is not None else HOUSEHOLD


def _by(event: Event) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """A callback's task and who answered it: its step's event in the trace names them."""
    if isinstance(event, Callback) and event.answered_by:
        return event.task_id, event.answered_by
    return None


class TaskManager:
    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        catalog: Catalog,
        publisher: Publisher,
        ask_timeout_s: float = 300.0,
        held_capabilities: Callable[[str], frozenset[str]] | None = None,
        effects: EffectCatalog | None = None,
        mode: str = "enforce",
        cancel_confirm_s: float = 2.0,
        unsent_cancels: Callable[[], set[str]] | None = None,
        never_sent: Callable[[], set[str]] | None = None,
        classify: Classify | None = None,
    ) -> None:
        self._db = db
        # the memory's classifier of categories: a sensitive term in a request's copy is
        # redacted from the trace too (taskmanager/redact.py)
        self._classify = classify
        self._effects = effects if effects is not None else _default_effects(catalog)
        self.mode = mode  # `[experience] mode` (SPEC 4.7); `set_mode` changes it
        # the capabilities a consent grant covers now for a workflow of this person (the
        # device's register, SPEC §5.6, §5.7): read at validation time, never from a request
        self._held = held_capabilities or _none_held
        self._clock = clock
        self._catalog = catalog
        self._out = publisher
        self._ask_timeout_s = ask_timeout_s
        self.store = WorkflowStore(db=db)
        self.board = Board()
        self._warned = DropWarnings()
        self.watches = CancelWatches(db=db, catalog=catalog, window_s=cancel_confirm_s)
        self._unsent = unsent_cancels or set
        # tasks ended in this unit whose command the outbox dropped never handed to the broker
        self._never_sent = never_sent or set
        self._reasons = ReasonWarnings()
        self.agents = Agents(db=db)  # SPEC 4.8: each agent's last status
        self._started = clock.now()  # this run's start: tasks dispatched before were left

    def reload(self) -> int:
        self.board = self.store.load_active()
        self.agents.load()
        # the last status known, this run's or the row an earlier run kept: an agent offline
        # before a restart stays offline until it says otherwise, also when the broker lost
        # its retained status (SPEC 4.8; `status` shows the same rows)
        self.board.agents = {c: (a.state, a.boot_id) for c, a in self.agents.all.items()}
        self.watches.load()
        # a cancel never PUBACKed (the CLI's while no service ran, or one lost to a crash) has
        # not reached the agent: its window starts again when it goes out
        self.watches.rearm(self._unsent(), self._clock.now())
        self.board.fenced = self.watches.fences()
        return len(self.board.workflows)

    def alarms(self) -> list[str]:
        """Tasks whose cancel was never confirmed (SPEC 4.2): the body may still be moving."""
        return self.watches.alarms()

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def next_deadline(self) -> datetime | None:
        instants = [t for t in (next_deadline(self.board), self.watches.next_due()) if t]
        return min(instants, default=None)

    def active_ids(self) -> list[str]:
        return sorted(
            self.board.workflows,
            key=lambda w: self.board.workflows[w].created_at or self._clock.now(),
        )

    # --- the one path every event takes ---------------------------------------------------------
    def _apply(self, event: Event) -> Result:
        now = self._clock.now()
        outcome = decide(self.board, event, now)
        result = Result()
        etags = {wf.workflow_id: wf.etag for wf in outcome.changed}
        with self._db.atomic(), self.store.change():
            for wf in outcome.changed:
                self.store.save(wf, now)
            cancels = [e for e in outcome.effects if isinstance(e, CancelTask)]
            self._never_sent()  # a unit that failed may have left some: not this unit's
            for effect in outcome.effects:
                if isinstance(effect, Command | CancelTask | Emit):
                    self._out.publish(effect)
                    result.commands += isinstance(effect, Command)
                    if isinstance(effect, Emit) and effect.payload["status"] != "PROGRESS":
                        self._trace_event(effect.payload, outcome.changed, now, _by(event))
                elif isinstance(effect, Trace):
                    self.store.trace(
                        effect.workflow_id,
                        now,
                        etags.get(effect.workflow_id),
                        effect.kind,
                        effect.detail,
                    )
                elif isinstance(effect, Report):
                    self._out.publish(effect)  # every effect leaves by the one road
                else:
                    result.ignored.append(effect)
            unsent = self._confirmed_unsent(cancels, outcome.changed, now)
            cancels = [c for c in cancels if c.payload["task_id"] not in unsent]
            self.watches.record(cancels, outcome.changed, now)  # SPEC 4.2: confirmed, not assumed
        self.board = outcome.board
        result.finished = [wf for wf in outcome.changed if wf.terminal]
        for task_id in sorted(unsent):  # nothing to wait for: its resource is free now
            resource = next((r for r, t in self.board.fenced.items() if t == task_id), None)
            result = self._release(resource, task_id, result)
        return result

    def _confirmed_unsent(
        self, cancels: list[CancelTask], changed: list[Workflow], now: datetime
    ) -> set[str]:
        """Inside the unit: the cancelled tasks of this unit whose only command was dropped
        from the outbox never handed to the broker (SPEC 4.2): no agent has it, the stop is
        confirmed at once — no window, no re-send, no safe stop, no alarm. A retried task
        (attempt > 1) may have an earlier command out, one with a callback is running: those
        are watched."""
        dropped = self._never_sent()
        if not dropped:
            return set()
        etags = {wf.workflow_id: wf.etag for wf in changed}
        unsent: set[str] = set()
        for cancel in cancels:
            task_id = str(cancel.payload["task_id"])
            workflow_id, _, step_id = task_id.rpartition(":")
            wf = next((w for w in changed if w.workflow_id == workflow_id), None)
            step = wf.step(step_id) if wf else None
            if task_id not in dropped or step is None or step.attempt > 1 or step.last_seq:
                continue  # a retry, or a task the agent spoke of: it may be running
            if self.watches.find(task_id) is not None:
                continue
            unsent.add(task_id)
            log.info("cancel of %s confirmed: its command was never sent", task_id)
            detail = {"task_id": task_id, "body_status": "never_sent", "phase": "unsent"}
            self.store.trace(workflow_id, now, etags.get(workflow_id), "cancel_confirmed", detail)
        return unsent

    def _trace_event(
        self,
        payload: dict[str, Any],
        changed: list[Workflow],
        now: datetime,
        by: tuple[str, tuple[tuple[str, str], ...]] | None = None,
    ) -> None:
        detail = {k: payload[k] for k in ("step_id", "status", "reason") if payload.get(k)}
        if by is not None and payload.get("task_id") == by[0]:
            detail.update(by[1])  # the agent that answered (sent `agent`, its topic)
        for wf in changed:
            step = (
                wf.step(payload["step_id"])
                if wf.workflow_id == payload["workflow_id"] and payload["step_id"]
                else None
            )
            if step is not None and step.evidence and step.terminal:
                detail["evidence"] = step.evidence
        self.store.trace(payload["workflow_id"], now, payload["etag"], "event", detail)

    # --- inputs ---------------------------------------------------------------------------------
    def _accept(
        self, checked: Workflow | Rejected, raw: Any, source: str, turn: TurnRef | None
    ) -> Result:
        now = self._clock.now()
        if isinstance(checked, Rejected):
            wf_id = checked.workflow_id
            if wf_id and not self.store.exists(wf_id):  # a rejected id stays free (SPEC 4.3)
                with self._db.atomic():
                    small = bounded(raw)  # a refused request may be anything the cloud sent
                    kept = (
                        without_words(small, turn.text, classify=self._classify) if turn else small
                    )
                    self.store.save_rejected(
                        wf_id, checked.reason, kept, source, turn.turn_id if turn else None, now
                    )
                    self._out.publish(rejected_event(wf_id, checked.reason, now))
                    self.store.trace(
                        wf_id, now, 1, "rejected", {"reason": checked.reason, "request": kept}
                    )
            log.warning("workflow %s rejected: %s", wf_id, checked.reason)
            return Result(rejected=[(wf_id, checked.reason)])
        if self.store.accepted(checked.workflow_id):  # only accepted workflows reserve an id
            return Result(ignored=[Ignored("duplicate", f"{checked.workflow_id} already known")])
        if turn is not None:
            checked.turn_id, checked.pair_id, checked.session_id, checked.person_id = (
                turn.turn_id,
                turn.pair_id,
                turn.session_id,
                turn.person_id,
            )
        with self._db.atomic(), self.store.change():  # the request and what it started: one row
            self.store.trace(
                checked.workflow_id,
                now,
                0,
                "request",
                {
                    "source": source,
                    "turn_id": checked.turn_id,
                    "pair_id": checked.pair_id,
                    "request": (
                        without_words(raw, turn.text, classify=self._classify) if turn else raw
                    ),
                },
            )
            result = self._apply(Submit(checked))
        result.accepted.append(checked.workflow_id)
        return result

    def submit(self, raw: Any, *, source: str, turn: TurnRef | None = None) -> Result:
        checked = validate_workflow(
            raw,
            self._catalog,
            now=self._clock.now(),
            source=source,
            held=self._held(_whose(turn)),
            effects=self._effects,
            mode=self.mode,
        )
        return self._accept(checked, raw, source, turn)

    def reject(self, raw: Any, reason: str, *, source: str) -> Result:
        """A request recorded `rejected` with `reason` without being validated, nothing
        dispatched (SPEC 2.4: a PUI cancel-all pressed after it arrived); its id stays free."""
        wf_id = raw.get("workflow_id") if isinstance(raw, dict) else None
        checked = Rejected(reason, wf_id if isinstance(wf_id, str) else None)
        return self._accept(checked, raw, source, None)

    def submit_task(
        self,
        raw: Any,
        *,
        fallback_id: str,
        turn: TurnRef | None = None,
    ) -> Result:
        checked = validate_task(
            raw,
            self._catalog,
            now=self._clock.now(),
            fallback_id=fallback_id,
            held=self._held(_whose(turn)),
        )  # a task request carries no experience
        return self._accept(checked, raw, "task", turn)

    def callback(self, cb: Callback) -> Result:
        """The agent's evidence goes through the operation's allowlist first (SPEC 4.5): what
        is dropped never reaches the core, the store, an event, the trace or a report. One
        change: a confirmation and the release it causes trace one row per workflow."""
        with self.store.change():
            return self._callback(cb)

    def _callback(self, cb: Callback) -> Result:
        workflow_id, _, step_id = cb.task_id.rpartition(":")
        wf = self.board.workflows.get(workflow_id)
        step = wf.step(step_id) if wf else None
        if (step is None or step.terminal) and self.watches.find(cb.task_id):
            return self._confirm(cb)
        operation = self._catalog.get(step.capability_id, step.operation_id) if step else None
        screened = screen_evidence(operation, cb.evidence, step.args if step else None)
        if screened.dropped and operation is not None:
            self._warned.warn(cb.task_id, operation, screened.dropped)
        reason = screen_reason(cb.reason)  # a code, never the agent's free text
        if reason != cb.reason:
            self._reasons.warn(cb.task_id, operation)
        return self._apply(
            replace(
                cb,
                reason=reason,
                evidence=screened.kept,
                dropped=screened.dropped,
                contradicted=screened.contradicted,
                ask_timeout_s=self._ask_timeout_s,
            )
        )

    def _confirm(self, cb: Callback) -> Result:
        """A callback of a cancelled task (or of its safe stop) whose body is not yet confirmed
        stopped: a terminal one is the confirmation (SPEC 4.2), never refused."""
        watch = self.watches.find(cb.task_id)
        assert watch is not None
        stop = cb.task_id != watch.task_id
        op = watch.stop_operation if stop else watch.operation_id
        screened = screen_evidence(self._catalog.get(watch.capability_id, op or ""), cb.evidence)
        now = self._clock.now()
        workflow_of = self._workflows_once()
        with self._db.atomic():
            out = self.watches.callback(
                cb.task_id, cb.seq, cb.status, screened.kept, now, workflow_of
            )
            if watch.task_id not in self.watches.watches and not stop:
                self._applied(cb.task_id, cb.seq)  # SPEC 2.2: its repeat is a duplicate
            by = dict(cb.answered_by)  # who confirmed: its trace rows say so
            out.traces[:] = [(w, kind, {**detail, **by}) for w, kind, detail in out.traces]
            result = self._carry(out, now, workflow_of)
        if watch.task_id not in self.watches.watches:
            return self._release(watch.resource, watch.task_id, result)
        return result

    def _applied(self, task_id: str, seq: int) -> None:
        """A confirming callback's seq is the task's last applied one, on disk and on the
        board (an ended step of an active workflow)."""
        workflow_id, _, step_id = task_id.rpartition(":")
        wf = self.board.workflows.get(workflow_id)
        step = wf.step(step_id) if wf else None
        if step is not None:
            step.last_seq = max(step.last_seq, seq)
        self.store.note_seq(task_id, seq)

    def _release(self, resource: str | None, task_id: str, result: Result) -> Result:
        """The body is confirmed stopped: its resource is free, the next step on it starts."""
        if resource is None or self.board.fenced.get(resource) != task_id:
            return result
        del self.board.fenced[resource]
        # the next step on it starts; deadlines fire at their own tick, not here (a release
        # applied from the held backlog would fire them ahead of inputs that came before them:
        # tests/edge/test_held_order.py)
        result.merge(self._apply(Tick(deadlines=False)))
        return result

    def _workflow(self, workflow_id: str) -> Workflow | None:
        """Active on the board, else as it ended on disk (None once pruned or forgotten)."""
        wf = self.board.workflows.get(workflow_id)
        if wf is not None:
            return wf
        return self.store.load(workflow_id)

    def _workflows_once(self) -> Callable[[str], Workflow | None]:
        """`_workflow` for one unit of work: an ended workflow is read from disk once (a
        cancel's confirmation read the same row three times)."""
        seen: dict[str, Workflow | None] = {}

        def workflow_of(workflow_id: str) -> Workflow | None:
            if workflow_id not in seen:
                seen[workflow_id] = self._workflow(workflow_id)
            return seen[workflow_id]

        return workflow_of

    def _carry(
        self, out: WatchOutcome, now: datetime, workflow_of: Callable[[str], Workflow | None]
    ) -> Result:
        """Inside the caller's transaction: a watch's messages, traces and reports."""
        for message in out.messages:
            self._out.publish(message)
        for workflow_id, kind, detail in out.traces:
            wf = workflow_of(workflow_id)
            self.store.trace(workflow_id, now, wf.etag if wf else None, kind, detail)
        for report in out.reports:
            self._out.publish(report)
        return Result(commands=sum(isinstance(m, Command) for m in out.messages))

    def verdict(
        self,
        task_id: str,
        seq: int,
        status: str = "",
        *,
        capability_id: str | None = None,
        attempt: int | None = None,
    ) -> str:
        """What a callback is before it is applied: `apply` (its task runs, or a cancelled
        task confirms its stop, SPEC 4.2), `duplicate` (a seq at or below the last applied one
        of its task, running or ended: the step's `last_seq`, committed with the callback that
        set it, is the callbacks' dedupe mark; or an old boot's, SPEC 4.8), `terminal` (a new
        seq for an ended task: refused, SPEC 2.4), `unknown` (no such task here),
        `wrong_capability` (it came on another capability's callback topic than its task's:
        only that agent speaks for it, SPEC 4.5) or `not_dispatched` (its step was never
        dispatched, or not under that `attempt`: the real agent's seq must stay free).
        `capability_id` is the one its topic names (None: the shared `P/task/callback`)."""
        workflow_id, _, step_id = task_id.rpartition(":")
        wf = self.board.workflows.get(workflow_id)
        step = wf.step(step_id) if wf else None
        watched = self.watches.find(task_id)
        owner = watched.capability_id if watched else step.capability_id if step else None
        if capability_id is not None and owner is not None and owner != capability_id:
            return "wrong_capability"
        if step is not None and attempt is not None and attempt > step.attempt:
            return "not_dispatched"  # an attempt the runtime never sent
        if step is not None and attempt is not None and attempt < step.epoch_attempt:
            return "duplicate"  # the restarted agent's old boot: stale (SPEC 4.8)
        if step is not None and not step.terminal:
            if step.kind != "task" or step.status == "QUEUED":
                return "not_dispatched"
            return "duplicate" if seq <= step.last_seq else "apply"
        if watched is not None:
            outcome = self.watches.verdict(task_id, seq, status)
            assert outcome is not None
            return "apply" if outcome == "confirm" else outcome
        if task_id.endswith(STOP_SUFFIX):  # a safe stop's callback after its cancel confirmed
            known = self.store.last_seq(task_id.removesuffix(STOP_SUFFIX)) is not None
            return "duplicate" if known else "unknown"
        last = step.last_seq if step is not None else self.store.last_seq(task_id)
        if last is None:
            return "unknown"
        return "duplicate" if seq <= last else "terminal"

    def forget_all(self, drop_reports: Callable[[list[str]], int]) -> dict[str, int]:
        """`forget --all`, inside the caller's unit of work (the caller truncates the WAL after
        the commit): ended workflows with their traces, the traces of the active ones, and —
        through `drop_reports(workflow_ids)` — their undelivered reports. Active workflows keep
        running: a forget must not leave a moving body without its workflow; their docs hold
        the turn's ids (never its words) and allowlisted evidence only."""
        with self._db.atomic():
            ended, traces = self.store.forget_all()
            reports = drop_reports(ended)
        counts = {"workflows": len(ended), "workflow_traces": traces, "reports": reports}
        log.info("forget all: %s", counts)
        return counts

    def cancel(self, workflow_id: str | None, reason: str) -> Result:
        """Cancel one active workflow (or every one: `None`). Nothing active of that id is
        `ignored`: `ended` when it was accepted here once, else `unknown_workflow`."""
        result = self._apply(Cancel(workflow_id, reason))
        if workflow_id is not None and self.store.accepted(workflow_id):
            result.ignored = [
                Ignored("ended", f"{workflow_id} has ended")
                if i.reason == "unknown_workflow"
                else i
                for i in result.ignored
            ]
        return result

    def preview_cancel(
        self, workflow_id: str | None, reason: str, board: Board | None = None
    ) -> tuple[Board, list[CancelTask], list[Workflow], bool]:
        """What `cancel` would do, in memory only, nothing written (SPEC 2.4: a cancel acts
        while the DB refuses writes, and is recorded once it takes them): the board after it
        (from `board`, else the current one), its `task/cancel`s, the workflows it ends, and
        whether the named id was never accepted here (`unknown_workflow`)."""
        outcome = decide(board or self.board, Cancel(workflow_id, reason), self._clock.now())
        cancels = [e for e in outcome.effects if isinstance(e, CancelTask)]
        ignored = any(
            isinstance(e, Ignored) and e.reason == "unknown_workflow" for e in outcome.effects
        )
        unknown = ignored and workflow_id is not None and not self.store.accepted(workflow_id)
        return outcome.board, cancels, [wf for wf in outcome.changed if wf.terminal], unknown

    def needing(self, capability_id: str) -> list[str]:
        """Active workflows with a step not yet ended whose operation needs a consent grant for
        this capability: what a revoke (or an expiry) of it cancels (SPEC §5.6)."""
        found = []
        for workflow_id, wf in self.board.workflows.items():
            for step in wf.steps:
                spec = self._catalog.get(step.capability_id, step.operation_id)
                if step.terminal or spec is None or step.capability_id != capability_id:
                    continue
                if spec.requires_consent:
                    found.append(workflow_id)
                    break
        return sorted(found)

    def person_of(self, workflow_id: str) -> str:
        """Whose turn started this active workflow (SPEC 5.7; pushed ones: the household's)."""
        wf = self.board.workflows.get(workflow_id)
        return wf.person_id if wf is not None else HOUSEHOLD

    def tick(self) -> Result:
        """Deadlines that passed fire; so do cancel confirmation windows (SPEC 4.2)."""
        with self.store.change():
            return self._tick()

    def _tick(self) -> Result:
        result = self._apply(Tick())
        now = self._clock.now()
        due = self.watches.next_due()
        if due is not None and now >= due:
            workflow_of = self._workflows_once()
            with self._db.atomic():
                result.merge(self._carry(self.watches.due(now, workflow_of), now, workflow_of))
        return result

    def presence(
        self,
        capability_id: str,
        state: str,
        boot_id: str | None,
        tasks: tuple[str, ...],
        ts: str | None,
    ) -> tuple[Agent, Result]:
        """An agent's status (SPEC 4.8). Its row is kept whatever the capability; only one of
        the catalog's acts on tasks, and only when its state or boot changed (or it is the
        first status of this run: what a task left in flight by a restart meets)."""
        known = capability_id in self._catalog.capabilities()
        now = self._clock.now()
        first = capability_id not in self.agents.seen()
        result = Result()
        with self._db.atomic(), self.store.change():
            agent, changed = self.agents.take(capability_id, state, boot_id, tasks, ts, known, now)
            if known and changed:
                event = Presence(
                    capability_id, state, boot_id, frozenset(tasks), first, self._started
                )
                result = self._apply(event)
            if known and state == "online" and tasks:
                self._cancel_held(capability_id, boot_id, tasks, now)
        return agent, result  # the caller: `agents.commit(agent)` once its unit committed

    def _cancel_held(
        self, capability_id: str, boot_id: str | None, tasks: tuple[str, ...], now: datetime
    ) -> None:
        """Inside the caller's transaction: a `task/cancel` (reason `supervisor`, confirmed the
        4.2 way: re-sent, then the safe stop and the alarm) for each task this status lists that
        a status ended; its resource waits for the confirmation."""
        held = [
            (wf, step)
            for wf, step in still_held(capability_id, tasks, self._workflow)
            if self.watches.find(step.task_id(wf.workflow_id)) is None
        ]
        if not held:
            return
        cancels = [
            CancelTask(
                capability_id,
                {
                    "task_id": step.task_id(wf.workflow_id),
                    "workflow_id": wf.workflow_id,
                    "reason": "supervisor",
                },
            )
            for wf, step in held
        ]
        self.watches.record(cancels, [wf for wf, _ in held], now)
        for cancel, (wf, step) in zip(cancels, held, strict=True):
            task_id = step.task_id(wf.workflow_id)
            log.warning(
                "agent %s still holds %s, ended %s: task/cancel sent",
                capability_id,
                task_id,
                step.reason,
            )
            self._out.publish(cancel)
            detail = {
                "task_id": task_id,
                "capability_id": capability_id,
                "state": "online",
                "boot_id": boot_id,
                "was_boot": step.boot_id,
                "outcome": "cancelled",
                "ended": step.reason,
            }
            self.store.trace(wf.workflow_id, now, wf.etag, "presence", detail)
            if step.resource and step.resource not in self.board.fenced:
                self.board.fenced[step.resource] = task_id

    def held_by_agents(self) -> set[str]:
        """Capabilities with a task in flight whose agent has sent no status in this run: what
        the start waits for, a bounded time, before it re-arms anything (SPEC 4.8)."""
        caps = {
            step.capability_id
            for wf in self.board.workflows.values()
            for step in wf.steps
            if step.kind == "task" and step.status in ("DISPATCHED", "RUNNING")
        }
        return caps - self.agents.seen()

    def observe(self, observation: Observe) -> Result:
        """A semantic observation (SPEC §4.6) into the workflows that subscribe to its kind."""
        return self._apply(observation)

    def set_mode(self, mode: str) -> Result:
        """`[experience] mode` (SPEC §4.7): new contracts are taken under it; active ones step
        down to it (a kill switch stops what runs, not only what comes)."""
        old, self.mode = self.mode, mode
        if old != mode:
            log.info("experience mode %s -> %s", old, mode)
        return self._apply(SetMode(mode))

    def decision(self, workflow_id: str, decision: Any) -> Result:
        """Apply the supervisor's answer (`None` when there was none or it did not arrive)."""
        with self.store.change():
            return self._decision(workflow_id, decision)

    def _decision(self, workflow_id: str, decision: Any) -> Result:
        wf = self.board.workflows.get(workflow_id)
        if wf is None:
            return Result(ignored=[Ignored("unknown_workflow", workflow_id)])
        kind = decision.get("kind") if isinstance(decision, dict) else None
        if kind not in ("continue", "ask", "replan", "complete", "abort"):
            kind = None
        steps = None
        if kind == "replan":
            checked = validate_replan(
                decision.get("steps"), wf, self._catalog, self._held(wf.person_id)
            )
            if isinstance(checked, str):
                log.warning("replan for %s refused: %s", workflow_id, checked)
                with self._db.atomic():
                    self.store.trace(
                        workflow_id,
                        self._clock.now(),
                        wf.etag,
                        "replan_refused",
                        {"reason": checked},
                    )
                kind = None
            else:
                steps = checked
        question = decision.get("question") if isinstance(decision, dict) else None
        return self._apply(
            Decide(
                workflow_id,
                kind,
                question if isinstance(question, str) else None,
                steps,
                self._ask_timeout_s,
            )
        )

    def redispatch(
        self,
        task_ids: Iterable[str] | None,
        statuses: frozenset[str] = frozenset({"DISPATCHED"}),
        *,
        at_start: bool = False,
    ) -> Result:
        """The commands of these tasks (None: every task) whose step is in `statuses` go again,
        same task_id, attempt + 1: the agent dedupes and answers with its latest callback.
        `at_start` (the runtime's start): none whose operation says `on_restart: fail` (SPEC
        4.8). `result.commands` counts them."""
        ids = None if task_ids is None else tuple(task_ids)
        return self._apply(Redispatch(ids, statuses, at_start))

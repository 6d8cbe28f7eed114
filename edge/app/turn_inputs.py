"""The turn inputs of the app (SPEC §2, §2.4, §3.1): a turn is taken in (the utterance
committed before the cloud is asked), answered one at a time, and closed in one unit of work
with its `P/turn/response`. Every turn whose `turn_id` can be read is answered, every time it
arrives: `rejected` for refused content or a reused id with other words, the stored response
again for a repeat."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from a2a_common import jsonx
from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.people import person_of
from a2a_common.stopwatch import Stopwatch
from cache import Memory, plan_update
from cloud_client import CloudClient, CloudError, CloudUnavailable, TurnResponse
from edge.app import timings
from edge.app.context_budget import bounded_context
from edge.app.offline import match_intent
from edge.app.turns import (
    ERROR_TEXT,
    LOCAL_ROUTE,
    OFFLINE_TEXT,
    Received,
    response_body,
    staleness,
    turn_request,
    update_input_of,
)
from edge.channel.topics import Arrival, Refusal, Topics, TurnRequestMsg
from edge.config.settings import Settings
from edge.host.log import RepeatLimiter, fields
from edge.host.metrics import Metrics
from edge.store import lost_answers
from edge.store.door import Door
from edge.store.inbox import InboxDedupe
from edge.store.outbound import DurableOutbox
from edge.store.work import Work
from sync import Replayer, SyncOutbox
from taskmanager import TurnRef

log = logging.getLogger(__name__)
T = TypeVar("T")
# turns taken in and not answered yet, at most: each waits in memory for its turn at the
# planner, one at a time; a turn beyond is answered `rejected` / `busy` at once (docs/design.md)
MAX_WAITING = 500


def fingerprint(text: str) -> str:
    """What tells a repeat from a reused turn_id, without keeping the words."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class TurnInputs:
    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        work: Work,
        memory: Memory,
        topics: Topics,
        outbox: DurableOutbox,
        sync_outbox: SyncOutbox,
        dedupe: InboxDedupe,
        cloud: CloudClient,
        replayer: Replayer,
        metrics: Metrics,
        door: Door,
    ) -> None:
        self.door = door
        self.settings = settings
        self.clock = clock
        self.unit = work.unit
        self.after_commit = work.after_commit
        self.tm = work.tm
        self.memory = memory
        self.topics = topics
        self.outbox = outbox
        self.sync = sync_outbox
        self.dedupe = dedupe
        self.cloud = cloud
        self.replayer = replayer
        self.metrics = metrics
        # the latest retained P/device/context, merged into every turn (the app keeps it)
        self.device_context: dict[str, Any] = memory.state("device_context", {}) or {}
        self._turn_lock = asyncio.Lock()
        # the latest semantic observation per kind (SPEC 4.6), set by the app
        self.observations: Callable[[], dict[str, Any]] = dict
        self.in_flight: set[asyncio.Task[None]] = set()  # turns waiting on the cloud
        self._repeats: dict[str, int] = {}  # turn_id being answered -> arrivals since the first
        self._acked: set[str] = set()  # taken in and acknowledged, answer not committed yet
        self.said = RepeatLimiter(  # a flood of refused turns: a bounded number of lines
            log, settings.log.repeat_lines, settings.log.repeat_window_s, clock.monotonic
        )

    def take_turn(self, msg: TurnRequestMsg, arrival: Arrival) -> None:
        """Commit the utterance (with its dedupe mark) before the cloud is asked, so it is kept
        whatever the cloud does; the answer starts after the commit. A repeat gets the stored
        answer again; the same id with other words is `rejected` (`duplicate_turn_id`), and so
        is an id whose dedupe mark was pruned while its utterance is still stored (its answer is
        no longer kept; before, the second insert failed and the turn got `internal_error`)."""
        watch = Stopwatch(arrival.received_at)
        watch.lap("take_in")
        key = f"turn:{msg.turn_id}"
        words = fingerprint(msg.recognized_text)
        seen = self.dedupe.seen(key)
        if seen is not None:
            self._again(msg.turn_id, seen.fingerprint in (None, words), seen.answer)
            return
        if self.memory.store.turn_recorded(msg.turn_id):  # the pair outlived its dedupe mark
            used = "turn_id of an utterance answered before mqtt.dedupe_keep_days; not kept"
            self._refused(msg.turn_id, Refusal("duplicate_turn_id", used))
            return
        expires = arrival.expires_at
        stale = self._stale(msg.spoken_at, arrival.received_at, expires)
        if stale is not None:
            self._refused(msg.turn_id, Refusal("stale", stale))
            return
        if len(self._repeats) >= MAX_WAITING:  # taken in, not answered yet: each holds memory
            busy = f"{MAX_WAITING} turns are already waiting for the planner"
            self._refused(msg.turn_id, Refusal("busy", busy))
            return
        speaker = msg.speaker
        person = person_of(
            speaker.id if speaker else None,
            speaker.confidence if speaker else None,
            self.settings.memory.speaker_min_confidence,
        )
        with self.unit():
            pair_id, session_id = self.memory.record_utterance(
                turn_id=msg.turn_id,
                requested_session=msg.session_id,
                text=msg.recognized_text,
                person=person,
            )
            self.dedupe.mark(key, arrival.topic, words)
        self.after_commit(
            partial(
                log.info,
                "turn %s recorded in %s",
                msg.turn_id,
                session_id,
                extra=fields(turn_id=msg.turn_id, session_id=session_id, pair_id=pair_id),
            )
        )
        context = {**self.device_context, **(msg.device_context or {})}
        context.pop("observations", None)  # the device's, never a sender's (SPEC 4.6)
        if observed := self.observations():
            context["observations"] = observed
        context = self._bounded(msg.turn_id, context)
        watch.lap("record")
        turn = Received(
            msg.turn_id,
            pair_id,
            session_id,
            msg.recognized_text,
            context,
            watch,
            msg.spoken_at,
            expires,
            person,
        )
        self._repeats.setdefault(msg.turn_id, 0)  # at once: a repeat may share the batch
        self.after_commit(partial(self._start_answer, turn))

    def _refused(self, turn_id: str, refusal: Refusal) -> None:
        """A turn refused before it is taken in (`stale`, `busy`): answered `rejected` at once,
        its WARNING line limited in a flood (edge/host/log.py)."""
        self.said.say(
            f"turn:{refusal.error}",
            logging.WARNING,
            "turn %s refused: %s (%s)",
            turn_id,
            refusal.error,
            refusal.detail,
            extra=fields(turn_id=turn_id, error=refusal.error),
        )
        self.reject(turn_id, refusal)

    def _bounded(self, turn_id: str, context: dict[str, Any]) -> dict[str, Any]:
        """What the turn forwards in `device_context`: within its byte budget."""
        bounded = bounded_context(context, self.settings.memory.device_context_budget_bytes)
        if bounded.dropped:
            self.metrics.inc(
                "a2a_device_context_trimmed_total",
                "turns whose device_context was over memory.device_context_budget_bytes",
            )
            log.debug(
                "turn %s: device_context over its budget, left out: %s",
                turn_id,
                " ".join(bounded.dropped),
                extra=fields(turn_id=turn_id, dropped=list(bounded.dropped)),
            )
        return bounded.context

    def _again(self, turn_id: str, same_words: bool, answer: dict[str, Any] | None) -> None:
        if not same_words:
            log.info("turn %s: its id came again with other words", turn_id)
            self.reject(turn_id, Refusal("duplicate_turn_id", "turn_id already used"))
        elif answer is not None:
            log.info("turn %s is a repeat; its answer goes again", turn_id)
            with self.unit():
                self._send(answer)
        elif turn_id in self._repeats:  # still waiting on the cloud: answered when it is
            log.info("turn %s came again while it is answered; it gets the answer too", turn_id)
            self._repeats[turn_id] += 1
        else:  # taken in by an earlier run and forgotten since, or still being recovered
            log.info("turn %s is a redelivery; already taken in", turn_id)

    def _stale(
        self, spoken_at: datetime | None, received_at: float, expires_at: float | None
    ) -> str | None:
        return staleness(
            now=self.clock.now(),
            spoken_at=spoken_at,
            received_at=received_at,
            expires_at=expires_at,
            max_age_s=self.settings.mqtt.turn_max_age_s,
        )

    def reject(self, turn_id: str, refusal: Refusal) -> None:
        """`P/turn/response` `rejected` (or `error` when the runtime failed on it) for a turn
        whose content was refused: the voice front-end never waits for nothing."""
        status = "error" if refusal.error == "internal_error" else "rejected"
        with self.unit():
            self._send(response_body(turn_id, status, "", error=refusal.error))

    def _send(self, body: dict[str, Any]) -> None:
        """Every `P/turn/response` goes out here, and is counted here once it is committed."""
        self.outbox.enqueue(self.topics.turn_response, body)
        count = partial(self.metrics.inc, "a2a_turns_total", "turn responses sent, by status")
        self.after_commit(partial(count, status=body["status"]))

    def _start_answer(self, turn: Received) -> None:
        self._acked.add(turn.turn_id)  # runs with the ack: effects of the same commit
        task = asyncio.create_task(self.answer(turn))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def answer(self, turn: Received) -> None:
        """Ask the planner (one turn at a time) and close the turn with what it said."""
        async with self._turn_lock:
            stale = self._stale(turn.spoken_at, turn.watch.started, turn.expires_at)
            if stale is not None:  # it waited behind other turns until it was too old
                self.said.say(
                    "turn:stale_waiting",
                    logging.WARNING,
                    "turn %s not asked: stale (%s)",
                    turn.turn_id,
                    stale,
                    extra=_ids(turn),
                )
                close = partial(
                    self.close_unanswered, turn.turn_id, turn.pair_id, "rejected", "stale"
                )
                await self._closing(turn, close)
                return
            try:
                answer = await self._ask(turn)
                status = await self._closing(turn, partial(self.close_turn, turn, answer))
                turn.watch.lap("apply")
            except asyncio.CancelledError:
                raise  # stopping: the turn is answered `interrupted` at the next start
            except Exception:
                log.exception("turn %s failed inside the runtime", turn.turn_id)
                close = partial(
                    self.close_unanswered, turn.turn_id, turn.pair_id, "error", "internal_error"
                )
                await self._closing(turn, close)
                return
        if status == "ok":
            timings.turn_answered(self.metrics, turn.watch)
        if status == "offline":
            self.replayer.notify()
        else:  # the cloud answered: the replay need not wait for its backoff
            self.replayer.kick()

    async def _closing(self, turn: Received, close: Callable[[], T]) -> T:
        """Close the turn through the door: while the DB refuses writes the answer waits in
        memory and goes out once storage is back (SPEC §2.4)."""
        return await self.door.until_done("turn answer", close)

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
            log.warning("turn %s: cloud unavailable: %s", turn.turn_id, answer, extra=_ids(turn))
            return self._answer_offline(turn, f"cloud_unavailable: {answer}")
        if isinstance(answer, CloudError):  # rejected or not the contract
            log.warning("turn %s: cloud answer refused: %s", turn.turn_id, answer, extra=_ids(turn))
            self.close_unanswered(turn.turn_id, turn.pair_id, "error", f"cloud_error: {answer}")
            return "error"
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id, turn.text, turn.person_id)
        if answer.memory_update is None:  # taken (docs/contract.md), but never silently
            self.metrics.inc(
                "a2a_turns_without_memory_update_total",
                "planner answers that carried no memory_update (the pair is kept as said)",
            )
            log.warning(
                "turn %s: the planner's answer has no memory_update: the pair keeps the"
                " reply, no sync position or candidates are taken",
                turn.turn_id,
                extra=_ids(turn),
            )
        requested = len(answer.device_workflow_requests) + len(answer.device_task_requests)
        with self.unit() as result:
            for raw in answer.device_workflow_requests:
                result.merge(self.tm.submit(raw, source="planner", turn=ref))
            for raw in answer.device_task_requests:
                fallback = f"task-{new_ulid(self.clock).lower()}"
                result.merge(self.tm.submit_task(raw, fallback_id=fallback, turn=ref))
            changes = plan_update(
                update_input_of(answer), self.memory.sync_position(), tuple(result.accepted)
            )
            self.sync.enqueue(self.memory.apply_turn(turn.pair_id, turn.session_id, changes))
            error = None
            if requested and not result.accepted:
                reasons = dict.fromkeys(reason for _, reason in result.rejected)  # each once
                if any(ignored.reason == "duplicate" for ignored in result.ignored):
                    reasons["duplicate_workflow_id"] = None  # the word P/workflow/request says
                error = "; ".join(reasons) or "rejected"
            status = "rejected" if error else "ok"
            self._respond(
                response_body(
                    turn.turn_id,
                    status,
                    "" if error else answer.assistant_text,  # SPEC §2.4: rejected says nothing
                    route_family=answer.route_family,
                    workflow_ids=result.accepted,
                    error=error,
                )
            )
        self.after_commit(
            partial(
                log.info,
                "turn %s answered: route %s, status %s, workflows %s",
                turn.turn_id,
                answer.route_family,
                status,
                " ".join(result.accepted) or "(none)",
                extra=_ids(turn, route_family=answer.route_family, workflow_ids=result.accepted),
            )
        )
        return status

    def _answer_offline(self, turn: Received, reason: str) -> str:
        """`offline`, and the robot's own small set of intents so it stays safe meanwhile."""
        intent = match_intent(turn.text, self.settings.offline.intents)
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id, turn.text, turn.person_id)
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
            self.after_commit(
                partial(
                    log.info,
                    "turn %s handled on the device: intent %s, %d workflows ended, %s started",
                    turn.turn_id,
                    intent.name,
                    len(result.finished),
                    " ".join(result.accepted) or "(none)",
                    extra=_ids(turn, intent=intent.name, workflow_ids=result.accepted),
                )
            )
        return "offline"

    def close_unanswered(self, turn_id: str, pair_id: str, status: str, reason: str) -> None:
        """Answer `offline`/`error`; the utterance stays recorded as a pair without reply."""
        with self.unit():
            self.sync.enqueue(self.memory.close_unanswered(pair_id, status))
            self._respond(unanswered_body(turn_id, status, reason))

    def _respond(self, body: dict[str, Any]) -> None:
        turn_id = body["turn_id"]
        for _arrival in range(1 + self._repeats.get(turn_id, 0)):  # once per arrival (SPEC 2.4)
            self._send(body)
        self.dedupe.answered(f"turn:{turn_id}", body)  # a later repeat gets it again
        self.after_commit(partial(self._answered, turn_id))

    def _answered(self, turn_id: str) -> None:
        self._repeats.pop(turn_id, None)
        self._acked.discard(turn_id)

    def answer_interrupted(self, state_dir: Path) -> int:
        """At start: the turns a previous run took in and never answered are answered `error`
        — with the body it already sent for those it answered when its DB was replaced
        (edge/store/lost_answers.py), else `interrupted`. Returns how many."""
        at_loss = lost_answers.taken(state_dir)
        pending = self.memory.store.pending_turns()
        for turn_id, pair_id in pending:
            why = STATE_LOST if turn_id in at_loss else INTERRUPTED
            self.close_unanswered(turn_id, pair_id, "error", why)
        if at_loss:
            lost_answers.done(state_dir)
        return len(pending)

    def answer_lost(self, publish: Callable[[str, bytes], object], state_dir: Path) -> None:
        """The state files are no longer the ones written (SPEC §6): no answer can be committed
        now, and the turns taken in and acknowledged will not come again. Each is answered
        `error` straight to the broker (once per arrival), not through the outbox; one not
        acknowledged yet is left to its redelivery after the restart. Their ids are kept
        beside the DB for the next start (edge/store/lost_answers.py)."""
        lost = sorted(self._acked)
        for turn_id in lost:
            body = unanswered_body(turn_id, "error", STATE_LOST)  # what a recovery sends again
            for _arrival in range(1 + self._repeats.pop(turn_id, 0)):
                publish(self.topics.turn_response, jsonx.dumps(body).encode("utf-8"))
        self._acked.clear()
        if lost:
            lost_answers.keep(state_dir, lost)
            log.warning(
                "%d acknowledged turns answered `error`: their answers cannot be kept", len(lost)
            )


def unanswered_body(turn_id: str, status: str, reason: str) -> dict[str, Any]:
    """`P/turn/response` of a turn closed without the planner's answer (one body for the
    recovery and the loss, so a turn answered by both gets the same payload twice)."""
    text = {"offline": OFFLINE_TEXT, "rejected": ""}.get(status, ERROR_TEXT)
    return response_body(turn_id, status, text, error=reason)


STATE_LOST = "interrupted: the state DB was removed or replaced; the runtime restarts"
INTERRUPTED = "interrupted: the runtime restarted mid-turn"


def _ids(turn: Received, **more: Any) -> dict[str, Any]:
    """The log fields of a turn's line (edge/host/log.py)."""
    return fields(turn_id=turn.turn_id, pair_id=turn.pair_id, session_id=turn.session_id, **more)

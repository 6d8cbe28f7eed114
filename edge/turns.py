"""One user turn: record the utterance, ask the planner, record the pair, answer.

The utterance is committed (with its dedupe mark) before the cloud is called, so it is kept
whatever the cloud does. The answer, the pair's completion and the memory update commit in
one transaction with the `P/turn/response` message they cause.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.stopwatch import Stopwatch
from cache.memory import Memory
from cache.model import CandidateIn, SyncPosition
from cache.update import UpdateInput, plan_update
from cloud_client.client import CloudClient
from cloud_client.errors import CloudError, CloudUnavailable
from cloud_client.models import TurnRequest, TurnResponse, VoiceContext
from edge.commits import Commits
from edge.config import Settings
from edge.offline import match_intent
from edge.outbound import DurableOutbox, InboxDedupe
from edge.topics import Topics, TurnRequestMsg
from edge.workflows import WorkflowDriver
from sync.outbox import SyncOutbox
from taskmanager.service import Result, TurnRef

log = logging.getLogger(__name__)

LOCAL_ROUTE = "LOCAL"  # an offline turn the device handled itself
OFFLINE_TEXT = "지금은 클라우드에 연결할 수 없어요. 잠시 후 다시 말씀해 주세요."
ERROR_TEXT = "죄송해요, 요청을 처리하지 못했어요."


@dataclass(frozen=True)
class Received:
    turn_id: str
    pair_id: str
    session_id: str
    text: str
    device_context: dict[str, Any]
    watch: Stopwatch  # laps: take_in, record, queue, snapshot, encode, cloud, decode, apply


class TurnHandler:
    def __init__(
        self,
        *,
        commits: Commits,
        memory: Memory,
        sync_outbox: SyncOutbox,
        workflows: WorkflowDriver,
        cloud_back: Callable[[], None] = lambda: None,
        cloud: CloudClient,
        outbox: DurableOutbox,
        dedupe: InboxDedupe,
        topics: Topics,
        settings: Settings,
        clock: Clock,
    ) -> None:
        self._commits = commits
        self._memory = memory
        self._sync = sync_outbox
        self._workflows = workflows
        self._cloud_back = cloud_back
        self._cloud = cloud
        self._outbox = outbox
        self._dedupe = dedupe
        self._topics = topics
        self._settings = settings
        self._clock = clock

    def receive(
        self, msg: TurnRequestMsg, device_context: dict[str, Any], watch: Stopwatch
    ) -> Received | None:
        """Commit the utterance; None when this turn_id was already taken in. `watch` was
        started when the message arrived."""
        watch.lap("take_in")
        key = f"turn:{msg.turn_id}"
        if self._dedupe.seen(key):
            log.info("turn %s is a redelivery; already taken in", msg.turn_id)
            return None
        with self._commits.atomic():
            pair_id, session_id = self._memory.record_utterance(
                turn_id=msg.turn_id, requested_session=msg.session_id, text=msg.recognized_text
            )
            self._dedupe.mark(key, self._topics.turn_request)
        merged = {**device_context, **(msg.device_context or {})}
        log.info("turn %s recorded in %s", msg.turn_id, session_id)
        watch.lap("record")
        return Received(msg.turn_id, pair_id, session_id, msg.recognized_text, merged, watch)

    def build_request(self, turn: Received) -> TurnRequest:
        snapshot = self._memory.snapshot(turn.session_id)
        return TurnRequest(
            request_id=new_ulid(self._clock),
            device_id=self._settings.device_id,
            recognized_text=turn.text,
            voice_context=VoiceContext(
                recognized_text=turn.text,
                session_id=turn.session_id,
                last_route=self._memory.state("last_route", ""),
                active_workflow_id=self._memory.state("active_workflow_id", ""),
                memory_snapshot=snapshot,
            ),
            device_context=turn.device_context,
        )

    async def answer(self, turn: Received) -> str:
        """Ask the planner and answer the turn; returns the answer's status."""
        turn.watch.lap("queue")
        request = self.build_request(turn)
        turn.watch.lap("snapshot")
        cloud = self._settings.cloud
        # while the cloud is known to be away, one quick try: the user is waiting
        away = self._cloud.unreachable
        try:
            response = await self._cloud.turn(
                request,
                deadline_s=min(cloud.turn_deadline_s, cloud.offline_probe_s)
                if away
                else cloud.turn_deadline_s,
                max_attempts=1 if away else 2,
                watch=turn.watch,
            )
        except CloudUnavailable as exc:
            log.warning("turn %s: cloud unavailable: %s", turn.turn_id, exc)
            self._answer_offline(turn, f"cloud_unavailable: {exc}")
            return "offline"
        except CloudError as exc:  # rejected or not the contract
            log.warning("turn %s: cloud answer refused: %s", turn.turn_id, exc)
            self.close_unanswered(turn.turn_id, turn.pair_id, "error", f"cloud_error: {exc}")
            return "error"
        self._cloud_back()
        status = self._close_answered(turn, response)
        turn.watch.lap("apply")
        return status

    def _answer_offline(self, turn: Received, reason: str) -> None:
        """`offline`, and the robot's own small set of intents so it stays safe meanwhile."""
        intent = match_intent(turn.text, self._settings.offline.intents)
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id)

        def apply() -> Result:
            tm = self._workflows.tm
            result = Result()
            if intent is not None and intent.action == "cancel":
                result = tm.cancel(None, "user")
                result.ignored.clear()
            elif intent is not None:
                task = {
                    "capability_id": intent.capability_id,
                    "operation_id": intent.operation_id,
                    "args": intent.args,
                }
                fallback = f"local-{new_ulid(self._clock).lower()}"
                result = tm.submit_task(task, fallback_id=fallback, turn=ref)
            self._sync.enqueue(self._memory.close_unanswered(turn.pair_id, "offline"))
            self._respond(
                turn.turn_id,
                "offline",
                intent.reply if intent else OFFLINE_TEXT,
                route_family=LOCAL_ROUTE if intent else "",
                workflow_ids=result.accepted,
                error=reason,
            )
            return result

        result = self._workflows.apply(apply)
        if intent is not None:
            log.info(
                "turn %s handled on the device: intent %s, %d workflows ended, %s started",
                turn.turn_id,
                intent.name,
                len(result.finished),
                result.accepted,
            )

    def _close_answered(self, turn: Received, response: TurnResponse) -> str:
        ref = TurnRef(turn.turn_id, turn.pair_id, turn.session_id)
        requested = len(response.device_workflow_requests) + len(response.device_task_requests)
        answer: dict[str, Any] = {}  # what was sent, for the log line

        def apply() -> Result:
            tm = self._workflows.tm
            result = Result()
            for raw in response.device_workflow_requests:
                result.merge(tm.submit(raw, source="planner", turn=ref))
            for raw in response.device_task_requests:
                fallback = f"task-{new_ulid(self._clock).lower()}"
                result.merge(tm.submit_task(raw, fallback_id=fallback, turn=ref))
            changes = plan_update(
                update_input_of(response), self._memory.sync_position(), frozenset(result.accepted)
            )
            self._sync.enqueue(self._memory.apply_turn(turn.pair_id, turn.session_id, changes))
            error = None
            if requested and not result.accepted:
                error = "; ".join(reason for _, reason in result.rejected) or (
                    "every workflow request was a duplicate"
                )
            answer.update(
                self._respond(
                    turn.turn_id,
                    "rejected" if error else "ok",
                    response.assistant_text,
                    route_family=response.route_family,
                    workflow_ids=result.accepted,
                    error=error,
                )
            )
            return result

        self._workflows.apply(apply)
        log.info(
            "turn %s answered: route %s, status %s, workflows %s",
            turn.turn_id,
            response.route_family,
            answer["status"],
            answer["workflow_ids"],
        )
        return str(answer["status"])

    def close_unanswered(self, turn_id: str, pair_id: str, status: str, reason: str) -> None:
        """Answer `offline`/`error`; the utterance stays recorded as a pair without reply."""
        with self._commits.atomic():
            self._sync.enqueue(self._memory.close_unanswered(pair_id, status))
            self._respond(
                turn_id,
                status,
                OFFLINE_TEXT if status == "offline" else ERROR_TEXT,
                error=reason,
            )
            self._commits.after_commit(self._outbox.flush)

    def _respond(
        self,
        turn_id: str,
        status: str,
        assistant_text: str,
        *,
        route_family: str = "",
        workflow_ids: list[str] | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Queue `P/turn/response` in the caller's transaction; returns the message."""
        body: dict[str, Any] = {
            "turn_id": turn_id,
            "status": status,
            "assistant_text": assistant_text,
            "route_family": route_family,
            "workflow_ids": workflow_ids or [],
        }
        if error is not None:
            body["error"] = error
        self._outbox.enqueue(self._topics.turn_response, body)
        return body

    def recover(self) -> int:
        """Answer turns a previous run took in but never answered; returns how many."""
        pending = self._memory.store.pending_turns()
        for turn_id, pair_id in pending:
            self.close_unanswered(
                turn_id, pair_id, "error", "interrupted: the runtime restarted mid-turn"
            )
        return len(pending)


def update_input_of(response: TurnResponse) -> UpdateInput:
    update = response.memory_update
    if update is None:
        return UpdateInput(reply_text=response.assistant_text, route_family=response.route_family)
    pair = update.write_candidates.short_term_pair
    cache_update = update.device_cache_update
    return UpdateInput(
        reply_text=response.assistant_text,
        route_family=response.route_family,
        pair_assistant_text=pair.assistant_text if pair else "",
        pair_route_family=pair.route_family if pair else "",
        pair_workflow_id=pair.workflow_id if pair else "",
        last_route=cache_update.last_route,
        session_summary=cache_update.session_summary,
        active_workflow_id=cache_update.active_workflow_id,
        sync=SyncPosition(update.sync.cursor, update.sync.version) if update.sync else None,
        profile_candidates=tuple(
            CandidateIn(c.key, c.value, c.category, c.confidence, c.evidence_kind)
            for c in update.write_candidates.profile_candidates
        ),
    )

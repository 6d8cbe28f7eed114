"""The parts of a turn that are not the app's unit of work: what was received, the planner
request built from it, the `P/turn/response` body, and the planner's answer turned into the
cache's update input."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a_common.clock import Clock
from a2a_common.ids import new_ulid
from a2a_common.people import HOUSEHOLD
from a2a_common.stopwatch import Stopwatch
from cache import CandidateIn, Memory, SyncPosition, UpdateInput
from cloud_client import TurnRequest, TurnResponse, VoiceContext

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
    spoken_at: datetime | None = None  # when the user spoke, as the front-end said
    expires_at: float | None = None  # perf_counter: the sender's MQTT 5 expiry
    person_id: str = HOUSEHOLD  # whose turn it is (SPEC 5.7)


def staleness(
    *,
    now: datetime,
    spoken_at: datetime | None,
    received_at: float,
    expires_at: float | None,
    max_age_s: float,
) -> str | None:
    """Why a turn is too old to act on (SPEC §2, `mqtt.turn_max_age_s`), or None: a robot must
    not start driving because of something said half a minute ago. Counted from `spoken_at`
    when the front-end (on the same robot and clock) gave it, else from arrival; an MQTT 5
    expiry the sender set counts too."""
    instant = time.perf_counter()
    waited = instant - received_at
    if expires_at is not None and instant >= expires_at:
        return f"its MQTT message expired {instant - expires_at:.1f}s ago"
    if spoken_at is not None:
        waited = (now - spoken_at).total_seconds()
        if -waited > max_age_s:  # same robot, same clock: a wrong clock must not pass as fresh
            return f"spoken_at is {-waited:.1f}s in the future"
    if waited > max_age_s:
        return f"spoken {waited:.1f}s ago, more than turn_max_age_s {max_age_s:g}"
    return None


def turn_request(turn: Received, memory: Memory, *, device_id: str, clock: Clock) -> TurnRequest:
    """SPEC §3.1: the utterance with the memory snapshot and the device's state."""
    return TurnRequest(
        request_id=new_ulid(clock),
        device_id=device_id,
        recognized_text=turn.text,
        voice_context=VoiceContext(
            recognized_text=turn.text,
            session_id=turn.session_id,
            last_route=memory.state("last_route", ""),
            active_workflow_id=memory.state("active_workflow_id", ""),
            memory_snapshot=memory.snapshot(
                turn.session_id, turn.text, turn.device_context, turn.person_id
            ),
            speaker_id=turn.person_id,
        ),
        device_context=turn.device_context,
    )


def response_body(
    turn_id: str,
    status: str,
    assistant_text: str,
    *,
    route_family: str = "",
    workflow_ids: list[str] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """`P/turn/response` (SPEC §2)."""
    body: dict[str, Any] = {
        "turn_id": turn_id,
        "status": status,
        "assistant_text": assistant_text,
        "route_family": route_family,
        "workflow_ids": workflow_ids or [],
    }
    if error is not None:
        body["error"] = error
    return body


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
        pair_category=pair.category if pair else None,
        session_summary_category=cache_update.session_summary_category,
    )

"""Rule-based Korean routing of the reference planner (what `a2a-edge sim cloud` plans).

Rules, in order: stop/negation of purification; a plan for later (no action now); a habit
statement (no action, a memory candidate); dock; vital measurement (the planner cannot grant
consent, SPEC 5.6: it asks in its reply and plans the session only when the user agrees to its
question — the person at the robot grants on the device's UI); rest guidance (content + wait
under an experience contract); purification (move first when the room is not the current one;
a follow-up like "거기 다시" takes the room from memory); a move; otherwise chit-chat (`DEF`).
The planner only plans: the runtime validates and executes exactly these steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ROOMS = ("작은방", "안방", "거실", "주방", "서재", "아이방", "현관")
STOP_WORDS = ("멈춰", "그만", "정지", "중지", "꺼", "하지 마", "하지마", "끄")
LATER_WORDS = ("내일", "나중에", "이따", "다음에", "주말에", "모레")
HABIT_WORDS = ("자주", "보통", "항상", "매일", "늘")
PURIFY_WORDS = ("청정", "깨끗하게", "공기 좀", "환기")
MOVE_WORDS = ("이동", "가줘", "가서", "가 줘", "와줘", "로 가", "으로 가")
DOCK_WORDS = ("충전", "복귀", "도크")
REST_WORDS = ("피곤", "쉬고", "쉴 수", "휴식", "명상", "힘들어")
VITAL_WORDS = ("혈압", "심박", "맥박", "체온", "바이탈", "혈당")
MEASURE_WORDS = ("재", "측정", "확인")
FOLLOW_UP_WORDS = ("거기", "아까", "다시", "또", "한 번 더", "한번 더")
MUSIC_WORDS = ("노래", "음악")
ACCEPT_WORDS = ("응", "좋아", "그래", "네", "부탁해")
CONSENT_WORDS = (*ACCEPT_WORDS, "동의")
CONSENT_QUESTION = "바이탈 측정에 동의하시겠어요? 화면에서 동의를 눌러 주시면 측정 앱을 시작할게요."
VITAL_SCOPE = "capability:vital_app"

EXPERIENCE_CONTRACT = "a2a-experience-policy-v1"


@dataclass
class Planned:
    route_family: str
    assistant_text: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    plan_id: str = ""
    experience: dict[str, Any] | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    asks_consent: str | None = None  # the scope the reply asks the user to grant


def _room(text: str) -> str | None:
    for room in ROOMS:  # 작은방 before 안방 would not matter; longest names first is safest
        if room in text:
            return room
    return None


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _minutes(text: str, default: int = 10) -> int:
    match = re.search(r"(\d+)\s*분", text)
    return int(match.group(1)) if match else default


def _remembered_room(memory: dict[str, Any]) -> str | None:
    """The room of the newest recent pair that named one (the planner reads the snapshot)."""
    pairs = ((memory.get("short_term") or {}).get("recent_pairs")) or []
    for pair in reversed(pairs):
        room = _room(str(pair.get("user", "")))
        if room:
            return room
    return None


def _preferred_room(memory: dict[str, Any]) -> str | None:
    return _profile_value(memory, "preferred_room")


def _profile_value(memory: dict[str, Any], key: str) -> str | None:
    for item in ((memory.get("long_term") or {}).get("profile_items")) or []:
        if item.get("key") == key and isinstance(item.get("value"), str):
            return str(item["value"])
    return None


def _purify(room: str, current: str | None, *, accepted: bool = False) -> Planned:
    kind = "suggestion_accepted" if accepted else "mention"
    candidate = {
        "key": "preferred_room",
        "value": room,
        "category": "device_pattern",
        "confidence": 0.7,
        "evidence_kind": kind,
    }
    if room == current:
        return Planned(
            "ODL",
            f"{room} 청정을 시작할게요.",
            [
                {
                    "step_id": "step_purify",
                    "capability_id": "air_purifier",
                    "operation_id": "start",
                    "args": {"mode": "auto", "room": room},
                    "depends_on": [],
                },
            ],
            "purify_here",
            candidates=[candidate],
        )
    return Planned(
        "ODL",
        f"{room}으로 이동해서 청정을 시작할게요.",
        [
            {
                "step_id": "step_move",
                "capability_id": "mobility",
                "operation_id": "move_to_room",
                "args": {"room": room},
                "depends_on": [],
            },
            {
                "step_id": "step_purify",
                "capability_id": "air_purifier",
                "operation_id": "start",
                "args": {"mode": "auto", "room": room},
                "depends_on": ["step_move"],
            },
        ],
        "room_clean",
        candidates=[candidate],
    )


def rest_experience(experience_id: str, room: str, step_ids: list[str]) -> dict[str, Any]:
    """Seed 003's goal contract for a rest, bound to `step_ids` of plan `wellness_reset`; it
    subscribes to noise and air quality in the room the robot is in."""
    return {
        "contract_version": EXPERIENCE_CONTRACT,
        "experience_id": experience_id,
        "goal_summary": "사용자가 편안하게 쉴 수 있도록 돕는다",
        "desired_effects": ["quiet_environment", "rest_guidance_delivered"],
        "success_criteria": ["quiet_environment", "rest_guidance_delivered"],
        "constraints": ["user_can_cancel"],
        "plan_binding": {
            "plan_id": "wellness_reset",
            "step_ids": step_ids,
            "step_count": len(step_ids),
        },
        "task_event_policy": {
            "decision_events": ["FAILED", "BLOCKED", "TIMEOUT", "NEEDS_USER_INPUT"],
            "terminal_events": ["COMPLETED", "CANCELLED", "WORKFLOW_COMPLETED"],
        },
        "decision_budget": {"max_decisions": 3, "max_replans": 1},
        "observation_policy": {
            "subscriptions": [
                {"kind": "noise", "scope": {"room": room}, "max_age_s": 60},
                {"kind": "air_quality", "scope": {"room": room}, "max_age_s": 300},
            ]
        },
    }


def rest_steps(wait_s: float) -> list[dict[str, Any]]:
    """The purifier's quiet mode and the guidance side by side, then the rest itself."""
    return [
        {
            "step_id": "step_quiet",
            "capability_id": "air_purifier",
            "operation_id": "set_mode",
            "args": {"mode": "quiet"},
            "depends_on": [],
        },
        {
            "step_id": "step_guide",
            "capability_id": "content",
            "operation_id": "play_guidance",
            "args": {"program": "rest_breathing", "minutes": 1},
            "depends_on": [],
        },
        {"step_id": "step_rest", "kind": "wait", "wait_s": wait_s, "depends_on": ["step_guide"]},
    ]


def _rest(text: str, experience_id: str, room: str) -> Planned:
    minutes = _minutes(text)
    steps = rest_steps(minutes * 60)
    experience = rest_experience(experience_id, room, [s["step_id"] for s in steps])
    return Planned(
        "ODL",
        f"{minutes}분 동안 편하게 쉴 수 있도록 공기청정기를 조용하게 하고 안내해 드릴게요.",
        steps,
        "wellness_reset",
        experience,
    )


def _one_step(reply: str, plan_id: str, step_id: str, op: str, args: dict[str, Any]) -> Planned:
    """A one-step ODL plan; `op` is `capability.operation`."""
    capability_id, _, operation_id = op.partition(".")
    step: dict[str, Any] = {
        "step_id": step_id,
        "capability_id": capability_id,
        "operation_id": operation_id,
        "args": args,
        "depends_on": [],
    }
    return Planned("ODL", reply, [step], plan_id)


def _habit(room: str | None, purify: bool) -> list[dict[str, Any]]:
    """ "나는 … 청정해" names a habit: a weak candidate for the preferred room."""
    if not (room and purify):
        return []
    return [
        {
            "key": "preferred_room",
            "value": room,
            "category": "device_pattern",
            "confidence": 0.6,
            "evidence_kind": "mention",
        }
    ]


def route(
    text: str,
    device_context: dict[str, Any],
    memory: dict[str, Any] | None = None,
    *,
    experience_id: str = "exp-1",
    suggestion: str | None = None,
    consent_asked: str | None = None,
) -> Planned:
    """Plan one utterance. `memory` is the normalized snapshot; `suggestion` a room the cloud
    proposed last turn (an acceptance confirms it); `consent_asked` the scope the cloud asked
    consent for last turn (an acceptance starts what needed it)."""
    memory = memory or {}
    current = device_context.get("current_room")
    current = current if isinstance(current, str) else None
    room = _room(text)
    purify = _has(text, PURIFY_WORDS)
    if purify and _has(text, STOP_WORDS):
        return _one_step("청정을 멈출게요.", "purify_stop", "step_stop", "air_purifier.stop", {})
    if _has(text, LATER_WORDS):
        return Planned("DEF", "알겠어요. 그때 다시 말씀해 주세요.")
    if text.strip().startswith("나는") and _has(text, HABIT_WORDS):
        return Planned("DEF", "그렇군요. 기억해 둘게요.", candidates=_habit(room, purify))
    if _has(text, DOCK_WORDS):
        return _one_step("충전하러 갈게요.", "dock", "step_dock", "mobility.return_to_dock", {})
    if _has(text, VITAL_WORDS) and _has(text, MEASURE_WORDS):
        return Planned("DEF", CONSENT_QUESTION, asks_consent=VITAL_SCOPE)
    if consent_asked == VITAL_SCOPE and _has(text, CONSENT_WORDS):
        text_ = "측정 앱을 시작할게요. 안내에 따라 주세요."
        args = {"kind": "blood_pressure"}
        return _one_step(text_, "vital_check", "step_vital", "vital_app.start_session", args)
    if _has(text, REST_WORDS):
        return _rest(text, experience_id, current or "거실")
    accepted = suggestion is not None and _has(text, ACCEPT_WORDS) and (room in (None, suggestion))
    if accepted and suggestion is not None:
        return _purify(suggestion, current, accepted=True)
    if purify:
        target = room
        if target is None and _has(text, FOLLOW_UP_WORDS):
            target = _remembered_room(memory)
        target = target or current or _preferred_room(memory)
        if target is None:
            return Planned("DEF", "어느 방을 청정할까요?")
        return _purify(target, current)
    if room and _has(text, MOVE_WORDS):
        args = {"room": room}
        return _one_step(
            f"{room}으로 이동할게요.", "move", "step_move", "mobility.move_to_room", args
        )
    if "안녕" in text:
        return Planned("DEF", "안녕하세요! 무엇을 도와드릴까요?")
    if _has(text, MUSIC_WORDS):  # the speaker's own song, when the snapshot holds one (5.7)
        song = _profile_value(memory, "favorite_song")
        return Planned("DEF", f"{song} 틀어드릴게요." if song else "어떤 노래를 틀어드릴까요?")
    return Planned("DEF", "네, 말씀 잘 들었어요.")

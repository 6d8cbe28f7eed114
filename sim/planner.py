"""The reference planner's answers: turns (routing + memory as the seed describes), memory sync
(dedupe, suggestions from suggestable candidates), and a bounded supervisor for workflow events."""

from __future__ import annotations

import json
from typing import Any

from sim.cloud_state import CloudState
from sim.memory import build_memory_update, normalize_memory_context
from sim.routing import ACCEPT_WORDS, route


def plan_turn(state: CloudState, body: dict[str, Any]) -> dict[str, Any]:
    device = str(body.get("device_id", ""))
    text = str(body.get("recognized_text", ""))
    context = body.get("device_context") if isinstance(body.get("device_context"), dict) else {}
    voice = body.get("voice_context") if isinstance(body.get("voice_context"), dict) else {}
    snapshot = voice.get("memory_snapshot") if isinstance(voice, dict) else None
    memory = normalize_memory_context(snapshot if isinstance(snapshot, dict) else {})
    # SPEC 5.7: a suggestion is one person's (the speaker's, or the household's)
    who = _who(device, voice.get("speaker_id") if isinstance(voice, dict) else None)
    with state.lock:
        state.normalized.append(memory)
        suggestion = state.suggestions.get(who)
        asked = state.consent_asks.pop(device, None)  # an ask is answered by the next turn
    planned = route(
        text,
        context or {},
        memory,
        experience_id=state.next_id("exp"),
        suggestion=suggestion,
        consent_asked=asked,
    )
    if planned.asks_consent:
        with state.lock:
            state.consent_asks[device] = planned.asks_consent
    workflows: list[dict[str, Any]] = []
    if planned.steps:
        workflow_id = state.next_id("wf")
        request = {
            "workflow_id": workflow_id,
            "plan_id": planned.plan_id,
            "steps": planned.steps,
            "experience": planned.experience,
        }
        workflows.append(request)
        with state.lock:
            state.planned[workflow_id] = request
    reply = planned.assistant_text
    with state.lock:
        if any(c.get("evidence_kind") == "suggestion_accepted" for c in planned.candidates):
            state.suggestions.pop(who, None)
        elif suggestion and not planned.steps and not any(w in text for w in ACCEPT_WORDS):
            reply += f" 참, {suggestion} 청정을 시작할까요?"
    workflow_id = workflows[0]["workflow_id"] if workflows else ""
    return {
        "request_id": body.get("request_id", ""),
        "route_family": planned.route_family,
        "assistant_text": reply,
        "device_task_requests": [],
        "device_workflow_requests": workflows,
        "memory_update": build_memory_update(
            recognized_text=text,
            route_family=planned.route_family,
            workflow_id=workflow_id,
            sync=state.next_sync(device),
            session_summary=f"최근 요청: {text[:40]}",
            profile_candidates=planned.candidates,
        ),
    }


def memory_sync(state: CloudState, device: str, body: dict[str, Any]) -> tuple[int, Any]:
    """`/v1/a2a/memory/sync`: dedupe by write_id, apply once, in order; scripted answers. A
    suggestable room candidate becomes the next turn's proactive suggestion."""
    writes = [w for w in body.get("writes") or [] if isinstance(w, dict)]
    scripted, script = state.next_scripted(state.sync_script)
    if scripted and script.get("status") == 409:
        return 409, {
            "error": "version_conflict",
            "sync": state.next_sync(device),
            "updates": script.get("updates") or {},
        }
    if scripted and script.get("status", 200) != 200:
        return int(script["status"]), {"error": "scripted"}
    marker = state.reject_marker
    poison = {
        str(w.get("write_id"))
        for w in writes
        if marker and marker in json.dumps(w.get("payload"), ensure_ascii=False)
    }
    if poison and state.reject_mode == "http422":
        return 422, {"error": "unprocessable", "detail": "a write in the batch is invalid"}
    acked: list[str] = []
    with state.lock:
        for write in writes:
            write_id = str(write.get("write_id"))
            if write_id in poison:
                continue
            if write_id in state.applied:
                state.duplicates += 1
            else:
                state.applied[write_id] = 1
                state.applied_log.append(write)
                _learn(state, device, write)
                if write.get("kind") == "task_terminal":
                    state.take_report((write.get("payload") or {}).get("request_id"))
            acked.append(write_id)
    updates = script.get("updates") if scripted else None
    return 200, {
        "sync": state.next_sync(device),
        "acked": acked,
        "rejected": [{"write_id": w, "reason": "invalid_payload"} for w in sorted(poison)],
        "updates": updates or {},
    }


def _who(device: str, person: object) -> str:
    """Whose suggestion: the device's household, or one person of it (SPEC 5.7)."""
    if not isinstance(person, str) or not person or person == "household":
        return device
    return f"{device}/{person}"


def _learn(state: CloudState, device: str, write: dict[str, Any]) -> None:
    payload = write.get("payload") or {}
    who = _who(device, payload.get("person_id"))
    if write.get("kind") == "profile_candidate" and payload.get("key") == "preferred_room":
        if payload.get("status") == "suggestable" and isinstance(payload.get("value"), str):
            state.suggestions[who] = payload["value"]
        elif payload.get("status") == "confirmed":
            state.suggestions.pop(who, None)


def _experience_decision(event: dict[str, Any], workflow: dict[str, Any]) -> dict[str, Any] | None:
    """Seed 003's bounded supervisor: noise during a rest gets one soothing step (a replan),
    later noise is let be; a step whose evidence is missing is continued past (the criteria
    tell at the end); unmet criteria end the workflow as it is (no wider action)."""
    status = event.get("status")
    if status == "OBSERVATION":
        loud = event.get("kind") == "noise" and workflow.get("replans_used", 0) < 1
        if not loud:
            return {"kind": "continue"}
        n = workflow.get("decisions_used", 1)
        say = "주변이 조금 시끄러워요. 잔잔한 소리를 틀어 드릴게요."
        step = {"step_id": f"step_soothe{n}", "capability_id": "speaker", "operation_id": "say"}
        return {"kind": "replan", "steps": [{**step, "args": {"text": say}}]}
    if status == "FAILED" and event.get("reason") == "evidence_missing":
        return {"kind": "continue"}
    if status == "CRITERIA_UNMET":
        return {"kind": "complete"}
    return None


def supervise(state: CloudState, body: dict[str, Any]) -> dict[str, Any] | None:
    """A bounded supervisor: BLOCKED moves get one replan to another room, then a question;
    repeated failure aborts; a device asking for input gets a question."""
    if not body.get("decision_requested"):
        return None
    scripted, decision = state.next_scripted(state.decision_script)
    if scripted:
        return decision  # type: ignore[no-any-return]
    event = body.get("event") or {}
    workflow = body.get("workflow") or {}
    status = event.get("status")
    experience = _experience_decision(event, workflow)
    if experience is not None:
        return experience
    if status == "NEEDS_USER_INPUT":
        return {"kind": "ask", "question": "도와드릴까요? 화면을 확인해 주세요."}
    if workflow.get("decisions_used", 0) >= 2:  # decisions_used counts this request too
        return {"kind": "abort"}
    if status == "BLOCKED":
        if workflow.get("replans_used", 0) >= 1:
            return {"kind": "ask", "question": "길이 막혔어요. 다른 방으로 갈까요?"}
        n = workflow.get("replans_used", 0) + 1
        return {
            "kind": "replan",
            "steps": [
                {
                    "step_id": f"step_move_alt{n}",
                    "capability_id": "mobility",
                    "operation_id": "move_to_room",
                    "args": {"room": "거실"},
                },
                {
                    "step_id": f"step_purify_alt{n}",
                    "capability_id": "air_purifier",
                    "operation_id": "start",
                    "args": {"mode": "auto", "room": "거실"},
                    "depends_on": [f"step_move_alt{n}"],
                },
            ],
        }
    return None

"""The reference planner's answers, without HTTP (the e2e tests cover the wire)."""

from __future__ import annotations

from sim.cloud_state import CloudState
from sim.planner import memory_sync, plan_turn, supervise
from tests.conftest import fixture_json


def turn_body(text: str, room: str = "거실", snapshot: dict | None = None) -> dict:  # type: ignore[type-arg]
    return {
        "request_id": "r-1",
        "device_id": "robot-1",
        "recognized_text": text,
        "voice_context": {
            "recognized_text": text,
            "session_id": "s",
            "last_route": "",
            "active_workflow_id": "",
            "memory_snapshot": snapshot or {},
        },
        "device_context": {"current_room": room},
    }


def test_turn_plans_a_workflow_and_a_memory_update() -> None:
    state = CloudState()
    answer = plan_turn(state, turn_body("안방으로 가서 청정해줘"))
    [workflow] = answer["device_workflow_requests"]
    assert [s["step_id"] for s in workflow["steps"]] == ["step_move", "step_purify"]
    update = answer["memory_update"]
    assert update["write_candidates"]["short_term_pair"] == {
        "user_text": "안방으로 가서 청정해줘",
        "assistant_text": "",
        "route_family": "ODL",
        "workflow_id": workflow["workflow_id"],
    }
    assert update["device_cache_update"]["active_workflow_id"] == workflow["workflow_id"]
    assert update["write_candidates"]["profile_candidates"][0]["value"] == "안방"
    assert update["sync"] == {"cursor": "cur-1", "version": "v1"}
    assert plan_turn(state, turn_body("안녕"))["memory_update"]["sync"]["version"] == "v2"


def test_incoming_snapshot_is_normalized_like_the_seed() -> None:
    state = CloudState()
    seed = fixture_json("seed_turn_input.json")["voice_context"]["memory_snapshot"]
    plan_turn(state, turn_body("나는 거실을 자주 청정해", snapshot=seed))
    assert state.normalized[-1] == fixture_json("seed_normalized_memory_context.json")


def test_suggestable_candidate_becomes_a_suggestion_then_an_acceptance() -> None:
    state = CloudState()
    write = {
        "write_id": "w1",
        "kind": "profile_candidate",
        "created_at": "",
        "payload": {"key": "preferred_room", "value": "안방", "status": "suggestable"},
    }
    status, _ = memory_sync(state, "robot-1", {"writes": [write]})
    assert status == 200 and state.suggestions == {"robot-1": "안방"}
    chat = plan_turn(state, turn_body("오늘 날씨 어때?"))
    assert chat["assistant_text"].endswith("안방 청정을 시작할까요?")
    yes = plan_turn(state, turn_body("응, 좋아"))
    assert [s["capability_id"] for s in yes["device_workflow_requests"][0]["steps"]] == [
        "mobility",
        "air_purifier",
    ]
    cand = yes["memory_update"]["write_candidates"]["profile_candidates"][0]
    assert cand["evidence_kind"] == "suggestion_accepted"
    assert state.suggestions == {}


def test_sync_dedupes_by_write_id() -> None:
    state = CloudState()
    writes = [
        {"write_id": "a", "kind": "short_term_pair", "payload": {}},
        {"write_id": "b", "kind": "short_term_pair", "payload": {}},
    ]
    memory_sync(state, "d", {"writes": writes})
    _, answer = memory_sync(state, "d", {"writes": writes})
    assert answer["acked"] == ["a", "b"] and state.duplicates == 2
    assert len(state.applied_log) == 2


def test_supervisor_is_bounded() -> None:
    state = CloudState()

    def ask(status: str, used: int, replans: int = 0) -> dict | None:  # type: ignore[type-arg]
        return supervise(
            state,
            {
                "decision_requested": True,
                "event": {"status": status},
                "workflow": {"decisions_used": used, "replans_used": replans},
            },
        )

    first = ask("BLOCKED", 1)
    assert first is not None and first["kind"] == "replan"
    assert first["steps"][0]["args"] == {"room": "거실"}
    assert ask("BLOCKED", 1, replans=1) == {
        "kind": "ask",
        "question": "길이 막혔어요. 다른 방으로 갈까요?",
    }
    assert ask("FAILED", 2) == {"kind": "abort"}
    assert ask("FAILED", 1) is None
    assert supervise(state, {"decision_requested": False, "event": {"status": "FAILED"}}) is None

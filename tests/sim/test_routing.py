"""The reference planner's routing, phrase by phrase (tests/fixtures/routing_cases.json)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.routing import route
from tests.conftest import fixture_json

CASES = fixture_json("routing_cases.json")["cases"]


def op(step: dict[str, Any]) -> str:
    if step.get("kind") == "wait":
        return "wait"
    return f"{step['capability_id']}.{step['operation_id']}"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['text']}@{c['context']}" for c in CASES])
def test_routing_case(case: dict[str, Any]) -> None:
    planned = route(case["text"], case["context"])
    assert planned.route_family == case["route_family"]
    assert [op(s) for s in planned.steps] == case["ops"]
    for index, args in (case.get("args") or {}).items():
        for key, value in args.items():
            assert planned.steps[int(index)]["args"][key] == value
    if case.get("depends"):
        for before, after in zip(planned.steps, planned.steps[1:], strict=False):
            assert after["depends_on"] == [before["step_id"]]
    if case.get("experience"):
        exp = planned.experience
        assert exp is not None
        assert exp["plan_binding"]["step_ids"] == [s["step_id"] for s in planned.steps]
        assert planned.steps[-1]["wait_s"] == 600
    assert planned.asks_consent == case.get("asks_consent")
    assert planned.assistant_text


def test_vital_runs_only_after_the_user_agrees_to_the_consent_question() -> None:
    asked = route("혈압 좀 재줘", {"current_room": "거실"})
    assert asked.steps == [] and "동의" in asked.assistant_text
    scope = asked.asks_consent
    planned = route("응, 동의했어", {"current_room": "거실"}, consent_asked=scope)
    assert [op(s) for s in planned.steps] == ["vital_app.start_session"]
    assert "consent" not in planned.steps[0]  # a flag would grant nothing anyway (SPEC 5.6)
    assert route("응, 동의했어", {"current_room": "거실"}).steps == []  # nothing was asked


def test_follow_up_takes_the_room_from_memory() -> None:
    memory = {
        "short_term": {"recent_pairs": [{"user": "안방으로 가서 청정해줘", "assistant": "..."}]}
    }
    planned = route("거기 다시 청정해줘", {"current_room": "거실"}, memory)
    assert planned.steps[0]["args"] == {"room": "안방"}
    assert route("거기 다시 청정해줘", {"current_room": "거실"}).steps[0]["args"]["room"] == "거실"


def test_the_current_utterance_wins_over_memory() -> None:
    memory = {"long_term": {"profile_items": [{"key": "preferred_room", "value": "안방"}]}}
    planned = route("주방 청정해줘", {"current_room": "거실"}, memory)
    assert planned.steps[0]["args"] == {"room": "주방"}


def test_acceptance_of_a_suggestion_is_evidence() -> None:
    planned = route("응, 좋아", {"current_room": "거실"}, suggestion="안방")
    assert [op(s) for s in planned.steps] == ["mobility.move_to_room", "air_purifier.start"]
    assert planned.candidates[0]["evidence_kind"] == "suggestion_accepted"
    assert route("응, 좋아", {"current_room": "거실"}).steps == []


def test_purification_mentions_a_room_candidate() -> None:
    planned = route("안방 청정해줘", {"current_room": "거실"})
    assert planned.candidates == [
        {
            "key": "preferred_room",
            "value": "안방",
            "category": "device_pattern",
            "confidence": 0.7,
            "evidence_kind": "mention",
        }
    ]

"""One turn through the real process: Mosquitto, the sim cloud over HTTP, the SQLite file."""

from __future__ import annotations

import json
from typing import Any

from sim.broker import Mosquitto, free_port
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually

TURN_PATH = "/v1/a2a/turn"
TURN_REQ = f"{ROOT}/turn/request"
TURN_RESP = f"{ROOT}/turn/response"
ERRORS = f"{ROOT}/runtime/error"
STATUS = f"{ROOT}/runtime/status"


def test_turn_end_to_end(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    probe.publish(f"{ROOT}/device/context", {"current_room": "거실", "battery": 82}, retain=True)

    first = probe.turn("t-1", "안녕", session_id="session-abc")
    assert first["status"] == "ok"
    assert first["route_family"] == "DEF"
    assert first["assistant_text"] == "안녕하세요! 무엇을 도와드릴까요?"
    assert first["workflow_ids"] == []
    second = probe.turn("t-2", "오늘 날씨 어때?", device_context={"battery": 50})
    assert second["status"] == "ok"

    bodies = [r["body"] for r in cloud.requests("/v1/a2a/turn")]
    assert len(bodies) == 2
    body = bodies[1]
    assert body["device_id"] == "robot-test"
    assert body["recognized_text"] == "오늘 날씨 어때?"
    assert body["device_context"] == {"current_room": "거실", "battery": 50}
    voice = body["voice_context"]
    assert voice["recognized_text"] == "오늘 날씨 어때?"
    assert voice["session_id"] == "session-abc"  # kept: well within session_idle_s
    assert voice["last_route"] == "DEF"
    snapshot = voice["memory_snapshot"]
    assert set(snapshot) == {"source", "short_term", "mid_term", "long_term", "sync"}
    assert snapshot["source"] == "ondevice_cache"
    assert snapshot["short_term"] == {
        "recent_pairs": [
            {"user": "안녕", "assistant": "안녕하세요! 무엇을 도와드릴까요?", "route_family": "DEF"}
        ],
        "session_summary": "최근 요청: 안녕",  # what the cloud sent with turn 1
    }
    assert snapshot["mid_term"] == {"daily_summaries": [], "weekly_digest": ""}
    assert snapshot["long_term"] == {"profile_items": []}
    # adopted from turn 1's answer, or already the next one when the replay of turn 1's pair
    # (which races with turn 2) was answered first
    paths = [r["path"] for r in cloud.requests()]
    replayed_first = "/v1/a2a/memory/sync" in paths[: paths.index("/v1/a2a/turn", 1) + 1]
    assert snapshot["sync"] == {"cursor": "cur-1", "version": "v1"} or (
        replayed_first and snapshot["sync"] == {"cursor": "cur-2", "version": "v2"}
    )
    assert len(json.dumps(snapshot, ensure_ascii=False, separators=(",", ":"))) <= 4096

    pairs = state_rows("SELECT turn_id, user_text, status FROM pairs ORDER BY created_at")
    assert pairs == [("t-1", "안녕", "ok"), ("t-2", "오늘 날씨 어때?", "ok")]
    # each answered turn owes the cloud its pair; the replayer delivers both, in order
    eventually(lambda: [w["payload"]["turn_id"] for w in cloud.synced()] == ["t-1", "t-2"])
    # each reply's row leaves the outbox once the broker PUBACKs it
    assert eventually(lambda: state_rows("SELECT count(*) FROM mqtt_outbox") == [(0,)], 5.0)


def test_bad_input_is_refused_and_runtime_keeps_answering(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    probe.publish(TURN_REQ, b"{not json")
    probe.publish(TURN_REQ, b"x" * (1024 * 1024))
    probe.publish(TURN_REQ, {"turn_id": "t-missing"})
    probe.publish(TURN_REQ, {"turn_id": 7, "recognized_text": "숫자 id"})
    probe.publish(TURN_REQ, b"[1, 2]")

    def refusal(word: str) -> Any:
        return probe.wait_for(ERRORS, lambda b: b.get("error") == word)

    garbage = refusal("invalid_json")
    assert garbage["topic"] == TURN_REQ and garbage["detail"] and garbage["ts"]
    assert "65536" in refusal("payload_too_large")["detail"]
    assert "recognized_text" in refusal("missing_field")["detail"]
    assert "turn_id" in refusal("invalid_field")["detail"]
    refusal("not_an_object")

    reply = probe.turn("t-after", "안녕")
    assert reply["status"] == "ok"
    assert state_rows("SELECT turn_id FROM pairs") == [("t-after",)]
    assert len(cloud.requests("/v1/a2a/turn")) == 1


def test_an_oversized_turn_whose_id_comes_first_is_answered_rejected(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """SPEC §2.4: a turn whose turn_id can be read is answered, its refusal carries `ref` —
    also when the payload is too large to parse (its first 4 KiB are searched for the ids)."""
    runtime_factory()
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    huge = {"turn_id": "t-huge", "recognized_text": "가" * 30000}  # 90,046 bytes > 65,536
    probe.publish(TURN_REQ, huge)
    refusal = probe.wait_for(ERRORS, lambda b: b.get("error") == "payload_too_large")
    assert refusal["ref"] == {"turn_id": "t-huge"}
    answer = probe.wait_for(TURN_RESP, lambda b: b.get("turn_id") == "t-huge")
    assert answer["status"] == "rejected"
    assert state_rows("SELECT count(*) FROM pairs") == [(0,)]
    assert cloud.requests("/v1/a2a/turn") == []


BROKEN_WITH_AN_ID = {
    "t-bytes": b'{"turn_id":"t-bytes","recognized_text":"hi \xff"}',  # not UTF-8
    "t-surrogate": b'{"turn_id":"t-surrogate","recognized_text":"hi\\ud800"}',
    "t-extra": b'{"turn_id":"t-extra","recognized_text":"hi","x":"\\udc00"}',
    "t-cut": b'{"turn_id":"t-cut","recognized_text":"\xec\x95\x88',  # JSON cut short
}


def test_a_broken_turn_whose_id_can_be_read_is_answered_rejected(
    state_rows: StateRows, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    """SPEC §2.4: not UTF-8, a lone surrogate, JSON cut short — a turn whose turn_id can be
    read is answered, and its refusal carries `ref`. Before: only a bare runtime/error."""
    runtime_factory()
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    for payload in BROKEN_WITH_AN_ID.values():
        probe.publish(TURN_REQ, payload)
    for turn_id in BROKEN_WITH_AN_ID:
        answer = probe.wait_for(TURN_RESP, lambda b, t=turn_id: b.get("turn_id") == t)
        assert (answer["status"], answer["error"]) == ("rejected", "invalid_json"), turn_id
        refusal = probe.wait_for(
            ERRORS, lambda b, t=turn_id: (b.get("ref") or {}).get("turn_id") == t
        )
        assert refusal["error"] == "invalid_json"
    assert state_rows("SELECT count(*) FROM pairs") == [(0,)]


def test_redelivered_turn_is_applied_once(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    probe.turn("t-dup", "안녕")
    probe.turn("t-next", "안녕")  # ordered after any second answer to t-dup
    probe.publish(TURN_REQ, {"turn_id": "t-dup", "recognized_text": "안녕"})
    probe.turn("t-last", "안녕")
    # SPEC 2.4 (issue 17): a repeat gets the stored response again; nothing runs twice
    answers = [b for b in probe.messages(TURN_RESP) if b["turn_id"] == "t-dup"]
    assert len(answers) == 2 and answers[0] == answers[1]
    assert len(probe.messages(TURN_RESP)) == 4
    assert len(cloud.requests("/v1/a2a/turn")) == 3
    assert state_rows("SELECT count(*) FROM pairs WHERE turn_id = 't-dup'") == [(1,)]


def test_cloud_down_answers_offline_and_keeps_the_utterance(
    state_rows: StateRows, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime_factory(cloud_url=f"http://127.0.0.1:{free_port()}", cloud={"turn_deadline_s": 1.0})
    reply = probe.turn("t-off", "거실 청정해줘")
    assert reply["status"] == "offline"
    assert reply["error"].startswith("cloud_unavailable")
    assert reply["assistant_text"]
    assert state_rows("SELECT user_text, assistant_text, status FROM pairs") == [
        ("거실 청정해줘", "", "offline")
    ]


def test_cloud_garbage_answers_error_and_keeps_the_utterance(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    cloud.set_faults(malformed=True, times=1, path=TURN_PATH)
    reply = probe.turn("t-bad", "안녕")
    assert reply["status"] == "error"
    assert "not JSON" in reply["error"]
    cloud.set_faults(status=400, times=1, path=TURN_PATH)
    assert probe.turn("t-400", "안녕")["status"] == "error"
    assert len(cloud.requests("/v1/a2a/turn")) == 2  # a 4xx is not retried
    assert state_rows("SELECT turn_id, status FROM pairs ORDER BY created_at") == [
        ("t-bad", "error"),
        ("t-400", "error"),
    ]


def test_cloud_5xx_is_retried_within_the_deadline(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory()
    cloud.set_faults(status=503, times=1, path=TURN_PATH)
    assert probe.turn("t-retry", "안녕")["status"] == "ok"
    assert len(cloud.requests("/v1/a2a/turn")) == 2  # a turn tries twice: the user waits


def test_reply_survives_a_broker_kill_while_pending(
    runtime_factory: RuntimeFactory, broker: Mosquitto, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory(cloud={"turn_deadline_s": 8.0})
    probe.wait_for(STATUS, lambda b: b.get("state") == "online")
    cloud.set_faults(latency_s=3.0, times=1, path=TURN_PATH)
    probe.publish(TURN_REQ, {"turn_id": "t-kill", "recognized_text": "안녕"})
    eventually(lambda: len(cloud.requests("/v1/a2a/turn")) == 1, 5.0)
    connects = probe.connects
    broker.kill()
    broker.start()
    probe.wait_connected(connects + 1, timeout_s=10)
    reply = probe.wait_for(TURN_RESP, lambda b: b.get("turn_id") == "t-kill", timeout_s=15)
    assert reply["status"] == "ok"
    assert "READY=1" in (runtime.notify.lines if runtime.notify else [])

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.channel.topics import DeviceContextMsg, Refusal, Topics, TurnRequestMsg, parse
from edge.runtime.routes import Route, Router
from tests.examples import examples

LIMIT = 65536


@pytest.mark.parametrize(
    ("payload", "word"),
    [
        (b"{oops", "invalid_json"),
        (b"\xff\xfe{}", "invalid_json"),
        (b"[" * 100000 + b"]" * 100000, "payload_too_large"),
        (b"[" * 20000 + b"]" * 20000, "invalid_json"),
        (b'"text"', "not_an_object"),
        (b"null", "not_an_object"),
        (b'{"turn_id": "t"}', "missing_field"),
        (b'{"turn_id": 1, "recognized_text": "x"}', "invalid_field"),
        (b'{"turn_id": "t", "recognized_text": ""}', "invalid_field"),
        (b'{"turn_id": "t", "recognized_text": "x", "device_context": 3}', "invalid_field"),
        (b'{"turn_id": "t", "recognized_text": "x", "n": NaN}', "invalid_json"),
        (b'{"turn_id": "t", "recognized_text": "x", "n": 1e999}', "invalid_field"),
        (b'{"turn_id": "t", "recognized_text": "x", "n": ' + b"9" * 5000 + b"}", "invalid_json"),
    ],
)
def test_refusals(payload: bytes, word: str) -> None:
    result = parse(TurnRequestMsg, payload, LIMIT)
    assert isinstance(result, Refusal)
    assert result.error == word
    assert result.detail


def test_refusal_detail_does_not_echo_the_users_words() -> None:
    payload = json.dumps({"turn_id": ["비밀번호 1234"], "recognized_text": "비밀번호 1234"})
    result = parse(TurnRequestMsg, payload.encode(), LIMIT)
    assert isinstance(result, Refusal)
    assert "1234" not in result.detail


def test_valid_turn_request_keeps_korean_text() -> None:
    payload = '{"turn_id":"t-1","recognized_text":"안방으로 가서 청정해줘","extra":1}'.encode()
    result = parse(TurnRequestMsg, payload, LIMIT)
    assert isinstance(result, TurnRequestMsg)
    assert result.recognized_text == "안방으로 가서 청정해줘"


def test_device_context_battery_range() -> None:
    assert isinstance(parse(DeviceContextMsg, b'{"battery": 101}', LIMIT), Refusal)
    ok = parse(DeviceContextMsg, '{"current_room": "거실", "battery": 82}'.encode(), LIMIT)
    assert not isinstance(ok, Refusal)


def test_routes_under_the_device_root_only() -> None:
    turn = Route(TurnRequestMsg, lambda _msg, _arrival: None)
    router = Router(Topics("a2a", "robot-1"), {"turn/request": turn})
    assert router.route("a2a/robot-1/turn/request") is turn
    assert router.route("a2a/robot-2/turn/request") is None
    assert router.route("other/robot-1/turn/request") is None
    assert router.route("a2a/robot-1/turn/response") is None
    assert router.subscriptions() == ["a2a/robot-1/turn/request"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.binary(max_size=256), json_values.map(lambda v: json.dumps(v).encode())))
def test_any_payload_is_parsed_or_refused_never_raises(payload: bytes) -> None:
    result = parse(TurnRequestMsg, payload, LIMIT)
    assert isinstance(result, Refusal | TurnRequestMsg)

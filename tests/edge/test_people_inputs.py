"""SPEC §5.7 at the door: `speaker` on a turn, `person` on a consent request, `scope: person`
on a forget — ids validated like every id (bounded, no MQTT wildcard, no `/`, NFC)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from edge.channel.topics import (
    ConsentRequestMsg,
    ForgetMsg,
    Refusal,
    TurnRequestMsg,
    parse,
)

MAX = 65536


def turn(speaker: object) -> bytes:
    body = {"turn_id": "t1", "recognized_text": "안방 청정해줘", "speaker": speaker}
    return json.dumps(body, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "speaker",
    [
        {"id": "mom/1", "confidence": 0.9},
        {"id": "mom#", "confidence": 0.9},
        {"id": "a+b", "confidence": 0.9},
        {"id": "two words", "confidence": 0.9},
        {"id": "", "confidence": 0.9},
        {"id": "x" * 65, "confidence": 0.9},
        {"id": 7, "confidence": 0.9},
        {"id": "mom", "confidence": 1.5},
        {"id": "mom", "confidence": "0.9"},
        {"id": "mom"},
        "mom",
    ],
)
def test_a_bad_speaker_is_refused_with_its_field(speaker: object) -> None:
    refused = parse(TurnRequestMsg, turn(speaker), MAX)
    assert isinstance(refused, Refusal), refused
    assert refused.error in ("invalid_field", "missing_field"), refused
    assert refused.detail.startswith("speaker")


def test_a_speaker_id_is_taken_in_nfc() -> None:
    nfd = unicodedata.normalize("NFD", "엄마")
    msg = parse(TurnRequestMsg, turn({"id": nfd, "confidence": 0.8}), MAX)
    assert isinstance(msg, TurnRequestMsg) and msg.speaker is not None
    assert msg.speaker.id == "엄마" and msg.speaker.confidence == 0.8


def test_a_turn_without_speaker_is_still_a_turn() -> None:
    body = {"turn_id": "t1", "recognized_text": "안녕"}
    msg = parse(TurnRequestMsg, json.dumps(body).encode(), MAX)
    assert isinstance(msg, TurnRequestMsg) and msg.speaker is None


def test_consent_may_name_a_person_and_refuses_a_bad_one() -> None:
    body = {"request_id": "c1", "action": "grant", "scope": "category:health", "person": "엄마"}
    msg = parse(ConsentRequestMsg, json.dumps(body).encode(), MAX)
    assert isinstance(msg, ConsentRequestMsg) and msg.person == "엄마"
    bad = parse(ConsentRequestMsg, json.dumps(body | {"person": "a/#"}).encode(), MAX)
    assert isinstance(bad, Refusal) and bad.error == "invalid_field"


def test_forget_takes_a_person_and_refuses_a_bad_id() -> None:
    body = {"request_id": "f1", "scope": "person", "id": "son-3"}
    msg = parse(ForgetMsg, json.dumps(body).encode(), MAX)
    assert isinstance(msg, ForgetMsg) and msg.scope == "person"
    for bad in ({"id": "a/b"}, {"id": "+"}, {}):
        refused = parse(ForgetMsg, json.dumps(body | bad).encode() if bad else b"", MAX)
        assert isinstance(refused, Refusal)
    missing = {"request_id": "f1", "scope": "person"}
    assert isinstance(parse(ForgetMsg, json.dumps(missing).encode(), MAX), Refusal)

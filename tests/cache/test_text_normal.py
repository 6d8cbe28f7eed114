"""Issue 30 item 7 in process: one room, one key (SPEC §2.4). 안방 composed (NFC), decomposed
(NFD) or with a zero-width space, and `preferred_room` with a format character inside, are one
profile item, whatever the source (the cloud's update, the device's observation, a sync answer,
a forget request); and a forget reaches the variants a cache made before the door normalised."""

from __future__ import annotations

import json
import unicodedata

import pytest
from pydantic import ValidationError

from a2a_common.clock import ManualClock
from a2a_common.text import normal, normal_value
from cache.memory import Memory
from cache.model import CandidateIn
from cloud_client.models import ProfileCandidateWire, ShortTermPairWire, SyncUpdates
from edge.channel.topics import AdminRequestMsg, ForgetMsg, TurnRequestMsg

DAY = 86400.0
NFC = "안방"
NFD = unicodedata.normalize("NFD", NFC)
ZW = "안\u200b방"  # a zero-width space inside
KEY = "preferred_room"
ZW_KEY = "preferred\u200b_room"
BOM_KEY = "\ufeffpreferred_room"


def test_the_normaliser() -> None:
    assert NFD != NFC and len(NFD) == 6
    for variant in (NFD, ZW, f"\ufeff{NFD}", NFD[:2] + "\u200d" + NFD[2:], "안\u2060방\u00ad"):
        assert normal(variant) == NFC, ascii(variant)
    assert normal(ZW_KEY) == normal(BOM_KEY) == KEY
    assert normal("plain ascii") == "plain ascii"
    assert normal(normal(NFD + ZW)) == normal(NFD + ZW) == NFC + NFC
    assert normal_value({ZW_KEY: [NFD, 1, None, {"r": ZW}], "n": 0.5}) == {
        KEY: [NFC, 1, None, {"r": NFC}],
        "n": 0.5,
    }


def cand(key: str, value: str, kind: str = "mention") -> CandidateIn:
    return CandidateIn(key, value, "device_pattern", 0.8, kind)  # type: ignore[arg-type]


def mention(memory: Memory, text: str, *cands: CandidateIn) -> str:
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t-{memory.now().isoformat()}", requested_session=None, text=text
        )
        for c in cands:
            memory.profile.add_evidence(c, pair_id=pair_id, session_id=session, source="cloud")
    return pair_id


def rows(memory: Memory) -> list[tuple[str, str, str]]:
    return memory.db.execute(
        "SELECT key, value, status FROM profile_items ORDER BY key, value"
    ).fetchall()


def test_three_spellings_on_three_days_are_one_suggestable_item(
    memory: Memory, clock: ManualClock
) -> None:
    """On main: three candidates (NFC, NFD, zero-width value under a zero-width key), each one
    mention on one day — none suggestable, and `memory show` listed three 안방."""
    for key, value in ((KEY, NFC), (KEY, NFD), (ZW_KEY, ZW)):
        mention(memory, f"{value} 청정해줘", cand(key, value))
        clock.advance(DAY)
    assert rows(memory) == [(KEY, json.dumps(NFC, ensure_ascii=False), "suggestable")]
    texts = [t for (t,) in memory.db.execute("SELECT user_text FROM pairs ORDER BY created_at")]
    assert texts == [f"{NFC} 청정해줘"] * 3  # the words are kept as read, too
    mention(memory, f"{NFD} 청정해줘", cand(BOM_KEY, NFD, "suggestion_accepted"))
    assert rows(memory) == [(KEY, json.dumps(NFC, ensure_ascii=False), "confirmed")]
    items = memory.snapshot(None, f"{NFD} 청정해줘")["long_term"]["profile_items"]
    assert [(i["key"], i["value"]) for i in items] == [(KEY, NFC)]


def test_a_cloud_confirmed_item_and_a_cloud_delete_read_the_same(memory: Memory) -> None:
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": ZW_KEY, "value": NFD})
        memory.profile.put_confirmed({"key": KEY, "value": {"room": ZW}})
    assert rows(memory) == [
        (KEY, json.dumps(NFC, ensure_ascii=False), "candidate"),  # superseded by the next
        (KEY, json.dumps({"room": NFC}, ensure_ascii=False, separators=(",", ":")), "confirmed"),
    ]
    with memory.db.atomic():
        assert memory.profile.delete_key(BOM_KEY) == 2
    assert rows(memory) == []


def _old_variants(memory: Memory) -> None:
    """Rows a cache wrote before the door normalised: the same key and value, spelt three ways."""
    with memory.db.atomic():
        for n, (key, value) in enumerate(((KEY, NFC), (KEY, NFD), (ZW_KEY, ZW))):
            memory.db.execute(
                "INSERT INTO profile_items (item_id, key, value, status, created_at, updated_at)"
                " VALUES (?, ?, ?, 'candidate', 'T0', 'T0')",
                [f"p{n}", key, json.dumps(value, ensure_ascii=False)],
            )


def test_forget_key_reaches_the_variants_a_cache_made_before(memory: Memory) -> None:
    """On main `forget --key preferred_room` left the zero-width key's item behind."""
    _old_variants(memory)
    with memory.db.atomic():
        gone = memory.forgetter.forget("profile_key", f"{KEY}\u200b")
    assert sorted(gone.items) == ["p0", "p1", "p2"]
    assert sorted(gone.keys) == sorted([KEY, ZW_KEY])  # the cloud is told the stored keys
    assert gone.target == KEY
    assert rows(memory) == []


def test_revoke_reaches_the_variants_a_cache_made_before(memory: Memory) -> None:
    _old_variants(memory)
    with memory.db.atomic():
        items, write = memory.forgetter.revoke(BOM_KEY)
    assert items == ["p0", "p1", "p2"]
    assert write is not None and write.payload["id"] == KEY
    assert [status for _k, _v, status in rows(memory)] == ["revoked"] * 3
    with memory.db.atomic():
        assert memory.forgetter.revoke("no_such_key") == ([], None)


def test_the_device_observation_and_the_console_utterance_are_normalised(
    memory: Memory, clock: ManualClock
) -> None:
    for _ in range(3):
        mention(memory, "청정해줘", CandidateIn(KEY, NFD, "device_pattern"))  # a task's arg
        clock.advance(DAY)
    assert rows(memory) == [(KEY, json.dumps(NFC, ensure_ascii=False), "suggestable")]
    with memory.db.atomic():
        memory.profile.put_confirmed({"key": "hobby", "value": "등산"})
    typed = unicodedata.normalize("NFD", "주말에 등산 갈까")
    items = memory.snapshot_for(typed, {"current_room": NFD})["long_term"]["profile_items"]
    assert items and items[0]["key"] == "hobby"


def test_the_doors_take_texts_keys_and_values_normalised() -> None:
    said = f"{NFD} 청정\u200b해줘"
    turn = TurnRequestMsg.model_validate({"turn_id": "t", "recognized_text": said})
    assert turn.recognized_text == f"{NFC} 청정해줘"
    with pytest.raises(ValidationError):  # nothing left to read: refused, not an empty turn
        TurnRequestMsg.model_validate({"turn_id": "t", "recognized_text": "\u200b\ufeff"})
    forget = ForgetMsg.model_validate({"request_id": "r", "scope": "profile_key", "id": ZW_KEY})
    assert forget.id == KEY
    admin = AdminRequestMsg.model_validate(
        {"request_id": "r", "command": "memory.revoke", "args": {"key": BOM_KEY}}
    )
    assert admin.args == {"key": KEY}
    wire = ProfileCandidateWire.model_validate({"key": ZW_KEY, "value": [NFD, ZW]})
    assert (wire.key, wire.value) == (KEY, [NFC, NFC])
    with pytest.raises(ValidationError):
        ProfileCandidateWire.model_validate({"key": "\u200b", "value": NFC})
    assert ShortTermPairWire.model_validate({"assistant_text": NFD}).assistant_text == NFC
    updates = SyncUpdates.model_validate(
        {"profile_items": [{"key": BOM_KEY, "value": ZW}], "deleted_profile_keys": [ZW_KEY]}
    )
    assert (updates.profile_items[0].key, updates.profile_items[0].value) == (KEY, NFC)
    assert updates.deleted_profile_keys == [KEY]


def test_a_value_nested_past_the_gates_depth_is_refused_not_recursed_into() -> None:
    """A cloud profile value 5,000 levels deep is a field error, not a RecursionError."""
    import pytest

    from a2a_common.text import normal_value

    deep: object = "안방"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than"):
        normal_value(deep)
    assert normal_value({"방": ["안방"]}) == {"방": ["안방"]}


def test_invisible_marks_that_are_not_format_characters_are_removed_too() -> None:
    """A combining grapheme joiner (U+034F), a variation selector (U+FE0F) or a Hangul filler
    split a key as a zero-width space does: one room, one key (outside attack on issue 30)."""
    from a2a_common.text import normal

    room = "안방"
    for variant in ("안\u034f방", "안방\ufe0f", "안\u3164방", "안방\U000e0101", "\u115f안방"):
        assert normal(variant) == room, repr(variant)
    assert normal("preferred_room\u034f") == "preferred_room"
    assert normal("e\u0301") == "\u00e9"  # a combining mark that is not ignorable composes

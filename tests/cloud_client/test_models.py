"""Bounds on what the cloud sends and the device keeps (issue 16 item 5): names over their bound
make the body invalid, kept texts are cut, categories lower-cased, instants normalised."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from cloud_client.models import TEXT_MAX, MemoryUpdateWire, SyncUpdates, TurnResponse


def turn(memory_update: dict[str, Any]) -> dict[str, Any]:
    return {
        "request_id": "r1",
        "route_family": "DEF",
        "assistant_text": "네",
        "memory_update": memory_update,
    }


@pytest.mark.parametrize(
    ("where", "field", "value"),
    [
        ("device_cache_update", "last_route", "R" * 33),
        ("device_cache_update", "active_workflow_id", "w" * 97),
        ("sync", "version", "v" + "1" * 40),
        ("sync", "cursor", "c" * 129),
    ],
)
def test_a_name_over_its_bound_makes_the_turn_answer_invalid(
    where: str, field: str, value: str
) -> None:
    update: dict[str, Any] = {"sync": {"cursor": "c", "version": "v1"}}
    update.setdefault(where, {})[field] = value
    with pytest.raises(ValidationError) as raised:
        TurnResponse.model_validate(turn(update))
    assert raised.value.errors()[0]["loc"][-1] == field


def test_kept_texts_are_cut_and_categories_lowered() -> None:
    update = MemoryUpdateWire.model_validate(
        {
            "device_cache_update": {"session_summary": "요" * 100_000, "last_route": "ODL"},
            "write_candidates": {
                "short_term_pair": {"assistant_text": "a" * 9000},
                "profile_candidates": [
                    {"key": "bp", "value": "high", "category": " Health "},
                    {"key": "room", "value": "거실", "category": ""},
                ],
            },
        }
    )
    assert len(update.device_cache_update.session_summary) == TEXT_MAX
    assert update.write_candidates.short_term_pair is not None
    assert len(update.write_candidates.short_term_pair.assistant_text) == TEXT_MAX
    assert [c.category for c in update.write_candidates.profile_candidates] == ["health", None]


def test_sync_updates_are_bounded() -> None:
    item = {
        "key": "k",
        "value": "v",
        "category": "HOME_LAYOUT",
        "expire_at": "2026-07-01T09:00:00+09:00",
    }
    valid = SyncUpdates.model_validate(
        {"profile_items": [item], "daily_summaries": [{"day": "2026-06-24", "summary": "s" * 5000}]}
    ).model_dump(mode="json")
    assert valid["profile_items"][0]["category"] == "home_layout"
    assert valid["profile_items"][0]["expire_at"] == "2026-07-01T00:00:00.000Z"  # our form
    assert len(valid["daily_summaries"][0]["summary"]) == TEXT_MAX
    for bad in (
        {"profile_items": [{**item, "value": "x" * 2000}]},  # a value over 1 KiB of JSON
        {"profile_items": [{**item, "expire_at": "next week"}]},
        {"profile_items": [{**item, "source_pair_ids": ["p"] * 1001}]},
        {"profile_items": [{**item, "key": "k\nk"}]},
        {"deleted_profile_keys": ["k" * 129]},
        {"weekly_digest": {"week": "2026-W26", "digest": "d", "digest_id": "i" * 200}},
    ):
        with pytest.raises(ValidationError):
            SyncUpdates.model_validate(bad)
